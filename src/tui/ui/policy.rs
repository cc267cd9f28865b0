//! The allocator's policy and framework in words, for the process panel and the
//! allocator line: sentences are the screen's business, the model keeps the facts.

use crate::model::allocator::ProcAlloc;
use crate::model::named::Framework;
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

/// `pool 105 GiB, 54 % idle (XLA preallocated)`: for allocators whose pool is their
/// policy (JAX, TensorFlow), where the pool holds at least twice what it uses — on the
/// overview row, since a pool that large is memory no other process can have.
pub(crate) fn idle_pool(h: Option<&Hello>, allocated: u64, reserved: u64) -> Option<String> {
    const MIN_IDLE: u64 = 1 << 30;
    let h = h?;
    let idle = reserved.checked_sub(allocated)?;
    if idle < MIN_IDLE || idle.saturating_mul(2) < reserved {
        return None;
    }
    let words = match h.framework.clone().unwrap_or_default() {
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
    Some(format!(
        "pool {}, {} % idle ({words})",
        crate::fmt::human(reserved),
        idle * 100 / reserved.max(1)
    ))
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
        let note = idle_pool(Some(&h), 48 * GIB, 105 * GIB).expect("named");
        assert!(
            note.starts_with("pool 105 GiB, 54 % idle (XLA preallocated)"),
            "{note}"
        );
        assert_eq!(
            idle_pool(Some(&h), 60 * GIB, 105 * GIB),
            None,
            "less than half idle"
        );
        assert_eq!(idle_pool(Some(&h), 0, GIB / 2), None, "under a GiB idle");
        h.framework = Some("torch".into());
        assert_eq!(
            idle_pool(Some(&h), 0, 8 * GIB),
            None,
            "torch's cache has its own words (F)"
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
