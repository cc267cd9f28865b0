//! The arithmetic of an OOM a reader can check: which limit bound the failing request
//! (the process's allocator limit, or the card) and the sums that show it, then what its
//! cache held against the request. Shared by the alert's message and the report's headline,
//! so both say the same numbers in the same order.

/// The numbers of the failing moment, as the companion's OOM event reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OomNumbers {
    pub requested: Option<u64>,
    pub free_total: Option<u64>,
    pub largest_free: Option<u64>,
    pub device_free: Option<u64>,
    pub limit: Option<u64>,
    pub reserved: Option<u64>,
    pub card_total: Option<u64>,
}

/// The limit that refused the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// Reserved + request passed the allocator limit, by the numbers read.
    Limit,
    /// The card had room, so only the allocator limit can have refused it, though the
    /// reserved read (the highest sample of the second before) left room: reserved rose
    /// between samples.
    LimitBetweenSamples,
    /// The card had less free than the request.
    Card,
    /// Not enough is known.
    Unknown,
}

/// A limit this close to the card's total is the card, not a cap (PyTorch reports the
/// card's total as its limit when no memory fraction is set).
const CAP_SHARE: f64 = 0.98;

impl OomNumbers {
    pub fn binding(&self) -> Binding {
        let Some(r) = self.requested else {
            return Binding::Unknown;
        };
        if let (Some(l), Some(res)) = (self.limit, self.reserved)
            && l.saturating_sub(res) < r
        {
            return Binding::Limit;
        }
        if self.device_free.is_some_and(|d| d < r) {
            return Binding::Card;
        }
        let is_cap = |l: u64| {
            self.card_total
                .is_none_or(|t| (l as f64) < CAP_SHARE * t as f64)
        };
        match (self.limit, self.device_free) {
            (Some(l), Some(_)) if is_cap(l) && l > r => Binding::LimitBetweenSamples,
            _ => Binding::Unknown,
        }
    }

    /// `bound by its allocator limit of 3.00GiB: reserved 2.99GiB + 214MiB asked =
    /// 3.20GiB > 3.00GiB; its cache held 19.0MiB free, largest hole 9.28MiB < 214MiB`,
    /// or `None` when the event did not say what was asked.
    pub fn sentence(&self, b: &dyn Fn(u64) -> String) -> Option<String> {
        let r = self.requested?;
        let bound = match (self.binding(), self.limit, self.reserved, self.device_free) {
            (Binding::Limit, Some(l), Some(res), _) => Some(format!(
                "bound by its allocator limit of {}: reserved {} + {} asked = {} > {}",
                b(l),
                b(res),
                b(r),
                b(res.saturating_add(r)),
                b(l)
            )),
            (Binding::LimitBetweenSamples, Some(l), res, Some(d)) => Some(format!(
                "bound by its allocator limit of {}: the card had {} free, so it was reserved + {} asked that passed {}, with reserved above {} as it failed{}",
                b(l),
                b(d),
                b(r),
                b(l),
                b(l.saturating_sub(r)),
                res.map_or_else(String::new, |res| format!(
                    " (the last sample read {}: it rose between samples)",
                    b(res)
                ))
            )),
            (Binding::Card, _, _, Some(d)) => {
                let room = match (self.limit, self.reserved) {
                    (Some(l), Some(res)) => format!(
                        " (its own limit had room: reserved {} + {} = {} ≤ {})",
                        b(res),
                        b(r),
                        b(res.saturating_add(r)),
                        b(l)
                    ),
                    _ => String::new(),
                };
                Some(format!(
                    "bound by the card: {} free on it < {} asked{room}",
                    b(d),
                    b(r)
                ))
            }
            _ => None,
        };
        let cache = self.free_total.map(|t| {
            let hole = self.largest_free.map_or_else(String::new, |l| {
                let cmp = if l < r { "<" } else { "≥" };
                format!(", largest hole {} {cmp} {}", b(l), b(r))
            });
            format!("its cache held {} free{hole}", b(t))
        });
        match (bound, cache) {
            (Some(x), Some(c)) => Some(format!("{x}; {c}")),
            (Some(x), None) => Some(x),
            (None, Some(c)) => Some(c),
            (None, None) => None,
        }
    }

