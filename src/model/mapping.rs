//! Which logical CUDA device index a process uses for a physical GPU,
//! derived the way the CUDA runtime reads `CUDA_VISIBLE_DEVICES` and
//! `CUDA_DEVICE_ORDER`.
//!
//! CUDA rules modelled here: tokens are integers (positions in CUDA's
//! enumeration order), `GPU-<uuid prefix>` or `MIG-...` ids; parsing stops at
//! the first invalid token (unknown index, ambiguous prefix, duplicate); an
//! empty value hides every GPU. The default order is FASTEST_FIRST, which only
//! equals PCI order when all cards are the same model, so integer tokens are
//! uncertain on mixed boxes unless `CUDA_DEVICE_ORDER=PCI_BUS_ID`.

use serde::{Deserialize, Serialize};

use super::sample::GpuInfo;
use crate::wire::DeviceInfo;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mapping {
    /// The environment could not be read (other user, process gone).
    Unknown,
    /// The process cannot see this GPU per its `CUDA_VISIBLE_DEVICES` (yet it is on it:
    /// shown as a warning, e.g. a library that ignores the variable).
    Hidden,
    /// `cuda:N` inside the process; `uncertain` carries the reason when the
    /// enumeration order makes the index a best guess.
    Logical {
        index: u32,
        uncertain: Option<String>,
        mig: bool,
    },
}

impl Mapping {
    /// Short label for tables: `cuda:1`, `cuda:1?`, `hidden`, `?`.
    pub fn label(&self) -> String {
        match self {
            Mapping::Unknown => "?".into(),
            Mapping::Hidden => "hidden!".into(),
            Mapping::Logical {
                index,
                uncertain,
                mig,
            } => {
                let m = if *mig { "mig" } else { "" };
                let q = if uncertain.is_some() { "?" } else { "" };
                format!("cuda:{index}{m}{q}")
            }
        }
    }
}

/// Map a physical GPU (`target`, an NVML index) to the process-local index.
/// `env_readable == false` yields `Unknown`.
pub fn logical_index(
    gpus: &[GpuInfo],
    target: u32,
    env_readable: bool,
    cvd: Option<&str>,
    order: Option<&str>,
) -> Mapping {
    if !env_readable {
        return Mapping::Unknown;
    }
    let pci_order = order.is_some_and(|o| o.trim() == "PCI_BUS_ID");
    let mut pci: Vec<&GpuInfo> = gpus.iter().collect();
    // CUDA's PCI order. NVML enumerates in that order too, so a card whose bus id could not
    // be read falls back to its NVML index instead of sorting first and shifting the rest.
    if pci.iter().any(|g| g.pci_bus_id.is_empty()) {
        pci.sort_by_key(|g| g.index);
    } else {
        pci.sort_by(|a, b| a.pci_bus_id.cmp(&b.pci_bus_id));
    }
    let mixed_models = pci.windows(2).any(|w| w[0].name != w[1].name);
    let order_doubt = (!pci_order && mixed_models).then(|| {
        "CUDA_DEVICE_ORDER is not PCI_BUS_ID and the cards differ: CUDA orders them fastest-first"
            .to_string()
    });

    let Some(cvd) = cvd else {
        // All GPUs visible, in CUDA's enumeration order.
        return match pci.iter().position(|g| g.index == target) {
            Some(i) => Mapping::Logical {
                index: i as u32,
                uncertain: order_doubt,
                mig: false,
            },
            None => Mapping::Unknown,
        };
    };

    let mut seen: Vec<u32> = Vec::new();
    for (pos, raw) in cvd.split(',').enumerate() {
        let tok = raw.trim();
        let resolved = resolve_token(&pci, tok);
        let Some((phys, mig, by_int)) = resolved else {
            break;
        };
        if seen.contains(&phys) {
            break;
        }
        seen.push(phys);
        if phys == target {
            let uncertain = if by_int { order_doubt.clone() } else { None };
            return Mapping::Logical {
                index: pos as u32,
                uncertain,
                mig,
            };
        }
    }
    Mapping::Hidden
}

