//! The zoom and the detail chart in a real terminal over the bundled leak recording: the zoom
//! label is the span the time axis shows (read back from the axis ticks) at every step from
//! 10 s to 7 days and in `all`, on the overview and the detail chart; without colour every
//! series of the detail chart has its own glyph; `v` shows one series alone, the floor
//! first; and the alerts panel fills its rows with a chart of the selected alert.

use crate::tmux_e2e::{Session, have_tmux, keys, pane, start_cmd, wait_for};

fn gpumon(tag: &str, w: u16, h: u16, env: &str) -> Session {
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo-leaks.gpumon.jsonl.gz");
    let cmd = format!(
        "env LANG=C.UTF-8 TERM=xterm-256color {env} {} replay --speed max {}; sleep 60",
        assert_cmd::cargo::cargo_bin("gpumon").display(),
        file.display()
    );
    let s = start_cmd(tag, w, h, &cmd);
    // At the end the state no longer moves: every capture reads the same data.
    wait_for(&s, " end ", 20);
    s
}

/// Seconds of a tick label: `16:54:30`, `16:54` or `Dec 01` (a day), in one timeline.
fn label_secs(l: &str) -> Option<i64> {
    let hms: Vec<i64> = l
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()
        .unwrap_or_default();
    match hms.as_slice() {
        [h, m, s] => return Some(h * 3_600 + m * 60 + s),
        [h, m] => return Some(h * 3_600 + m * 60),
        _ => {}
    }
    let d = chrono::NaiveDate::parse_from_str(&format!("{l} 2026"), "%b %d %Y").ok()?;
    Some(d.and_hms_opt(0, 0, 0)?.and_utc().timestamp())
}

/// The zoom label under a chart's value axis and the span its time axis shows, estimated
/// from the first and last ticks (time per cell times the axis width), for the first chart
/// on the screen.
fn axis(screen: &str) -> (String, f64) {
    let line = screen
        .lines()
        .find(|l| l.contains("zoom ") && l.contains('└'))
        .unwrap_or_else(|| panic!("no chart axis:\n{screen}"));
    let (head, tail) = line.split_once('└').expect("corner");
    let label = head
        .trim_start_matches('│')
        .trim()
        .trim_start_matches("zoom ")
        .to_string();
    let cells: Vec<char> = tail.trim_end_matches('│').chars().collect();
    let mut ticks = Vec::new();
    let mut prev: Option<i64> = None;
    for (i, c) in cells.iter().enumerate() {
        if *c != '┴' {
            continue;
        }
        let text: String = cells[i + 1..]
            .iter()
            .take_while(|c| **c != '─' && **c != '┴')
            .collect();
        let Some(mut t) = label_secs(text.trim()) else {
            continue;
        };
        // Clock labels wrap at midnight.
        while prev.is_some_and(|p| t <= p) {
            t += 86_400;
        }
        prev = Some(t);
        ticks.push((i, t));
    }
    assert!(ticks.len() >= 2, "fewer than two ticks on {line:?}");
    let ((c0, t0), (c1, t1)) = (ticks[0], ticks[ticks.len() - 1]);
    let per_cell = (t1 - t0) as f64 / (c1 - c0) as f64;
    (label, per_cell * cells.len() as f64)
}

const STEPS: [(&str, f64); 10] = [
    ("10s", 10.0),
    ("30s", 30.0),
    ("1m", 60.0),
    ("5m", 300.0),
    ("15m", 900.0),
    ("1h", 3_600.0),
    ("6h", 21_600.0),
    ("24h", 86_400.0),
    ("72h", 259_200.0),
    ("7d", 604_800.0),
];