    /// A bar-sized form: `cap 2.99G+214M>3.00G`, `card 187M<256M`, `cap 3.50G`.
    pub fn short(&self, b: &dyn Fn(u64) -> String) -> Option<String> {
        let r = self.requested?;
        match (self.binding(), self.limit, self.reserved, self.device_free) {
            (Binding::Limit, Some(l), Some(res), _) => {
                Some(format!("cap {}+{}>{}", b(res), b(r), b(l)))
            }
            (Binding::LimitBetweenSamples, Some(l), _, _) => {
                Some(format!("cap {} asking {}", b(l), b(r)))
            }
            (Binding::Card, _, _, Some(d)) => Some(format!("card {}<{}", b(d), b(r))),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fmt::{GIB_U64, MIB_U64, compact};

    fn s(n: &OomNumbers) -> String {
        n.sentence(&|v| compact(v)).unwrap_or_default()
    }

    /// corpus4's ws_linear (PID 546): the working set met its 3 GiB cap.
    #[test]
    fn a_spent_cap_is_named_with_its_sum() {
        let n = OomNumbers {
            requested: Some(214 * MIB_U64),
            free_total: Some(19 * MIB_U64),
            largest_free: Some(9 * MIB_U64),
            device_free: Some(94 * GIB_U64),
            limit: Some(3 * GIB_U64),
            reserved: Some(3062 * MIB_U64),
            card_total: Some(140 * GIB_U64),
        };
        assert_eq!(n.binding(), Binding::Limit);
        assert_eq!(
            s(&n),
            "bound by its allocator limit of 3.00GiB: reserved 2.99GiB + 214MiB asked = 3.20GiB > 3.00GiB; its cache held 19.0MiB free, largest hole 9.00MiB < 214MiB"
        );
        assert_eq!(
            n.short(&|v| compact(v)).unwrap(),
            "cap 2.99GiB+214MiB>3.00GiB"
        );
    }

    /// The review's recording D and corpus_dev's PID 455: the sampled reserved left room
    /// under the cap and the card had plenty, so the cap bound it between samples.
    #[test]
    fn a_cap_with_room_by_the_samples_still_binds_when_the_card_had_room() {
        let n = OomNumbers {
            requested: Some(248 * MIB_U64),
            free_total: Some(529 * MIB_U64),
            largest_free: Some(101 * MIB_U64),
            device_free: Some(134 * GIB_U64),
            limit: Some(2867 * MIB_U64),
            reserved: Some(2089 * MIB_U64),
            card_total: Some(140 * GIB_U64),
        };
        assert_eq!(n.binding(), Binding::LimitBetweenSamples);
        let t = s(&n);
        assert!(
            t.starts_with("bound by its allocator limit of 2.80GiB"),
            "{t}"
        );
        assert!(t.contains("reserved above 2.56GiB as it failed"), "{t}");
        assert!(t.contains("the last sample read 2.04GiB"), "{t}");
        assert!(t.ends_with("largest hole 101MiB < 248MiB"), "{t}");
        // No cap below the card: nothing binds by these numbers.
        let uncapped = OomNumbers {
            limit: Some(140 * GIB_U64),
            ..n
        };
        assert_eq!(uncapped.binding(), Binding::Unknown);
        assert_eq!(
            s(&uncapped),
            "its cache held 529MiB free, largest hole 101MiB < 248MiB"
        );
    }

    #[test]
    fn a_full_card_is_named_and_the_cap_shown_with_room() {
        let n = OomNumbers {
            requested: Some(256 * MIB_U64),
            free_total: Some(328 * MIB_U64),
            largest_free: Some(176 * MIB_U64),
            device_free: Some(187 * MIB_U64),
            limit: Some(3 * GIB_U64),
            reserved: Some(1734 * MIB_U64),
            card_total: Some(140 * GIB_U64),
        };
        assert_eq!(n.binding(), Binding::Card);
        let t = s(&n);
        assert!(t.starts_with("bound by the card: 187MiB free on it < 256MiB asked (its own limit had room: reserved 1.69GiB + 256MiB = 1.94GiB ≤ 3.00GiB)"), "{t}");
    }
}
