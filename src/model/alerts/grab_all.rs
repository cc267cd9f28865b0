//! Grab-all: a process holds most of a card while its allocator uses a small part of it
//! (TensorFlow's default preallocation, JAX's 75 % pool). The engine adds the "for
//! minutes" part by requiring the condition to persist.

use super::config::GrabAllConfig;
use super::format::{compact, fit_summary, who};
use super::snapshot::Runtime;
use super::{AlertKey, AlertKind, Basis, Evidence, Finding, Gate, Named, Severity};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrabInput {
    /// What NVML says the process holds (lowest over the persistence period when known).
    pub held: u64,
    pub total: u64,
    /// Allocated bytes from the companion; `None` without one.
    pub allocator_used: Option<u64>,
}

fn hint(rt: &Runtime) -> &'static str {
    match rt.framework.as_str() {
        "tensorflow" => {
            "tf.config.experimental.set_memory_growth(gpu, True) (or TF_FORCE_GPU_ALLOW_GROWTH=true) lets it grow on demand; a memory_limit caps it."
        }
        "jax" => {
            "XLA_PYTHON_CLIENT_PREALLOCATE=false lets it grow on demand; a smaller XLA_PYTHON_CLIENT_MEM_FRACTION caps it."
        }
        "torch" => {
            "torch.cuda.empty_cache() hands the cache back; torch.cuda.set_per_process_memory_fraction caps it."
        }
        _ => {
            "Enabling memory growth or a memory limit in the framework frees the rest for other processes."
        }
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The instantaneous condition; the engine requires it for `cfg.persist_ms`.
pub fn check(
    pid: u32,
    gpu: u32,
    input: &GrabInput,
    rt: &Runtime,
    cfg: &GrabAllConfig,
) -> Option<Finding> {
    if input.total == 0 || (input.held as f64) < cfg.held_frac * input.total as f64 {
        return None;
    }
    let minutes = (cfg.persist_ms as f64 / 60_000.0).round().max(1.0);
    let held_s = format!(
        "{} ({:.0} %)",
        compact(input.held),
        pct(input.held, input.total)
    );
    let mut gates = vec![Gate {
        name: "held share of card".into(),
        value: input.held as f64 / input.total as f64,
        threshold: cfg.held_frac,
        passed: true,
    }];
    let mut values = vec![
        Named {
            name: "held (NVML)".into(),
            bytes: input.held,
        },
        Named {
            name: "card total".into(),
            bytes: input.total,
        },
    ];
    let (severity, basis, message, summary) = match input.allocator_used {
        Some(used) => {
            let share = if input.held == 0 {
                1.0
            } else {
                used as f64 / input.held as f64
            };
            gates.push(Gate {
                name: "allocator share of held".into(),
                value: share,
                threshold: cfg.used_frac,
                passed: share <= cfg.used_frac,
            });
            if share > cfg.used_frac {
                return None;
            }
            values.push(Named {
                name: "allocated".into(),
                bytes: used,
            });
            (
                Severity::Warning,
                Basis::Allocator,
                format!(
                    "PID {pid} has held {held_s} of GPU {gpu} for at least {minutes} min while its allocator uses only {} ({:.0} % of that): the framework grabbed the card up front, and other processes on this GPU will fail to allocate. {}",
                    compact(used),
                    100.0 * share,
                    hint(rt)
                ),
                format!(
                    "{} grab-all {:.0}% held, {:.0}% used",
                    who(Some(pid), gpu),
                    pct(input.held, input.total),
                    100.0 * share
                ),
            )
        }
        None => {
            if !cfg.nvml_only {
                return None;
            }
            (
                Severity::Info,
                Basis::Nvml,
                format!(
                    "PID {pid} has held {held_s} of GPU {gpu} for at least {minutes} min. Without a companion gpumon cannot tell a grab-all allocator (TensorFlow's default preallocation) from real use; if it is one, memory growth or a memory limit frees the rest."
                ),
                format!(
                    "{} holds {:.0}% (grab-all?)",
                    who(Some(pid), gpu),
                    pct(input.held, input.total)
                ),
            )
        }
    };
    Some(Finding {
        key: AlertKey {
            kind: AlertKind::GrabAll,
            pid: Some(pid),
            gpu,
        },
        severity,
        message,
        summary: fit_summary(summary),
        evidence: Evidence {
            basis,
            gates,
            values,
            ..Evidence::default()
        },
        epoch: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::bytes::GIB_U64;

    fn tf() -> Runtime {
        Runtime {
            framework: "tensorflow".into(),
            allocator: Some("bfc".into()),
        }
    }

    #[test]
    fn tensorflow_default_preallocation_is_grab_all() {
        let i = GrabInput {
            held: 131 * GIB_U64,
            total: 141 * GIB_U64,
            allocator_used: Some(3 * GIB_U64),
        };
        let f = check(1, 0, &i, &tf(), &GrabAllConfig::default()).expect("grab-all");
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.message.contains("set_memory_growth"));
        assert!(
            f.summary.chars().count() <= crate::model::alerts::SUMMARY_MAX,
            "{}",
            f.summary
        );
    }

    #[test]
    fn real_use_or_small_share_is_not_grab_all() {
        let cfg = GrabAllConfig::default();
        let busy = GrabInput {
            held: 131 * GIB_U64,
            total: 141 * GIB_U64,
            allocator_used: Some(100 * GIB_U64),
        };
        assert!(check(1, 0, &busy, &tf(), &cfg).is_none());
        let small = GrabInput {
            held: 60 * GIB_U64,
            total: 141 * GIB_U64,
            allocator_used: Some(GIB_U64),
        };
        assert!(check(1, 0, &small, &tf(), &cfg).is_none());
        assert!(check(1, 0, &GrabInput { total: 0, ..small }, &tf(), &cfg).is_none());
    }

    #[test]
    fn nvml_only_is_info_and_says_it_may_be_real_use() {
        let i = GrabInput {
            held: 131 * GIB_U64,
            total: 141 * GIB_U64,
            allocator_used: None,
        };
        let f = check(1, 0, &i, &Runtime::default(), &GrabAllConfig::default()).expect("info");
        assert_eq!(f.severity, Severity::Info);
        assert!(f.message.contains("cannot tell"));
        let off = GrabAllConfig {
            nvml_only: false,
            ..GrabAllConfig::default()
        };
        assert!(check(1, 0, &i, &Runtime::default(), &off).is_none());
    }
}