/// From `zoom 5m`: down to 10 s, then up through every step to 7 days; each screen's
/// label, header and axis must agree, and every step must widen the axis.
fn walk_the_zoom(s: &Session, chart: &str) {
    keys(s, &["+", "+", "+"]);
    let p = pane(s);
    assert_eq!(axis(&p).0, "10s", "{chart}:\n{p}");
    keys(s, &["+"]);
    let p = pane(s);
    assert!(
        p.contains("zoom 10s is the shortest span"),
        "{chart}: the last + says why it stops:\n{p}"
    );
    let mut last = 0.0;
    for (i, (label, secs)) in STEPS.iter().enumerate() {
        if i > 0 {
            keys(s, &["-"]);
        }
        let p = pane(s);
        let (shown, span) = axis(&p);
        assert_eq!(&shown, label, "{chart}:\n{p}");
        assert!(
            p.lines()
                .next()
                .is_some_and(|h| h.contains(&format!("│ {label} "))),
            "{chart}: the header names the span:\n{p}"
        );
        assert!(
            (span - secs).abs() <= secs * 0.1,
            "{chart}: `zoom {label}` over an axis of {span:.1} s:\n{p}"
        );
        assert!(
            span > last * 1.5,
            "{chart}: {label} did not widen the axis ({last} -> {span})"
        );
        last = span;
    }
    keys(s, &["-"]);
    assert!(pane(s).contains("zoom 7d is the longest span"), "{chart}");
}

#[test]
fn the_zoom_label_is_the_span_the_axis_shows() {
    if !have_tmux() {
        return;
    }
    let s = gpumon("zoomaxis", 80, 24, "");
    // A recording opens on its whole history, named so; the axis spans it (142 s here,
    // rounded up to a step of the fitted grid).
    let p = pane(&s);
    let (label, span) = axis(&p);
    assert_eq!(label, "all", "{p}");
    assert!(
        (142.0..=142.0 * 1.4).contains(&span),
        "all over {span} s:\n{p}"
    );
    keys(&s, &["w"]);
    let p = pane(&s);
    assert_eq!(axis(&p).0, "5m", "w goes to a span:\n{p}");
    assert!(
        p.contains("the charts show the last 5 min"),
        "and says so:\n{p}"
    );
    walk_the_zoom(&s, "overview");
    keys(&s, &["w"]);
    assert_eq!(axis(&pane(&s)).0, "all", "w again: back to all");
    keys(&s, &["w", "Enter"]);
    let p = pane(&s);
    assert!(p.contains("GPU 0 · H200 · GPU-"), "the detail view:\n{p}");
    assert_eq!(axis(&p).0, "7d", "w came back to the span it left");
    // Back down to 5m for the same walk on the detail chart.
    keys(&s, &["+", "+", "+", "+", "+", "+"]);
    assert_eq!(axis(&pane(&s)).0, "5m");
    walk_the_zoom(&s, "detail");
}

/// The glyph drawn before ` name` on the legend line.
fn glyph_before(line: &str, name: &str) -> Option<char> {
    let at = line.find(&format!(" {name} "))?;
    line[..at].chars().last()
}

/// Rows of the plot (right of the value axis) between the legend and the time axis.
fn plot_rows(screen: &str) -> Vec<String> {
    let lines: Vec<&str> = screen.lines().collect();
    let from = lines
        .iter()
        .position(|l| l.contains("pid 786 "))
        .expect("legend")
        + 1;
    let to = lines
        .iter()
        .position(|l| l.contains("zoom ") && l.contains('└'))
        .expect("axis");
    // `│ 4 GiB┤…│`: the frame, eight cells of labels and the axis line come first.
    lines[from..to]
        .iter()
        .map(|l| {
            let cells: Vec<char> = l.chars().collect();
            cells[10..cells.len() - 1].iter().collect()
        })
        .collect()
}

