//! Memory caps on what companions report: a companion, or a recording, must not be able
//! to grow gpumon without limit.
//!
//! The mechanism: every item gpumon keeps about a companion has a worst-case
//! size (items whose strings are longer than a fixed budget are refused, not
//! kept), every collection has a count cap, so one companion's footprint is
//! bounded by `companion_worst_bytes`; all companions together are held under
//! `MAX_TOTAL_BYTES` of that worst-case accounting by evicting the largest
//! one. The accounting is by counts times worst-case unit sizes, so it costs
//! O(1) per frame and is an upper bound of the real heap use, never a guess
//! below it. docs/limits.md states the resulting ceiling.

use std::collections::BTreeMap;

use crate::model::series::DEFAULT_SERIES_BYTES;
use crate::wire::{
    DeviceInfo, EpochRecord, Frag, FrameworkEvent, Hello, HistBucket, MAX_BUCKET, Marker, Message,
    Sample,
};

/// Devices one companion may report. A process that drives more CUDA devices
/// than this is not a real training job on one host (16-GPU hosts are the
/// largest sold); extra device numbers are refused and counted.
pub const MAX_DEVICES_PER_COMPANION: usize = 16;
/// Highest device number accepted: CUDA ordinals within one process are small
/// integers, so `dev: 4000000000` is an attack or a bug, never a card.
pub const MAX_DEV_NUMBER: u32 = 63;
/// String bytes one kept item (epoch, marker, event, sample, block map) may
/// carry: labels, reasons, source names. Real ones are a few dozen bytes.
pub const MAX_ITEM_STRING_BYTES: usize = 1024;
/// A hello's string bytes (command line, settings, device names) — the wire
/// line limit, applied to recordings too (their lines may be 4 MiB).
pub const MAX_HELLO_STRING_BYTES: usize = 64 * 1024;
/// Companion data kept at once, in worst-case bytes (see module doc); past it
/// the companion with the largest footprint is dropped.
pub const MAX_TOTAL_BYTES: usize = 1 << 30;

/// Worst-case unit sizes (struct plus its string budget plus collection overhead).
const ITEM_BYTES: usize = MAX_ITEM_STRING_BYTES + 256;
/// Four series, the latest sample, the latest block map (≤ 64 buckets), the device info.
pub const DEVICE_BYTES: usize = 4 * DEFAULT_SERIES_BYTES
    + 3 * ITEM_BYTES
    + (MAX_BUCKET as usize + 1) * std::mem::size_of::<HistBucket>();
pub const EPOCH_BYTES: usize = ITEM_BYTES;
pub const EVENT_BYTES: usize = ITEM_BYTES;
pub const MARKER_BYTES: usize = ITEM_BYTES;
/// The hello is kept twice (the process's and a copy per device's info is bounded by the above).
pub const HELLO_BYTES: usize = 2 * MAX_HELLO_STRING_BYTES + 4096;

fn opt_len(s: &Option<String>) -> usize {
    s.as_ref().map_or(0, String::len)
}

fn map_len(m: &BTreeMap<String, String>) -> usize {
    m.iter().map(|(k, v)| k.len() + v.len()).sum()
}

// Each count below names every field of its message (no `..`): a field added to the wire
// type does not compile until it is counted here or marked as no string (`_`), so the cap
// cannot silently stop covering it.

fn dev_info_len(d: &DeviceInfo) -> usize {
    let DeviceInfo {
        dev: _,
        uuid,
        pci_bus_id,
        name,
        total: _,
    } = d;
    opt_len(uuid) + opt_len(pci_bus_id) + opt_len(name)
}

/// String bytes of a hello (checked against `MAX_HELLO_STRING_BYTES`).
pub fn hello_strings(h: &Hello) -> usize {
    let Hello {
        role,
        pid: _,
        ns_pid: _,
        framework,
        framework_version,
        allocator,
        settings,
        policy,
        devices,
        cuda_visible_devices,
        cuda_device_order,
        rank: _,
        local_rank: _,
        world_size: _,
        cmdline,
        program,
        master,
        run_id,
        capabilities,
        sample_hz: _,
        snapshot_s: _,
        started: _,
        na,
    } = h;
    role.as_str().len()
        + framework.as_ref().map_or(0, |f| f.as_str().len())
        + opt_len(framework_version)
        + opt_len(allocator)
        + map_len(settings)
        + opt_len(policy)
        + devices.iter().map(dev_info_len).sum::<usize>()
        + opt_len(cuda_visible_devices)
        + opt_len(cuda_device_order)
        + opt_len(cmdline)
        + opt_len(program)
        + opt_len(master)
        + opt_len(run_id)
        + capabilities.iter().map(String::len).sum::<usize>()
        + map_len(na)
}

pub fn epoch_strings(e: &EpochRecord) -> usize {
    let EpochRecord {
        t: _,
        epoch: _,
        dev: _,
        floor: _,
        peak: _,
        reserved: _,
        start_t: _,
        steps: _,
        na,
    } = e;
    map_len(na)
}

pub fn marker_strings(m: &Marker) -> usize {
    let Marker {
        t: _,
        kind,
        label,
        epoch: _,
        step: _,
    } = m;
    kind.len() + opt_len(label)
}

