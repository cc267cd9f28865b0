//! What one live redraw costs the main thread, the monitor's largest share of CPU
//! (bench/monitor_overhead.sh): `cargo bench --bench draw [-- RECORDING [COLSxROWS]]`.
//! Replays a bundled recording into the app as the live screen shows it, then, second by
//! second of the recording, applies that second's frames and draws into a crossterm
//! backend that writes to nothing (the cell diff and escape codes are made, not sent).
//! gpumon's `Screen` writes through its own escape-code writer (`tui::output::ansi`), ratatui's
//! `Terminal` through crossterm's, as each does in use.
//! Prints the draw's and the apply's cost per second of data, drawn by gpumon's `Screen` and,
//! beside it in the same run (alternating which goes first), by ratatui's `Terminal`. `DRAW_REPEAT=N` draws each
//! second N times (for a profiler: the repeats find the screen unchanged, so they time
//! building the frame, not sending it); `DRAW_OURS_ONLY=1` leaves ratatui's out.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use gpumon::model::frame::Frame;
use gpumon::pipeline::Pipeline;
use gpumon::record::{Next, Reader};
use gpumon::tui::app::{App, SourceKind};
use gpumon::tui::output::ansi::Direct;
use gpumon::tui::output::screen::Screen;
use gpumon::tui::ui::theme::Theme;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(what: &str, mut d: Vec<Duration>) {
    if d.is_empty() {
        return;
    }
    d.sort();
    let mean = d.iter().sum::<Duration>() / d.len() as u32;
    println!(
        "{what:<36} n={:<5} mean={:>9.1?} p50={:>9.1?} p99={:>9.1?}",
        d.len(),
        mean,
        pct(&d, 0.5),
        pct(&d, 0.99),
    );
}

/// One frame by gpumon's `Screen`, kept out of line so that a profiler can count it alone:
/// `valgrind --tool=callgrind --toggle-collect='draw::draw_ours' DRAW_BINARY`.
#[inline(never)]
fn draw_ours(screen: &mut Screen<Direct<io::Sink>>, app: &App, theme: &Theme) {
    screen
        .draw(|buf| gpumon::tui::ui::draw_buffer(buf, app, theme))
        .expect("draw");
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let path = args.first().map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/demo.gpumon.jsonl.gz"),
        PathBuf::from,
    );
    let (w, h) = args
        .get(1)
        .and_then(|s| s.split_once('x'))
        .map_or((120, 40), |(w, h)| {
            (w.parse().expect("cols"), h.parse().expect("rows"))
        });
    let mut r = Reader::open(&path).expect("recording opens");
    let mut frames = vec![Frame::Header(r.header.clone())];
    while let Next::Frame(f) = r.next().expect("recording is valid") {
        frames.push(f);
    }
    let mut app = App::new(SourceKind::Live { interval_ms: 1000 }, Pipeline::default());
    let theme = Theme {
        ascii: false,
        color: true,
        utc: true,
    };
    let mut screen = Screen::fixed(Direct::new(io::sink()), w, h);
    let mut term = Terminal::with_options(
        CrosstermBackend::new(io::sink()),
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, w, h)),
        },
    )
    .expect("terminal");
    // A third of the recording as history, then one draw per second of data.
    let warm = frames.len() / 3;
    let mut it = frames.iter();
    for f in it.by_ref().take(warm) {
        app.apply(f);
    }
    let repeat: usize = std::env::var("DRAW_REPEAT").map_or(1, |v| v.parse().expect("N"));
    let ours_only = std::env::var_os("DRAW_OURS_ONLY").is_some();
    let (mut draws, mut ratatui, mut applies) = (Vec::new(), Vec::new(), Vec::new());
    let mut second = None;
    let mut pending = Duration::ZERO;
    for f in it {
        let s = f.time().div_euclid(1000);
        if second.is_some_and(|p| p != s) {
            applies.push(pending);
            pending = Duration::ZERO;
            for n in 0..repeat {
                let ours_first = (applies.len() + n) % 2 == 0;
                for ours in [ours_first, !ours_first] {
                    let t = Instant::now();
                    if ours {
                        draw_ours(&mut screen, &app, &theme);
                        draws.push(t.elapsed());
                    } else if !ours_only {
                        term.draw(|fr| gpumon::tui::ui::draw(fr, &app, &theme))
                            .expect("draw");
                        ratatui.push(t.elapsed());
                    }
                }
            }
        }
        second = Some(s);
        let t = Instant::now();
        app.update(gpumon::tui::event::Event::Frame(f.clone()));
        pending += t.elapsed();
    }
    println!("{} at {w}x{h}", path.display());
    report("draw (one per second of data)", draws);
    report("  the same by ratatui's Terminal", ratatui);
    report("apply (one second of frames)", applies);
}