#[test]
fn without_colour_every_series_has_its_glyph_and_v_shows_one_alone() {
    if !have_tmux() {
        return;
    }
    let s = gpumon("nocolour", 80, 24, "NO_COLOR=1");
    // The alerts panel (it opens on the most severe alert): from the top, the third
    // alert is the leak of PID 786; Enter opens its process.
    keys(&s, &["a", "g", "Down", "Down", "Enter"]);
    let p = pane(&s);
    let legend = p
        .lines()
        .find(|l| l.contains("pid 786 "))
        .unwrap_or_else(|| panic!("the leak's process chart:\n{p}"));
    let names = ["used", "resv", "alloc", "peak/ep", "floor/ep"];
    let glyphs: Vec<char> = names
        .iter()
        .map(|n| glyph_before(legend, n).unwrap_or_else(|| panic!("no {n} in {legend:?}")))
        .collect();
    let mut distinct = glyphs.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        names.len(),
        "one glyph per series: {glyphs:?} in {legend:?}"
    );
    assert!(
        !glyphs.contains(&'━'),
        "no line glyph shared by all: {legend:?}"
    );
    // The floor (drawn last, on top) is in the plot as the eighth blocks the legend gives.
    assert_eq!(glyph_before(legend, "floor/ep"), Some('▄'), "{legend:?}");
    let rows = plot_rows(&p);
    assert!(
        rows.iter()
            .any(|r| r.contains(['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'])),
        "the floor's blocks in the plot:\n{p}"
    );
    let top = |p: &str| {
        let l = p.lines().nth(4).unwrap_or("").to_string();
        l.split('┤')
            .next()
            .unwrap_or("")
            .trim_start_matches('│')
            .trim()
            .to_string()
    };
    let top_all = top(&p);

    keys(&s, &["v"]);
    let p = pane(&s);
    assert!(
        p.contains("only floor/ep (v)"),
        "v shows the floor first, and says so:\n{p}"
    );
    assert!(
        p.contains("floor/ep alone (v: next series)"),
        "the status line says it:\n{p}"
    );
    assert!(
        !p.contains(" resv ") && !p.contains(" alloc "),
        "the others are gone from the legend:\n{p}"
    );
    let rows = plot_rows(&p);
    assert!(
        rows.iter()
            .all(|r| !r.contains(['r', 'a', 'p', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'])),
        "no other series' letters in the plot:\n{p}"
    );
    assert!(
        rows.iter()
            .any(|r| r.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c))),
        "the floor drawn:\n{p}"
    );
    assert_ne!(top(&p), top_all, "the scale fits the floor alone:\n{p}");
    keys(&s, &["v"]);
    assert!(pane(&s).contains("only used (v)"), "then used");
    keys(&s, &["v", "v", "v"]);
    assert!(pane(&s).contains("only peak/ep (v)"), "resv, alloc, peak");
    keys(&s, &["v"]);
    let p = pane(&s);
    assert!(
        !p.contains("only ") && p.contains(" resv "),
        "and every series again:\n{p}"
    );
}

#[test]
fn the_alerts_panel_charts_the_selected_alert_in_its_free_rows() {
    if !have_tmux() {
        return;
    }
    // At 80x24 this recording's six past alerts leave the chart fewer rows than it needs.
    for (w, h) in [(120u16, 40u16), (200, 60)] {
        let s = gpumon(&format!("alertchart{w}"), w, h, "");
        keys(&s, &["a", "g", "Down", "Down"]);
        let p = pane(&s);
        let lines: Vec<&str> = p.lines().collect();
        assert!(
            p.contains("PID 786 on GPU 1 (786@1)"),
            "{w}x{h}: the leak selected:\n{p}"
        );
        // The panel: under the title down to the alert bar and the key line.
        let panel = &lines[1..lines.len() - 2];
        let empty = panel.iter().filter(|l| l.trim().is_empty()).count();
        assert!(empty <= 1, "{w}x{h}: {empty} empty rows in the panel:\n{p}");
        assert!(
            panel
                .iter()
                .any(|l| l.starts_with("━ floor/ep ") && l.contains("limit 2.50 GiB")),
            "{w}x{h}: the chart's legend names the series and the limit:\n{p}"
        );
        assert!(
            panel.iter().any(|l| l.contains("┴e4")),
            "{w}x{h}: epoch ticks:\n{p}"
        );
        assert!(
            panel.iter().any(|l| l.contains(" GiB┤")),
            "{w}x{h}: a value axis in GiB:\n{p}"
        );
        // The sparkline row gives way to the chart.
        assert!(
            !panel.iter().any(|l| l.starts_with("floor ▁")),
            "{w}x{h}:\n{p}"
        );
    }
}
