//! Grab-all: a process holds a large share of a card while its allocator uses a small part
//! of it (TensorFlow's default preallocation, JAX's 75 % pool, a PyTorch cache kept after a
//! phase that needed it). "Large" is a share of the card that hurts the others, not a
//! fraction fitted to one recording: half the card or more. (The other case, a pool larger than the others on the card can spare, is not implemented: an
//! idle-versus-card-free test also fired on a fragmented cache, whose idle bytes are holes
//! no policy setting returns.) With a companion the
//! allocator's policy is known and the message names the setting and its value; with NVML
//! only gpumon cannot tell a pool from real use, so it stays info and only for the extreme
//! (`nvml_held_frac`). The engine adds the "for minutes" part by requiring persistence.

use super::config::GrabAllConfig;
use super::format::{fit_summary, who};
use super::inputs::Runtime;
use super::{
    AlertKey, AlertKind, Basis, Evidence, Finding, Gate, GateName, Named, Severity, ValueName,
};
use crate::fmt::compact;
use crate::model::named::Framework;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct GrabInput {
    /// What NVML says the process holds (lowest over the persistence period when known).
    pub held: u64,
    pub total: u64,
    /// Allocated bytes from the companion; `None` without one.
    pub allocator_used: Option<u64>,
    /// NVML free on the card now (evidence).
    pub card_free: Option<u64>,
    /// The companion's policy line and settings (environment and framework options).
    pub policy: Option<String>,
    pub settings: Vec<(String, String)>,
}

