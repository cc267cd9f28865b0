//! Shared helpers: build the app from a real recorded fixture, draw it on a TestBackend.
#![allow(dead_code)]

pub mod alerts;
pub mod channel;
pub mod combine;
pub mod corpus;
/// Frames for the export tests; also compiled into the scrape benchmark, which names it by
/// this path (benches/scrape.rs), so it stays outside `tests/it/`.
#[path = "../../export_support/mod.rs"]
pub mod export;
pub mod http;
pub mod isolate;
pub mod jsonl;
pub mod prom;
pub mod serial;

use std::path::{Path, PathBuf};

use gpumon::model::frame::{Frame, Header};
use gpumon::model::sample::GpuInfo;
use gpumon::pipeline::Pipeline;
use gpumon::record::{Next, Reader};
use gpumon::tui::app::{App, SourceKind, View};
use gpumon::tui::ui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// A recording's text, plain or gzipped (the bundled demos are stored gzipped).
pub fn read_text(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return String::from_utf8(bytes).expect("utf-8");
    }
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::MultiGzDecoder::new(&bytes[..]),
        &mut text,
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A recording's header as a test writes one: host `h`, no driver, NVML or CUDA versions,
/// one tick a second.
pub fn bare_header(started: i64, gpus: Vec<GpuInfo>) -> Frame {
    Frame::Header(Header {
        v: 1,
        format: "gpumon".into(),
        host: "h".into(),
        driver_version: None,
        nvml_version: None,
        cuda_version: None,
        started,
        interval_ms: 1000,
        gpus,
        gpumon_version: String::new(),
    })
}

pub fn frames(path: &Path) -> Vec<Frame> {
    let mut r = Reader::open(path).expect("fixture opens");
    let mut out = vec![Frame::Header(r.header.clone())];
    while let Next::Frame(f) = r.next().expect("fixture is valid") {
        out.push(f);
    }
    out
}

/// The app after replaying `name` up to `until` ms into the recording (all of it if None).
pub fn app_from(name: &str, until: Option<i64>) -> App {
    let path = fixture(name);
    let all = frames(&path);
    let start = all.first().map(|f| f.time()).unwrap_or(0);
    let mut app = App::new(
        SourceKind::Replay {
            file: path.display().to_string(),
            demo: false,
        },
        Pipeline::default(),
    );
    for f in all
        .iter()
        .filter(|f| until.is_none_or(|u| f.time() <= start + u))
    {
        app.apply(f);
    }
    app
}

pub fn theme(ascii: bool) -> Theme {
    Theme {
        ascii,
        color: false,
        utc: true,
    }
}

pub fn render(app: &App, w: u16, h: u16, theme: &Theme) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test backend");
    term.draw(|f| gpumon::tui::ui::draw(f, app, theme))
        .expect("draw");
    let buf = term.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..h {
        for x in 0..w {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// The gpumon binary for a command-line test: no backtraces in its stderr, and the
/// interposer it embeds rather than one a developer's `GPUMON_PRELOAD` points at.
pub fn gpumon() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("gpumon").expect("binary built");
    c.env("RUST_BACKTRACE", "0").env_remove("GPUMON_PRELOAD");
    c
}

pub fn with_view(mut app: App, view: View) -> App {
    app.view = view;
    app
}
