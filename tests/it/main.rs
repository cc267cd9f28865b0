//! gpumon's integration tests, as one test binary: each former `tests/NAME.rs` is the module
//! `NAME` here, so tokio, hyper, ratatui and NVML are linked once, not once per file. One
//! area runs with `cargo test --test it NAME::`, one test with
//! `cargo test --test it NAME::TEST -- --exact`.
//!
//! All tests share one process and run on parallel threads: a test must not change
//! process-wide state (environment, current directory, umask, rlimits, signal handlers): a
//! child gets its own through `Command` (`env`, `current_dir`, `pre_exec`). A test that
//! measures the whole process (its RSS, its children's peak RSS) runs alone in a fresh
//! process of this binary: `support::isolate::alone`. Tests that flood gpumon while timing
//! it take `support::serial::flood()`, so two floods never share the two cores.

mod support;

mod alert_exits;
mod alerts_config_asset;
mod alerts_corpus;
mod alerts_corpus2;
mod alerts_corpus3;
mod alerts_corpus4;
mod alerts_corpus_jobs;
mod alerts_divergent;
mod alerts_engine;
mod alerts_golden;
mod alerts_schema;
mod alerts_synthetic;
mod alerts_ui;
mod architecture;
mod auth_flood;
mod broken_pipe;
mod channel;
mod channel_fairness;
mod channel_floods;
mod channel_fuzz;
mod channel_identity;
mod channel_watch;
mod cli;
mod cli_conventions;
mod cli_exit_status;
mod cli_headless;
mod cli_nothing_silent;
mod companion_fields;
mod daemon_logs;
mod distributed_launch;
mod docs_index;
mod exit_killed;
mod export_assets;
mod export_flat;
mod export_http;
mod export_metrics;
mod export_placement;
mod fault_pages;
mod fleet_screens;
mod fleet_tmux;
mod follow_hostile;
mod frag_fields;
mod freeze;
mod http_hostile;
mod inert_output;
mod interact;
mod jobs_tmux;
mod key_habits;
mod keys_tmux;
mod legend;
mod live_frag;
mod man_pages;
mod metrics_process_label;
mod model_bounds;
mod monitoring_assets;
mod msrv;
mod multi_gpu;
mod oom_moment_tmux;
mod output_errors;
mod packaging;
mod postmortem_tmux;
mod procfs_placement;
mod procfs_spawn;
mod prometheus_e2e;
mod rank_row;
mod readme_keys;
mod record_budget;
mod record_errors;
mod record_gzip;
mod replay_follow;
mod replay_streams;
mod report;
mod report_bounds;
mod report_chromium;
mod report_inert;
mod report_jobs;
mod risk_signals;
mod risk_tmux;
mod safe_output;
mod screen_words;
mod screens;
mod signals_tmux;
mod small_holes;
mod tmux_e2e;
mod ui_snapshots;
mod web_config;
mod wheel_glibc;
mod zoom_screens;
mod zoom_tmux;
