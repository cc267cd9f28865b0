//! The allocator's policy and framework in words, for the process panel and the
//! allocator line: sentences are the screen's business, the model keeps the facts.

use crate::model::alerts::config::GrabAllConfig;
use crate::model::alerts::grab_all::{self, Verdict};
use crate::model::alerts::{AlertKind, Severity};
use crate::model::allocator::ProcAlloc;
use crate::model::named::Framework;
use crate::tui::app::App;
use crate::wire::Hello;

/// `torch 2.11`, `jax 0.11`, `interposer`, `companion`.
pub(crate) fn framework_label(p: &ProcAlloc) -> String {
    let Some(h) = &p.hello else {
        return "companion".into();
    };
    match (&h.framework, &h.framework_version) {
        (Some(f), Some(v)) if *f != Framework::None => format!("{f} {v}"),
        (Some(f), None) if *f != Framework::None => f.to_string(),
        _ => h.role.to_string(),
    }
}

/// The allocator policy in words: the companion's own, else `policy_words`.
pub(crate) fn policy(p: &ProcAlloc) -> Option<String> {
    let h = p.hello.as_ref()?;
    if let Some(p) = h.policy.as_ref().filter(|p| !p.is_empty()) {
        return Some(p.clone());
    }
    policy_words(h)
}

/// Words for an allocator policy when the companion sent none.
pub(crate) fn policy_words(h: &Hello) -> Option<String> {
    let conf = h
        .settings
        .get("PYTORCH_CUDA_ALLOC_CONF")
        .or_else(|| h.settings.get("PYTORCH_ALLOC_CONF"));
    let fw = h.framework.clone().unwrap_or_default();
    let alloc = h.allocator.as_deref().unwrap_or("");
    let text = match (fw, alloc) {
        (Framework::Torch, "cudaMallocAsync") => {
            "PyTorch: cudaMallocAsync — the driver's pool, no block map".to_string()
        }
        (Framework::Torch, "expandable_segments") => "PyTorch: expandable_segments".to_string(),
        (Framework::Torch, _) => match conf {
            Some(c) if !c.is_empty() => format!("PyTorch caching allocator ({c})"),
            _ => "PyTorch caching allocator (native)".to_string(),
        },
        (Framework::Tensorflow, _) => {
            match h.settings.get("tf_memory_growth").map(String::as_str) {
                Some("true") => "TF: memory growth on — grows on demand".to_string(),
                Some("false") => "TF: memory growth off — reserved the whole card".to_string(),
                _ => "TF: BFC allocator".to_string(),
            }
        }
        (Framework::Jax, "platform") => "JAX: platform allocator — exact, no pool".to_string(),
        (Framework::Jax, _) => match h
            .settings
            .get("XLA_PYTHON_CLIENT_PREALLOCATE")
            .map(String::as_str)
        {
            Some("false") | Some("0") => "JAX: BFC pool, allocated on demand".to_string(),
            _ => "JAX: BFC pool, preallocated".to_string(),
        },
        (_, "driver") => "native interposer: driver allocations".to_string(),
        _ => return None,
    };
    Some(text)
}

/// What the grab-all rule makes of a process on its card, for the words beside an idle
/// pool: NVML's bytes held now, the card's size, the thresholds, and its alert if raised.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grab<'a> {
    pub held: Option<u64>,
    pub total: u64,
    pub cfg: &'a GrabAllConfig,
    pub alert: Option<Severity>,
}

impl<'a> Grab<'a> {
    /// The rule's view of `pid` on GPU `gpu` (NVML index), holding `held` of `total`.
    pub(crate) fn of(app: &'a App, pid: u32, gpu: u32, held: Option<u64>, total: u64) -> Self {
        let alert = app
            .view_alerts()
            .active()
            .into_iter()
            .find(|a| a.kind == AlertKind::GrabAll && a.pid == Some(pid) && a.gpu == gpu)
            .map(|a| a.severity);
        Grab {
            held,
            total,
            cfg: &app.view_alerts().config().grab_all,
            alert,
        }
    }

    /// `grab-all alert`, `grab-all if it lasts 2m`, or why it is not an alert (`long`:
    /// with the threshold it misses).
    fn words(&self, allocated: u64, long: bool) -> Option<String> {
        if self.alert.is_some() {
            return Some("grab-all alert".into());
        }
        let v = grab_all::verdict(self.held?, self.total, allocated, self.cfg)?;
        Some(match v {
            Verdict::Grab { .. } => format!(
                "grab-all if it lasts {}",
                crate::fmt::duration(self.cfg.persist_ms)
            ),
            _ => v.words(self.cfg, long),
        })
    }
}

/// A pool that holds at least twice what it uses, for allocators whose pool is their
/// policy (JAX, TensorFlow): memory no other process can have, so it is named on the
/// overview row and in the detail, with the policy in two words and the grab-all rule's
/// status when its card share is known: why it is not an alert, or that it is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IdlePool {
    pub pool: u64,
    pub used: u64,
    pub policy: &'static str,
    status: Option<String>,
    status_long: Option<String>,
}

impl IdlePool {
    /// For the overview row, after `alloc …`: `pool 105 GiB · not an alert: 45 % in use ·
    /// XLA preallocated` (the status before the policy: a narrow row cuts the end).
    pub(crate) fn short(&self) -> String {
        let mut parts = vec![format!("pool {}", crate::fmt::human(self.pool))];
        parts.extend(self.status.clone());
        parts.push(self.policy.to_string());
        parts.join(" · ")
    }

