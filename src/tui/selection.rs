//! What the process lists show and in which order: sort key and direction, the `/`
//! filter, and the identities the selection holds (a PID on a GPU, an alert), so that a
//! re-sort or a new alert never moves the cursor onto something else. Pure: no I/O.

use crate::model::alerts::config::GrowthConfig;
use crate::model::alerts::{Alert, AlertKey};
use crate::model::state::{ProcGpu, ProcState, State};
use crate::model::time::Ts;

/// Columns a process list can be sorted by (`s`/F6 cycles, `I` inverts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Used,
    Peak,
    Growth,
    Pid,
    Name,
}

impl SortKey {
    /// The key `s`/F6 moves on to.
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Used => SortKey::Peak,
            SortKey::Peak => SortKey::Growth,
            SortKey::Growth => SortKey::Pid,
            SortKey::Pid => SortKey::Name,
            SortKey::Name => SortKey::Used,
        }
    }

    /// The column header the sort is shown on.
    pub fn column(self) -> &'static str {
        match self {
            SortKey::Used => "USED",
            SortKey::Peak => "PEAK",
            SortKey::Growth => "GROWTH",
            SortKey::Pid => "PID",
            SortKey::Name => "COMMAND",
        }
    }

    /// Largest first for amounts, smallest first for identities (as htop does).
    pub fn default_desc(self) -> bool {
        matches!(self, SortKey::Used | SortKey::Peak | SortKey::Growth)
    }
}

/// Sort key and direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sort {
    pub key: SortKey,
    pub desc: bool,
}

impl Default for Sort {
    fn default() -> Self {
        Sort {
            key: SortKey::Used,
            desc: true,
        }
    }
}

impl Sort {
    /// `USED▼`: the header label of the sorted column with its direction.
    pub fn label(self, ascii: bool) -> String {
        let arrow = match (self.desc, ascii) {
            (true, false) => "▼",
            (false, false) => "▲",
            (true, true) => "v",
            (false, true) => "^",
        };
        format!("{}{arrow}", self.key.column())
    }
}

/// The GROWTH column's rate, bytes per minute (`model::growth_rate`); 0 while unknown.
pub fn growth(s: &State, pid: u32, gpu: u32) -> Option<f64> {
    crate::model::growth_rate::per_minute(s, pid, gpu, &GrowthConfig::default())
}

/// The name a process is sorted and filtered by: its program's command line (a
/// multiprocessing child's launcher's), else its own, else its name.
pub fn name(p: &ProcState) -> &str {
    p.who
        .program
        .as_deref()
        .or(p.info.cmdline.as_deref())
        .or(p.info.name.as_deref())
        .unwrap_or("")
}

/// Whether `p` passes the filter: a case-insensitive substring of its command, name or
/// user, or of its PID (so `/12` finds 1234).
pub fn matches(p: &ProcState, filter: &str) -> bool {
    if filter.is_empty() {
        return true;
    }
    let f = filter.to_lowercase();
    let has = |s: Option<&str>| s.is_some_and(|s| s.to_lowercase().contains(&f));
    p.info.pid.to_string().contains(&f)
        || has(p.info.cmdline.as_deref())
        || has(p.who.program.as_deref())
        || has(Some(p.who.rank_prefix().as_str()))
        || has(p.info.name.as_deref())
        || has(p.info.user.as_deref())
}

/// Processes on `gpu` that pass `filter`, in `sort` order (ties by PID, so the order is
/// stable between frames).
pub fn rows<'a>(
    s: &'a State,
    gpu: u32,
    sort: Sort,
    filter: &str,
) -> Vec<(&'a ProcState, &'a ProcGpu)> {
    let v: Vec<_> = s
        .procs
        .values()
        .filter(|p| matches(p, filter))
        .filter_map(|p| p.gpus.get(&gpu).map(|pg| (p, pg)))
        .collect();
    // Growth reads a window of the series: compute it once per row, not per comparison
    // (this runs after every frame to find the selection again).
    let rate = |p: &ProcState| match sort.key {
        SortKey::Growth => growth(s, p.info.pid, gpu).unwrap_or(0.0),
        _ => 0.0,
    };
    let mut keyed: Vec<_> = v.into_iter().map(|r| (rate(r.0), r)).collect();
    keyed.sort_by(|(ga, a), (gb, b)| {
        let ord = match sort.key {
            SortKey::Used => a.1.last_used.unwrap_or(0).cmp(&b.1.last_used.unwrap_or(0)),
            SortKey::Peak => a.1.peak.value.cmp(&b.1.peak.value),
            SortKey::Growth => ga.total_cmp(gb),
            SortKey::Pid => a.0.info.pid.cmp(&b.0.info.pid),
            SortKey::Name => name(a.0).cmp(name(b.0)),
        };
        let ord = if sort.desc { ord.reverse() } else { ord };
        ord.then(a.0.info.pid.cmp(&b.0.info.pid))
    });
    keyed.into_iter().map(|(_, r)| r).collect()
}

/// An alert's identity: the same kind, process and GPU raised at the same time. (The key
/// alone is not enough: a cleared alert in history and a new one can share it.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AlertId {
    pub key: AlertKey,
    pub raised_at: Ts,
}

impl AlertId {
    pub fn of(a: &Alert) -> AlertId {
        AlertId {
            key: a.key(),
            raised_at: a.raised_at,
        }
    }
}

/// Where a held identity is in a freshly built list: its index, or the neighbour that
/// takes its place (same index, clamped) when it is gone. `None` for an empty list.
pub fn locate<T: PartialEq>(
    items: &[T],
    held: Option<&T>,
    last_index: usize,
) -> Option<(usize, bool)> {
    if items.is_empty() {
        return None;
    }
    match held.and_then(|h| items.iter().position(|x| x == h)) {
        Some(i) => Some((i, true)),
        None => Some((last_index.min(items.len() - 1), false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_item_is_found_after_a_reorder_and_a_gone_one_gives_its_neighbour() {
        assert_eq!(locate(&[3, 1, 2], Some(&2), 0), Some((2, true)));
        assert_eq!(locate(&[3, 1], Some(&2), 2), Some((1, false)));
        assert_eq!(locate(&[3, 1], None, 0), Some((0, false)));
        assert_eq!(locate::<u32>(&[], Some(&2), 0), None);
    }

    #[test]
    fn the_filter_matches_command_name_user_and_pid() {
        use crate::model::sample::ProcInfo;
        let p = ProcState::new(
            ProcInfo {
                pid: 1234,
                user: Some("alice".into()),
                name: Some("python3".into()),
                cmdline: Some("python3 train_bert.py --lr 3e-4".into()),
                ..ProcInfo::default()
            },
            0,
        );
        for f in ["", "BERT", "python", "ALICE", "23", "1234"] {
            assert!(matches(&p, f), "{f:?} should match");
        }
        for f in ["bob", "999", "resnet"] {
            assert!(!matches(&p, f), "{f:?} should not match");
        }
    }

    #[test]
    fn sort_keys_cycle_through_all_five_and_label_the_direction() {
        let mut k = SortKey::Used;
        let mut seen = vec![];
        for _ in 0..5 {
            seen.push(k.column());
            k = k.next();
        }
        assert_eq!(k, SortKey::Used);
        assert_eq!(seen, ["USED", "PEAK", "GROWTH", "PID", "COMMAND"]);
        let s = Sort {
            key: SortKey::Pid,
            desc: false,
        };
        assert_eq!(s.label(false), "PID▲");
        assert_eq!(s.label(true), "PID^");
    }
}
