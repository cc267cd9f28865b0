//! How the overview shares its height among GPUs: by need, not equally. Each card gets
//! its border, usage line and a small chart, then process lines up to what it needs, and
//! what is left grows the charts. When not every GPU fits as a card (8 or 16 GPUs in a
//! small pane) the others shrink to one- or two-row entries and the selected GPU keeps a
//! full card, so the card being looked at is never scrolled away.

/// Border (2), usage line (1) and the smallest useful chart (2 rows and a time row).
pub(crate) const BASE: u16 = 6;
/// Rows a card's chart grows by before process lines get the spare rows.
const CHART_GROWTH: u16 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// A full card of `height` rows with `lines` rows for processes.
    Card { gpu: usize, height: u16, lines: u16 },
    /// A compact entry: one row, or two with a wider sparkline.
    Row { gpu: usize, height: u16 },
    /// `n` GPUs do not fit: a row that says so.
    More { hidden: usize },
}

/// Process lines a card wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Want {
    /// To list every process, with its allocator line.
    pub all: u16,
    /// To show one process whole: the title row, its row and its allocator line (an OOM's
    /// numbers are on that line), or "no processes".
    pub least: u16,
}

/// Plan `h` rows for GPUs that want `wants[i]` process lines each. `sel` is the selected
/// GPU.
pub(crate) fn plan(h: u16, wants: &[Want], sel: usize) -> Vec<Slot> {
    let n = wants.len();
    if n == 0 || h == 0 {
        return Vec::new();
    }
    let sel = sel.min(n - 1);
    let need: u32 = wants.iter().map(|w| u32::from(BASE + min_lines(w))).sum();
    if need <= u32::from(h) {
        return all_cards(h, wants, sel, need);
    }
    // The selected GPU as a card, the others as rows of two, else of one.
    let others = (n - 1) as u16;
    for row_h in [2u16, 1] {
        let Some(e) = h.checked_sub(others * row_h) else {
            continue;
        };
        // One process line is enough here: the card is the only one with a chart.
        if e < BASE + 1 {
            continue;
        }
        let avail = e - BASE;
        // Processes take up to two thirds of the spare rows; the chart keeps the rest.
        let lines = wants[sel].all.min((avail - avail / 3).max(1));
        return (0..n)
            .map(|gpu| {
                if gpu == sel {
                    Slot::Card {
                        gpu,
                        height: e,
                        lines,
                    }
                } else {
                    Slot::Row { gpu, height: row_h }
                }
            })
            .collect();
    }
    rows_only(h, n, sel)
}

/// The lines a card gets before any grows: one process whole where it has a row for it.
fn min_lines(w: &Want) -> u16 {
    w.least.clamp(1, 3).min(w.all.max(1))
}

fn all_cards(h: u16, wants: &[Want], sel: usize, need: u32) -> Vec<Slot> {
    let n = wants.len();
    let mut lines: Vec<u16> = wants.iter().map(min_lines).collect();
    let mut spare = h - need as u16;
    // First, charts of four rows and a time row where possible: a chart is what a card
    // is for, a two-row one shows little more than a sparkline.
    let mut extra = vec![0u16; n];
    for _ in 0..CHART_GROWTH {
        for k in 0..n {
            if spare > 0 {
                extra[(sel + k) % n] += 1;
                spare -= 1;
            }
        }
    }
    // Process lines one at a time, round robin from the selected card, so no card says
    // "+6 more" while another has empty rows.
    let mut progress = true;
    while spare > 0 && progress {
        progress = false;
        for k in 0..n {
            let i = (sel + k) % n;
            if spare > 0 && lines[i] < wants[i].all {
                lines[i] += 1;
                spare -= 1;
                progress = true;
            }
        }
    }
    // What is left grows the charts, evenly, the remainder from the selected card on.
    let each = spare / n as u16;
    let mut rest = spare % n as u16;
    extra.iter_mut().for_each(|e| *e += each);
    for k in 0..n {
        if rest == 0 {
            break;
        }
        extra[(sel + k) % n] += 1;
        rest -= 1;
    }
    (0..n)
        .map(|gpu| Slot::Card {
            gpu,
            height: BASE + lines[gpu] + extra[gpu],
            lines: lines[gpu],
        })
        .collect()
}