pub fn event_strings(e: &FrameworkEvent) -> usize {
    let FrameworkEvent {
        t: _,
        kind,
        dev: _,
        requested: _,
        limit: _,
        device_free: _,
        free_total: _,
        largest_free: _,
        detail,
    } = e;
    kind.as_str().len() + opt_len(detail)
}

pub fn sample_strings(s: &Sample) -> usize {
    let Sample {
        t: _,
        dev: _,
        allocated: _,
        reserved: _,
        active: _,
        requested: _,
        inactive_split: _,
        peak_allocated: _,
        peak_reserved: _,
        limit: _,
        largest_free: _,
        largest_alloc: _,
        num_alloc_retries: _,
        num_ooms: _,
        epoch: _,
        cost_us: _,
        dropped: _,
        na,
    } = s;
    map_len(na)
}

pub fn frag_strings(f: &Frag) -> usize {
    let Frag {
        t: _,
        dev: _,
        free_total: _,
        largest_free: _,
        n_free_blocks: _,
        n_segments: _,
        largest_block: _,
        hist: _,
        free_top: _,
        live_top: _,
        allocated: _,
        reserved: _,
        requests: _,
        source,
        cost_us: _,
        na,
    } = f;
    opt_len(source) + map_len(na)
}

/// Why a device number is refused, if it is.
pub fn bad_dev(dev: u32) -> Option<&'static str> {
    (dev > MAX_DEV_NUMBER).then_some("device number out of range")
}

/// Why one message is refused before it touches the model, if it is. A
/// `history` is checked item by item where it is applied.
pub fn refuse(msg: &Message) -> Option<&'static str> {
    let long = "strings over the per-item budget";
    match msg {
        Message::Hello(h) => {
            let strings = hello_strings(h);
            if strings > MAX_HELLO_STRING_BYTES {
                Some("hello over its size budget")
            } else if h.devices.len() > MAX_DEVICES_PER_COMPANION {
                Some("hello names too many devices")
            } else {
                h.devices.iter().find_map(|d| bad_dev(d.dev))
            }
        }
        Message::Sample(s) => {
            bad_dev(s.dev).or((sample_strings(s) > MAX_ITEM_STRING_BYTES).then_some(long))
        }
        Message::Frag(f) => {
            bad_dev(f.dev).or((frag_strings(f) > MAX_ITEM_STRING_BYTES).then_some(long))
        }
        Message::Epoch(e) => {
            bad_dev(e.dev).or((epoch_strings(e) > MAX_ITEM_STRING_BYTES).then_some(long))
        }
        Message::Marker(m) => (marker_strings(m) > MAX_ITEM_STRING_BYTES).then_some(long),
        Message::Event(e) => e
            .dev
            .and_then(bad_dev)
            .or((event_strings(e) > MAX_ITEM_STRING_BYTES).then_some(long)),
        Message::Alloc(a) => bad_dev(a.dev),
        // A history is checked item by item where it is applied; the rest are not kept
        // (bye, error: said once) or are gpumon's own (disconnected, link).
        Message::History(_)
        | Message::Bye(_)
        | Message::Error(_)
        | Message::Disconnected(_)
        | Message::Link(_) => None,
    }
}

/// A free-block histogram as kept: sorted by bucket, buckets past `MAX_BUCKET`
/// (sizes ≥ 2^64 cannot exist; recordings bypass the wire check) dropped, and
/// duplicate buckets merged by summing, so `/metrics` never shows one bucket
/// twice and the histogram holds at most `MAX_BUCKET + 1` entries.
pub fn normalize_hist(hist: &[HistBucket]) -> Vec<HistBucket> {
    let mut h: Vec<HistBucket> = hist.iter().copied().filter(|b| b.0 <= MAX_BUCKET).collect();
    h.sort_by_key(|b| b.0);
    h.dedup_by(|later, kept| {
        if later.0 == kept.0 {
            kept.1 = kept.1.saturating_add(later.1);
            kept.2 = kept.2.saturating_add(later.2);
            true
        } else {
            false
        }
    });
    h
}

/// Worst-case bytes of one companion with these counts.
pub fn companion_worst_bytes(
    devices: usize,
    epochs: usize,
    events: usize,
    markers: usize,
) -> usize {
    HELLO_BYTES
        + devices * DEVICE_BYTES
        + epochs * EPOCH_BYTES
        + events * EVENT_BYTES
        + markers * MARKER_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_and_impossible_buckets_are_merged_and_dropped() {
        let h = normalize_hist(&[
            (20, 1, 10),
            (3, 2, 2),
            (20, 5, 50),
            (64, 1, 1),
            (u32::MAX, 9, 9),
        ]);
        assert_eq!(h, vec![(3, 2, 2), (20, 6, 60)]);
    }

    #[test]
    fn out_of_range_device_and_long_strings_are_refused() {
        let s = Message::Sample(Sample {
            dev: MAX_DEV_NUMBER + 1,
            ..Sample::default()
        });
        assert!(refuse(&s).is_some());
        let m = Message::Marker(Marker {
            kind: "mark".into(),
            label: Some("x".repeat(MAX_ITEM_STRING_BYTES + 1)),
            ..Marker::default()
        });
        assert!(refuse(&m).is_some());
        let ok = Message::Marker(Marker {
            kind: "mark".into(),
            label: Some("epoch 3 done".into()),
            ..Marker::default()
        });
        assert_eq!(refuse(&ok), None);
    }
}
