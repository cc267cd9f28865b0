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
    let framework = h.framework.as_deref().map(Framework::from);
    match (framework, &h.framework_version) {
        (Some(f), Some(v)) if f != Framework::None => format!("{f} {v}"),
        (Some(f), None) if f != Framework::None => f.to_string(),
        _ => h.role.clone(),
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
    let fw = Framework::from(h.framework.as_deref().unwrap_or(""));
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

#[cfg(test)]
mod tests {
    use super::*;

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