/// Resolve one token to (NVML index, is_mig, was_an_integer).
fn resolve_token(pci: &[&GpuInfo], tok: &str) -> Option<(u32, bool, bool)> {
    if tok.is_empty() {
        return None;
    }
    if let Ok(i) = tok.parse::<usize>() {
        return pci.get(i).map(|g| (g.index, false, true));
    }
    if let Some(rest) = tok.strip_prefix("MIG-") {
        // Old form MIG-GPU-<uuid>/gi/ci names the parent directly.
        if let Some(parent) = rest.strip_prefix("GPU-") {
            let uuid = parent.split('/').next().unwrap_or(parent);
            return unique(pci, |g| g.uuid.eq_ignore_ascii_case(&format!("GPU-{uuid}")))
                .map(|g| (g.index, true, false));
        }
        let full = tok.to_ascii_lowercase();
        return unique(pci, |g| {
            g.mig_uuids
                .iter()
                .any(|m| m.to_ascii_lowercase().starts_with(&full))
        })
        .map(|g| (g.index, true, false));
    }
    let prefix = tok.to_ascii_lowercase();
    let prefix = if prefix.starts_with("gpu-") {
        prefix
    } else {
        format!("gpu-{prefix}")
    };
    unique(pci, |g| g.uuid.to_ascii_lowercase().starts_with(&prefix))
        .map(|g| (g.index, false, false))
}

fn unique<'a>(pci: &[&'a GpuInfo], f: impl Fn(&GpuInfo) -> bool) -> Option<&'a GpuInfo> {
    let mut it = pci.iter().filter(|g| f(g));
    let first = it.next()?;
    if it.next().is_some() {
        None
    } else {
        Some(first)
    }
}

/// A UUID without its `GPU-` prefix (any case) and surrounding space; compared without
/// case. Borrowed, not lowered into a new string: checked for every process every tick.
fn bare_uuid(s: &str) -> &str {
    let s = s.trim();
    match s.get(..4) {
        Some(p) if p.eq_ignore_ascii_case("gpu-") => &s[4..],
        _ => s,
    }
}

fn same_uuid(a: &str, b: &str) -> bool {
    bare_uuid(a).eq_ignore_ascii_case(bare_uuid(b))
}

/// `00000000:65:00.0` and `0000:65:00.0` name the same card.
fn norm_pci(s: &str) -> Option<(u32, u32, u32, u32)> {
    let s = s.trim();
    let (dom_bus, devfn) = s.rsplit_once(':')?;
    let (dom, bus) = dom_bus.rsplit_once(':').unwrap_or(("0", dom_bus));
    let (dev, func) = devfn.split_once('.').unwrap_or((devfn, "0"));
    let h = |x: &str| u32::from_str_radix(x, 16).ok();
    Some((h(dom)?, h(bus)?, h(dev)?, h(func)?))
}