fn rows_only(h: u16, n: usize, sel: usize) -> Vec<Slot> {
    let row_h = if usize::from(h) >= 2 * n { 2 } else { 1 };
    if n * usize::from(row_h) <= usize::from(h) {
        return (0..n).map(|gpu| Slot::Row { gpu, height: row_h }).collect();
    }
    // Scroll around the selection; the last row says how many are not shown.
    let fit = usize::from(h).saturating_sub(1).max(1);
    let first = sel.saturating_sub(fit - 1).min(n - fit);
    let mut v: Vec<Slot> = (first..first + fit)
        .map(|gpu| Slot::Row { gpu, height: 1 })
        .collect();
    if h >= 2 {
        v.push(Slot::More { hidden: n - fit });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cards of processes without companions: each wants a title row and its rows.
    fn bare(all: &[u16]) -> Vec<Want> {
        all.iter()
            .map(|&all| Want {
                all,
                least: all.min(2),
            })
            .collect()
    }

    fn height(v: &[Slot]) -> u16 {
        v.iter()
            .map(|s| match s {
                Slot::Card { height, .. } | Slot::Row { height, .. } => *height,
                Slot::More { .. } => 1,
            })
            .sum()
    }

    #[test]
    fn cards_share_by_need_and_fill_the_pane() {
        // GPU 0 runs 7 processes (header + 7), GPU 1 one: no "+N more" beside empty rows.
        let v = plan(41, &bare(&[8, 2]), 0);
        assert_eq!(height(&v), 41);
        let Slot::Card { lines: l0, .. } = v[0] else {
            panic!("{v:?}")
        };
        let Slot::Card { lines: l1, .. } = v[1] else {
            panic!("{v:?}")
        };
        assert_eq!((l0, l1), (8, 2));
        // Short of rows: both get at least a header and a row, the rest round robin.
        let v = plan(17, &bare(&[8, 8]), 1);
        assert_eq!(height(&v), 17);
        assert!(
            v.iter()
                .all(|s| matches!(s, Slot::Card { lines, .. } if *lines >= 2))
        );
    }

    #[test]
    fn many_gpus_shrink_to_rows_and_keep_the_selected_card() {
        let wants = bare(&[3u16; 8]);
        for (h, sel) in [(21u16, 5usize), (37, 0), (57, 7)] {
            let v = plan(h, &wants, sel);
            assert!(height(&v) <= h, "{h}: {v:?}");
            assert!(
                v.iter()
                    .any(|s| matches!(s, Slot::Card { gpu, .. } if *gpu == sel)),
                "{h}: selected GPU {sel} has its card: {v:?}"
            );
            assert_eq!(v.len(), 8);
        }
        // 40x12: eight one-row entries fit, no room for a card.
        assert_eq!(plan(9, &wants, 3).len(), 8);
        // 16 GPUs in 8 rows: scroll around the selection, and say so on a row of its own.
        let v = plan(8, &bare(&[1; 16]), 12);
        assert_eq!(height(&v), 8);
        assert!(v.contains(&Slot::Row { gpu: 12, height: 1 }));
        assert_eq!(v.last(), Some(&Slot::More { hidden: 9 }));
    }

    #[test]
    fn a_small_card_shows_one_process_whole_before_its_chart_grows() {
        // 40x12 leaves 9 rows: a process with its allocator line takes 3 of them, the
        // chart the smallest it has (2 rows and a time row).
        let v = plan(9, &[Want { all: 5, least: 3 }], 0);
        assert_eq!(
            v,
            vec![Slot::Card {
                gpu: 0,
                height: 9,
                lines: 3
            }]
        );
        // Without a companion one row is the process whole; the chart takes the spare.
        let v = plan(9, &bare(&[5]), 0);
        assert!(matches!(v[0], Slot::Card { lines: 2, .. }), "{v:?}");
    }
}
