//! The alert bar and panel at the smallest supported pane (40×12), Unicode and ASCII.

use gpumon::tui::ui;

use crate::support::alerts::*;
use gpumon::model::alerts::{AlertConfig, AlertEngine};
use gpumon::tui::ui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

fn text(buf: &Buffer) -> Vec<String> {
    let a = buf.area;
    (0..a.height)
        .map(|y| {
            (0..a.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect()
}

fn theme(ascii: bool) -> Theme {
    Theme {
        ascii,
        color: !ascii,
        utc: true,
    }
}

/// A leak (warning), a fragmentation risk and one cleared OOM in history.
fn engine() -> AlertEngine {
    let mut e = AlertEngine::new(AlertConfig::default());
    let leak = companion(epochs(12, |ep| 10 * G + ep * 100 * M));
    let now = 12 * EPOCH_MS;
    let mut frag = fragmented(now);
    frag.ooms = vec![oom(now - 1, 64 * M, 9000 * M)];
    e.evaluate_snapshot(&snapshot(
        now,
        32 * M,
        vec![
            proc_view(7, 20 * G, Some(leak.clone())),
            proc_view(8, 12 * G, Some(frag.clone())),
        ],
    ));
    // After the OOM hold the OOM alert moves to history; the risk persists and is raised.
    let later = now + 11 * 60_000;
    e.evaluate_snapshot(&snapshot(
        later,
        32 * M,
        vec![
            proc_view(7, 20 * G, Some(leak)),
            proc_view(8, 12 * G, Some(frag)),
        ],
    ));
    e
}

#[test]
fn bar_shows_most_severe_and_count_in_40_columns() {
    let e = engine();
    let vis = e.visible();
    assert!(vis.len() >= 2, "{vis:?}");
    for ascii in [false, true] {
        let mut buf = Buffer::empty(Rect::new(0, 0, 40, 1));
        ui::alerts::render_alert_bar(
            &vis,
            0,
            Default::default(),
            buf.area,
            &mut buf,
            &theme(ascii),
        );
        let line = &text(&buf)[0];
        assert!(line.contains("7@0 leak +100M/ep"), "{line:?}");
        assert!(
            line.trim_end().ends_with(&format!("+{}", vis.len() - 1)),
            "{line:?}"
        );
        if ascii {
            assert!(line.is_ascii(), "{line:?}");
        }
    }
}

#[test]
fn bar_without_alerts_says_so() {
    let mut buf = Buffer::empty(Rect::new(0, 0, 40, 1));
    ui::alerts::render_alert_bar(
        &[],
        2,
        Default::default(),
        buf.area,
        &mut buf,
        &theme(false),
    );
    assert!(text(&buf)[0].contains("no new alerts (2 acknowledged)"));
}

#[test]
fn bar_keeps_past_alerts_in_view_with_their_worst_severity() {
    use gpumon::model::alerts::Severity;
    let past = ui::alerts::PastAlerts {
        count: 4,
        worst: Some(Severity::Critical),
        worst_count: 1,
        marked: true,
    };
    let bar = |alerts: &[&gpumon::model::alerts::Alert], w: u16, ascii: bool| {
        let mut buf = Buffer::empty(Rect::new(0, 0, w, 1));
        ui::alerts::render_alert_bar(alerts, 0, past, buf.area, &mut buf, &theme(ascii));
        text(&buf)[0].trim_end().to_string()
    };
    assert_eq!(bar(&[], 80, false), " no active alerts · 4 past (‼ 1) — a");
    assert_eq!(bar(&[], 40, false), " no active alerts · 4 past (‼ 1) — a");
    assert_eq!(bar(&[], 30, false), " no active alerts · 4 past ‼");
    assert_eq!(bar(&[], 80, true), " no active alerts - 4 past (!! 1) - a");
    let e = engine();
    let vis = e.visible();
    let line = bar(&vis, 80, false);
    assert!(line.contains("7@0 leak +100M/ep"), "{line}");
    assert!(line.ends_with(" · 4 past (‼ 1)"), "{line}");
    // At 40 columns an active warning shares the line with a past critical alert, but
    // keeps its summary whole beside past warnings.
    let line = bar(&vis, 40, false);
    assert!(line.contains("7@0 leak"), "{line}");
    assert!(line.ends_with("4 past (‼ 1)"), "{line}");
    let mild = ui::alerts::PastAlerts {
        worst: Some(Severity::Warning),
        ..past
    };
    let mut buf = Buffer::empty(Rect::new(0, 0, 40, 1));
    ui::alerts::render_alert_bar(&vis, 0, mild, buf.area, &mut buf, &theme(false));
    let line = text(&buf)[0].clone();
    assert!(!line.contains("past"), "{line}");
    let none = ui::alerts::PastAlerts::default();
    let mut buf = Buffer::empty(Rect::new(0, 0, 40, 1));
    ui::alerts::render_alert_bar(&[], 0, none, buf.area, &mut buf, &theme(false));
    assert_eq!(text(&buf)[0].trim_end(), " no alerts");
}

#[test]
fn panel_shows_history_and_evidence_at_40x12() {
    let e = engine();
    let items = e.listed();
    assert!(
        items.iter().any(|a| a.cleared_at.is_some()),
        "history present"
    );
    let leak = items
        .iter()
        .position(|a| a.summary.contains("leak"))
        .expect("leak listed");
    for ascii in [false, true] {
        let mut buf = Buffer::empty(Rect::new(0, 0, 40, 12));
        ui::alerts::render_alerts_panel(&e, leak, buf.area, &mut buf, &theme(ascii));
        let lines = text(&buf);
        let all = lines.join("\n");
        assert!(lines[0].starts_with("Alerts 2 active, 1 past"), "{all}");
        assert!(all.contains("raised 02:00:00 epoch 12"), "{all}");
        assert!(all.contains("slope +100MiB/ep"), "{all}");
        assert!(all.contains("p 2e-9"), "{all}");
        assert!(all.contains("gates"), "{all}");
        assert!(all.contains("OOM in"), "{all}");
        assert!(all.contains("floor "), "{all}");
        if ascii {
            assert!(all.is_ascii(), "{all}");
        } else {
            assert!(all.contains('▁') || all.contains('█'), "sparkline: {all}");
        }
    }
}

#[test]
fn panel_selection_of_past_alert_and_tiny_areas_do_not_panic() {
    let e = engine();
    let n = e.listed().len();
    let mut buf = Buffer::empty(Rect::new(0, 0, 40, 12));
    ui::alerts::render_alerts_panel(&e, n + 5, buf.area, &mut buf, &theme(false));
    let all = text(&buf).join("\n");
    assert!(all.contains("cleared"), "{all}");
    for (w, h) in [(1, 1), (40, 1), (40, 2), (5, 12), (0, 0)] {
        let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
        ui::alerts::render_alerts_panel(&e, 0, buf.area, &mut buf, &theme(true));
        ui::alerts::render_alert_bar(
            &e.visible(),
            0,
            Default::default(),
            buf.area,
            &mut buf,
            &theme(true),
        );
    }
    let empty = AlertEngine::default();
    let mut buf = Buffer::empty(Rect::new(0, 0, 40, 12));
    ui::alerts::render_alerts_panel(&empty, 0, buf.area, &mut buf, &theme(false));
    assert!(text(&buf).join(" ").contains("Nothing yet"));
}