/// Does a companion's device name this physical GPU?
pub fn same_gpu(d: &DeviceInfo, gpu: &GpuInfo) -> bool {
    if let Some(u) = d.uuid.as_deref().filter(|u| !u.is_empty()) {
        if u.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("mig-")) {
            return gpu.mig_uuids.iter().any(|m| m.eq_ignore_ascii_case(u));
        }
        if !gpu.uuid.is_empty() {
            return same_uuid(u, &gpu.uuid);
        }
    }
    match (d.pci_bus_id.as_deref(), gpu.pci_bus_id.as_str()) {
        (Some(a), b) if !b.is_empty() => norm_pci(a).is_some() && norm_pci(a) == norm_pci(b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, name: &str, uuid: &str, bus: &str) -> GpuInfo {
        GpuInfo {
            index,
            name: name.into(),
            uuid: uuid.into(),
            pci_bus_id: bus.into(),
            memory_total: 1,
            mig_uuids: vec![],
        }
    }

    fn four() -> Vec<GpuInfo> {
        vec![
            gpu(0, "H200", "GPU-aaaa1111-0000", "00000000:18:00.0"),
            gpu(1, "H200", "GPU-bbbb2222-0000", "00000000:2A:00.0"),
            gpu(2, "H200", "GPU-bbcc3333-0000", "00000000:3A:00.0"),
            gpu(3, "H200", "GPU-dddd4444-0000", "00000000:5D:00.0"),
        ]
    }

    fn idx(m: Mapping) -> Option<u32> {
        match m {
            Mapping::Logical { index, .. } => Some(index),
            _ => None,
        }
    }

    #[test]
    fn integers_reorder_devices() {
        let g = four();
        assert_eq!(idx(logical_index(&g, 2, true, Some("2,3"), None)), Some(0));
        assert_eq!(idx(logical_index(&g, 3, true, Some("2,3"), None)), Some(1));
        assert_eq!(
            logical_index(&g, 0, true, Some("2,3"), None),
            Mapping::Hidden
        );
        assert_eq!(idx(logical_index(&g, 0, true, Some("1,0"), None)), Some(1));
    }

    #[test]
    fn unset_means_all_visible_and_unreadable_means_unknown() {
        let g = four();
        assert_eq!(idx(logical_index(&g, 3, true, None, None)), Some(3));
        assert_eq!(
            logical_index(&g, 3, false, Some("3"), None),
            Mapping::Unknown
        );
        assert_eq!(logical_index(&g, 0, true, Some(""), None), Mapping::Hidden);
    }

    #[test]
    fn uuid_prefixes_must_be_unique() {
        let g = four();
        assert_eq!(
            idx(logical_index(&g, 3, true, Some("GPU-dddd"), None)),
            Some(0)
        );
        // "GPU-bb" matches two cards: CUDA stops parsing there.
        assert_eq!(
            logical_index(&g, 1, true, Some("GPU-bb,1"), None),
            Mapping::Hidden
        );
        assert_eq!(
            idx(logical_index(&g, 1, true, Some("gpu-bbbb2222"), None)),
            Some(0)
        );
    }

    #[test]
    fn parsing_stops_at_first_invalid_or_duplicate_token() {
        let g = four();
        assert_eq!(
            logical_index(&g, 1, true, Some("0,7,1"), None),
            Mapping::Hidden
        );
        assert_eq!(
            idx(logical_index(&g, 0, true, Some("0,7,1"), None)),
            Some(0)
        );
        assert_eq!(
            logical_index(&g, 2, true, Some("1,1,2"), None),
            Mapping::Hidden
        );
    }

    #[test]
    fn mixed_models_make_integer_tokens_uncertain_unless_pci_order() {
        let mut g = four();
        g[3].name = "A100".into();
        let m = logical_index(&g, 3, true, Some("3"), None);
        assert!(matches!(
            m,
            Mapping::Logical {
                index: 0,
                uncertain: Some(_),
                ..
            }
        ));
        assert_eq!(m.label(), "cuda:0?");
        let m = logical_index(&g, 3, true, Some("3"), Some("PCI_BUS_ID"));
        assert!(matches!(
            m,
            Mapping::Logical {
                index: 0,
                uncertain: None,
                ..
            }
        ));
        // UUIDs are exact whatever the order.
        let m = logical_index(&g, 3, true, Some("GPU-dddd4444"), None);
        assert!(matches!(
            m,
            Mapping::Logical {
                uncertain: None,
                ..
            }
        ));
    }

    #[test]
    fn integer_tokens_index_pci_order_not_nvml_list_order() {
        let mut g = four();
        g.swap(0, 3);
        assert_eq!(
            idx(logical_index(&g, 3, true, Some("3"), Some("PCI_BUS_ID"))),
            Some(0)
        );
    }

    #[test]
    fn unreadable_bus_id_does_not_shift_the_others() {
        let mut g = four();
        g[0].pci_bus_id.clear();
        assert_eq!(idx(logical_index(&g, 2, true, Some("2"), None)), Some(0));
        assert_eq!(idx(logical_index(&g, 0, true, None, None)), Some(0));
    }

    #[test]
    fn mig_ids_map_to_parent_card() {
        let mut g = four();
        g[1].mig_uuids = vec!["MIG-1234abcd-5678".into()];
        let m = logical_index(&g, 1, true, Some("MIG-1234abcd"), None);
        assert!(matches!(
            m,
            Mapping::Logical {
                index: 0,
                mig: true,
                ..
            }
        ));
        assert_eq!(m.label(), "cuda:0mig");
        let m = logical_index(&g, 2, true, Some("MIG-GPU-bbcc3333-0000/1/0"), None);
        assert!(matches!(
            m,
            Mapping::Logical {
                index: 0,
                mig: true,
                ..
            }
        ));
    }
}