    /// For the detail, under the policy line and above the allocated/cached legend, in
    /// `width` columns: `pool 105 GiB · not an alert: 45 % in use (alert under 25 %)`,
    /// without the threshold where that does not fit; `pool 105 GiB, 48.0 GiB used`
    /// without a verdict.
    pub(crate) fn detail(&self, width: usize) -> String {
        let pool = format!("pool {}", crate::fmt::human(self.pool));
        match (&self.status_long, &self.status) {
            (Some(long), _) if pool.chars().count() + 3 + long.chars().count() <= width => {
                format!("{pool} · {long}")
            }
            (_, Some(short)) => format!("{pool} · {short}"),
            _ => format!("{pool}, {} used", crate::fmt::human(self.used)),
        }
    }
}

/// The idle pool of a process whose allocator has handed out `allocated` of `reserved`,
/// if it is one; `grab`: the grab-all rule's view of it.
pub(crate) fn idle_pool(
    h: Option<&Hello>,
    allocated: u64,
    reserved: u64,
    grab: Option<&Grab<'_>>,
) -> Option<IdlePool> {
    const MIN_IDLE: u64 = 1 << 30;
    let h = h?;
    let idle = reserved.checked_sub(allocated)?;
    if idle < MIN_IDLE || idle.saturating_mul(2) < reserved {
        return None;
    }
    let policy = match h.framework.clone().unwrap_or_default() {
        Framework::Jax if h.allocator.as_deref() == Some("platform") => return None,
        Framework::Jax => match h
            .settings
            .get("XLA_PYTHON_CLIENT_PREALLOCATE")
            .map(String::as_str)
        {
            Some("false") | Some("0") => "XLA pool",
            _ => "XLA preallocated",
        },
        Framework::Tensorflow => match h.settings.get("tf_memory_growth").map(String::as_str) {
            Some("false") => "TF whole card",
            _ => "TF pool",
        },
        _ => return None,
    };
    Some(IdlePool {
        pool: reserved,
        used: allocated,
        policy,
        status: grab.and_then(|g| g.words(allocated, false)),
        status_long: grab.and_then(|g| g.words(allocated, true)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_pool_is_named_only_when_it_holds_twice_what_it_uses() {
        const GIB: u64 = 1 << 30;
        let mut h = Hello {
            framework: Some("jax".into()),
            ..Hello::default()
        };
        // The JAX run of the review: 48.0 GiB used of a 104.9 GiB pool.
        let note = idle_pool(Some(&h), 48 * GIB, 105 * GIB, None).expect("named");
        assert_eq!(note.detail(80), "pool 105 GiB, 48.0 GiB used");
        assert_eq!(note.short(), "pool 105 GiB · XLA preallocated");
        assert_eq!(
            idle_pool(Some(&h), 60 * GIB, 105 * GIB, None),
            None,
            "less than half idle"
        );
        assert_eq!(
            idle_pool(Some(&h), 0, GIB / 2, None),
            None,
            "under a GiB idle"
        );
        h.framework = Some("torch".into());
        assert_eq!(
            idle_pool(Some(&h), 0, 8 * GIB, None),
            None,
            "torch's cache has its own words (F)"
        );
    }

    #[test]
    fn the_grab_all_rule_says_why_an_idle_pool_is_not_an_alert() {
        const GIB: u64 = 1 << 30;
        let h = Hello {
            framework: Some("jax".into()),
            ..Hello::default()
        };
        let cfg = GrabAllConfig::default();
        let grab = |held: u64, alert: Option<Severity>| Grab {
            held: Some(held),
            total: 140 * GIB,
            cfg: &cfg,
            alert,
        };
        let note =
            |used: u64, g: &Grab| idle_pool(Some(&h), used, 105 * GIB, Some(g)).expect("named");
        // The review's JAX run: 107 GiB held, 48 GiB of it in use.
        let busy = note(48 * GIB, &grab(107 * GIB, None));
        assert_eq!(
            busy.detail(80),
            "pool 105 GiB · not an alert: 45 % in use (alert under 25 %)"
        );
        assert_eq!(
            busy.detail(48),
            "pool 105 GiB · not an alert: 45 % in use",
            "a side panel"
        );
        assert_eq!(
            busy.short(),
            "pool 105 GiB · not an alert: 45 % in use · XLA preallocated"
        );
        assert!(
            note(3 * GIB, &grab(60 * GIB, None))
                .detail(80)
                .ends_with("not an alert: 43 % of the card (alert from 50 %)")
        );
        assert!(
            note(3 * GIB, &grab(107 * GIB, None))
                .short()
                .contains("grab-all if it lasts 2m")
        );
        assert!(
            note(3 * GIB, &grab(107 * GIB, Some(Severity::Warning)))
                .short()
                .contains("grab-all alert")
        );
        let unknown = Grab {
            held: None,
            ..grab(0, None)
        };
        assert_eq!(
            note(3 * GIB, &unknown).detail(80),
            "pool 105 GiB, 3.00 GiB used",
            "no card share, no verdict"
        );
    }

    #[test]
    fn policy_in_words() {
        let mut h = Hello {
            framework: Some("tensorflow".into()),
            ..Hello::default()
        };
        h.settings.insert("tf_memory_growth".into(), "false".into());
        assert_eq!(
            policy_words(&h).as_deref(),
            Some("TF: memory growth off — reserved the whole card")
        );
        h.framework = Some("torch".into());
        h.allocator = Some("expandable_segments".into());
        assert_eq!(
            policy_words(&h).as_deref(),
            Some("PyTorch: expandable_segments")
        );
    }
}