impl GrabInput {
    fn setting(&self, k: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
}

/// The setting that made the pool, with its value, and how to change it.
fn policy_words(rt: &Runtime, i: &GrabInput) -> String {
    match rt.framework {
        Framework::Jax => {
            let frac = i
                .setting("XLA_PYTHON_CLIENT_MEM_FRACTION")
                .or(i.setting("XLA_CLIENT_MEM_FRACTION"));
            let prealloc = i.setting("XLA_PYTHON_CLIENT_PREALLOCATE");
            let why = match (prealloc, frac) {
                (_, Some(f)) => format!(
                    "JAX preallocated its pool with XLA_PYTHON_CLIENT_MEM_FRACTION={f}"
                ),
                (None, None) => "JAX preallocated 75 % of the card, its default (XLA_PYTHON_CLIENT_PREALLOCATE unset, i.e. true, and no XLA_PYTHON_CLIENT_MEM_FRACTION)".to_string(),
                (Some(p), None) => format!(
                    "JAX preallocated 75 % of the card (XLA_PYTHON_CLIENT_PREALLOCATE={p}, default fraction)"
                ),
            };
            format!(
                "{why}. XLA_PYTHON_CLIENT_PREALLOCATE=false lets it grow on demand; a smaller XLA_PYTHON_CLIENT_MEM_FRACTION caps it."
            )
        }
        Framework::Tensorflow => {
            let growth = i.setting("TF_FORCE_GPU_ALLOW_GROWTH");
            let policy = i.policy.as_deref().unwrap_or("TF: BFC allocator");
            format!(
                "TensorFlow's policy: {policy} (TF_FORCE_GPU_ALLOW_GROWTH={}). tf.config.experimental.set_memory_growth(gpu, True) (or TF_FORCE_GPU_ALLOW_GROWTH=true) lets it grow on demand; a memory_limit caps it.",
                growth.unwrap_or("unset, i.e. false")
            )
        }
        Framework::Torch => {
            let conf = i
                .setting("PYTORCH_CUDA_ALLOC_CONF")
                .or(i.setting("PYTORCH_ALLOC_CONF"))
                .map_or_else(
                    || "PYTORCH_CUDA_ALLOC_CONF unset".to_string(),
                    |c| format!("PYTORCH_CUDA_ALLOC_CONF={c}"),
                );
            format!(
                "PyTorch's caching allocator keeps the segments of a phase that needed them after the tensors are freed ({conf}): torch.cuda.empty_cache() after that phase hands them back; torch.cuda.set_per_process_memory_fraction caps the cache."
            )
        }
        _ => "Enabling memory growth or a memory limit in the framework frees the rest for other processes.".to_string(),
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// What the rule makes of a process whose allocator is known, before persistence: the
/// one definition of its gates, which the screen also words beside an idle pool (why a
/// large pool is not an alert).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Both gates pass: an alert once it lasts `persist_ms`.
    Grab { share: f64, used_share: f64 },
    /// Under `held_frac` of the card: others still have most of it.
    SmallShare { share: f64 },
    /// Its allocator uses more than `used_frac` of what it holds: a pool in use.
    InUse { share: f64, used_share: f64 },
}

impl Verdict {
    /// `not an alert: 46 % in use`, with the threshold it misses when `long` (` (alert
    /// under 25 %)`); `grab-all` when the gates pass.
    pub fn words(&self, cfg: &GrabAllConfig, long: bool) -> String {
        let (what, gate) = match *self {
            Verdict::Grab { .. } => return "grab-all".to_string(),
            Verdict::SmallShare { share } => (
                format!("{:.0} % of the card", 100.0 * share),
                format!("alert from {:.0} %", 100.0 * cfg.held_frac),
            ),
            Verdict::InUse { used_share, .. } => (
                format!("{:.0} % in use", 100.0 * used_share),
                format!("alert under {:.0} %", 100.0 * cfg.used_frac),
            ),
        };
        if long {
            format!("not an alert: {what} ({gate})")
        } else {
            format!("not an alert: {what}")
        }
    }
}

/// The gates on NVML's `held` of a `total`-byte card with `used` allocated; `None` when
/// the card's size is unknown.
pub fn verdict(held: u64, total: u64, used: u64, cfg: &GrabAllConfig) -> Option<Verdict> {
    if total == 0 {
        return None;
    }
    let share = held as f64 / total as f64;
    let used_share = if held == 0 {
        1.0
    } else {
        used as f64 / held as f64
    };
    Some(if share < cfg.held_frac {
        Verdict::SmallShare { share }
    } else if used_share > cfg.used_frac {
        Verdict::InUse { share, used_share }
    } else {
        Verdict::Grab { share, used_share }
    })
}

/// Whether `check` finds a grab-all in `input`, decided on the numbers alone (the policy
/// and settings only word it): the rule runs for every process at every evaluation, and
/// the wording cost more than the rest of it.
pub fn fires(input: &GrabInput, cfg: &GrabAllConfig) -> bool {
    match input.allocator_used {
        Some(used) => matches!(
            verdict(input.held, input.total, used, cfg),
            Some(Verdict::Grab { .. })
        ),
        None => {
            cfg.nvml_only
                && input.total > 0
                && input.held as f64 / input.total as f64 >= cfg.nvml_held_frac
        }
    }
}

/// The lowest share of the card (NVML) at which the rule can fire, with a companion or
/// without: below it NVML's lowest reading over the period is not needed.
pub fn lowest_gate(cfg: &GrabAllConfig) -> f64 {
    if cfg.nvml_only {
        cfg.held_frac.min(cfg.nvml_held_frac)
    } else {
        cfg.held_frac
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
    if input.total == 0 || !fires(input, cfg) {
        return None;
    }
    let share = input.held as f64 / input.total as f64;
    let minutes = (cfg.persist_ms as f64 / 60_000.0).round().max(1.0);
    let held_s = format!("{} ({:.0} %)", compact(input.held), 100.0 * share);
    let mut values = vec![
        Named {
            name: ValueName::HeldNvml,
            bytes: input.held,
        },
        Named {
            name: ValueName::CardTotal,
            bytes: input.total,
        },
    ];
    if let Some(f) = input.card_free {
        values.push(Named {
            name: ValueName::CardFree,
            bytes: f,
        });
    }
    let (severity, basis, message, summary, gates) = match input.allocator_used {
        Some(used) => {
            let Some(Verdict::Grab { share, used_share }) =
                verdict(input.held, input.total, used, cfg)
            else {
                return None;
            };
            let gates = vec![
                Gate {
                    name: GateName::HeldShare,
                    value: share,
                    threshold: cfg.held_frac,
                    passed: true,
                },
                Gate {
                    name: GateName::AllocatorShare,
                    value: used_share,
                    threshold: cfg.used_frac,
                    passed: true,
                },
            ];
            values.push(Named {
                name: ValueName::Allocated,
                bytes: used,
            });
            let whom = "half the card or more";
            (
                Severity::Warning,
                Basis::Allocator,
                format!(
                    "PID {pid} has held {held_s} of GPU {gpu} for at least {minutes} min while its allocator uses only {} ({:.1} % of that): {whom}, taken up front, so other processes on this GPU will fail to allocate. {}",
                    compact(used),
                    100.0 * used_share,
                    policy_words(rt, input)
                ),
                format!(
                    "{} grab-all {:.0}% held, {:.0}% used",
                    who(Some(pid), gpu),
                    pct(input.held, input.total),
                    100.0 * used_share
                ),
                gates,
            )
        }
        None => {
            if !cfg.nvml_only || share < cfg.nvml_held_frac {
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
                vec![Gate {
                    name: GateName::HeldShareNvml,
                    value: share,
                    threshold: cfg.nvml_held_frac,
                    passed: true,
                }],
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
    use crate::fmt::GIB_U64;

    fn tf() -> Runtime {
        Runtime {
            framework: Framework::Tensorflow,
            allocator: Some("bfc".into()),
        }
    }

    #[test]
    fn tensorflow_default_preallocation_is_grab_all() {
        let i = GrabInput {
            held: 131 * GIB_U64,
            total: 141 * GIB_U64,
            allocator_used: Some(3 * GIB_U64),
            ..GrabInput::default()
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
            ..GrabInput::default()
        };
        assert!(check(1, 0, &busy, &tf(), &cfg).is_none());
        let small = GrabInput {
            held: 60 * GIB_U64,
            total: 141 * GIB_U64,
            allocator_used: Some(GIB_U64),
            card_free: Some(70 * GIB_U64),
            ..GrabInput::default()
        };
        assert!(
            check(1, 0, &small, &tf(), &cfg).is_none(),
            "42 % of the card"
        );
        assert!(check(1, 0, &GrabInput { total: 0, ..small }, &tf(), &cfg).is_none());
    }

    #[test]
    fn nvml_only_is_info_and_says_it_may_be_real_use() {
        let i = GrabInput {
            held: 131 * GIB_U64,
            total: 141 * GIB_U64,
            allocator_used: None,
            ..GrabInput::default()
        };
        let f = check(1, 0, &i, &Runtime::default(), &GrabAllConfig::default()).expect("info");
        assert_eq!(f.severity, Severity::Info);
        assert!(f.message.contains("cannot tell"));
        let off = GrabAllConfig {
            nvml_only: false,
            ..GrabAllConfig::default()
        };
        assert!(check(1, 0, &i, &Runtime::default(), &off).is_none());
        let half = GrabInput {
            held: 80 * GIB_U64,
            ..i
        };
        assert!(
            check(1, 0, &half, &Runtime::default(), &GrabAllConfig::default()).is_none(),
            "without the policy, half the card may be real use"
        );
    }

    #[test]
    fn the_verdict_names_the_gate_that_holds_it_back() {
        let cfg = GrabAllConfig::default();
        let t = 140 * GIB_U64;
        assert!(matches!(
            verdict(60 * GIB_U64, t, GIB_U64, &cfg),
            Some(Verdict::SmallShare { .. })
        ));
        let busy = verdict(107 * GIB_U64, t, 48 * GIB_U64, &cfg).expect("known card");
        assert_eq!(
            busy.words(&cfg, true),
            "not an alert: 45 % in use (alert under 25 %)"
        );
        assert_eq!(busy.words(&cfg, false), "not an alert: 45 % in use");
        assert!(matches!(
            verdict(107 * GIB_U64, t, 3 * GIB_U64, &cfg),
            Some(Verdict::Grab { .. })
        ));
        assert_eq!(verdict(1, 0, 0, &cfg), None, "card size unknown");
    }

    fn jax() -> Runtime {
        Runtime {
            framework: Framework::Jax,
            allocator: Some("bfc".into()),
        }
    }

    #[test]
    fn jax_default_and_fraction_are_named_with_their_values() {
        let i = GrabInput {
            held: 105 * GIB_U64,
            total: 140 * GIB_U64,
            allocator_used: Some(4 << 20),
            ..GrabInput::default()
        };
        let cfg = GrabAllConfig::default();
        let f = check(1, 0, &i, &jax(), &cfg).expect("75 % default");
        assert!(
            f.message.contains("75 %") && f.message.contains("XLA_PYTHON_CLIENT_PREALLOCATE unset"),
            "{}",
            f.message
        );
        let half = GrabInput {
            held: 70 * GIB_U64 + (512 << 20),
            settings: vec![("XLA_PYTHON_CLIENT_MEM_FRACTION".into(), "0.5".into())],
            ..i
        };
        let f = check(1, 0, &half, &jax(), &cfg).expect("fraction 0.5");
        assert!(
            f.message.contains("XLA_PYTHON_CLIENT_MEM_FRACTION=0.5"),
            "{}",
            f.message
        );
    }
}
