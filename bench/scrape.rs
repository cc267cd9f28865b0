//! Scrape cost with 8 GPUs x 50 processes of synthetic state:
//! `cargo bench --bench scrape` (optimised) or `cargo test --bench scrape` (debug, quicker to build).
//! Prints publish cost (what every tick pays), render cost, loopback scrape
//! latency and CPU per scrape, and publish latency while a client scrapes flat out.

#[path = "../tests/export_support/mod.rs"]
mod export_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use export_support::{state_of, synthetic_frames};
use gpumon::export::snapshot::{AllocRow, ProcRow};
use gpumon::export::{Exporter, Format, Limits, http, metrics};

fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct we pass it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer is always accepted.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(what: &str, mut d: Vec<Duration>) {
    d.sort();
    println!(
        "{what:<44} n={:<5} p50={:>9.1?} p99={:>9.1?} max={:>9.1?}",
        d.len(),
        pct(&d, 0.5),
        pct(&d, 0.99),
        pct(&d, 1.0)
    );
}

fn timed(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect()
}

fn scrape(url: &str, accept: &str) -> usize {
    ureq::get(url)
        .header("Accept", accept)
        .call()
        .expect("scrape succeeds")
        .into_body()
        .read_to_string()
        .expect("utf-8")
        .len()
}

fn main() {
    let state = state_of(&synthetic_frames(8, 50, 10));
    let exporter = Arc::new(Exporter::new("bench".into()));
    exporter.publish(&state);
    let text = exporter.render(Format::Prometheus);
    println!(
        "state: {} GPUs, {} processes; exposition {} lines, {} KiB",
        state.gpus.len(),
        state.procs.len(),
        text.lines().count(),
        text.len() / 1024
    );

    report(
        "publish (copy model -> snapshot, every tick)",
        timed(2_000, || exporter.publish(&state)),
    );
    report(
        "render Prometheus text 0.0.4",
        timed(500, || {
            std::hint::black_box(exporter.render(Format::Prometheus));
        }),
    );
    report(
        "render OpenMetrics 1.0",
        timed(500, || {
            std::hint::black_box(exporter.render(Format::OpenMetrics));
        }),
    );

    // The model tracks at most 256 processes, so the full 8 x 50 is rendered from a
    // hand-made snapshot: every process listed by NVML, and a companion on one
    // training rank per GPU with 16 free-block size classes each.
    let mut worst = (*exporter.snapshot()).clone();
    worst.procs = (0..8u32)
        .flat_map(|g| {
            (0..50u32).map(move |p| ProcRow {
                gpu: g,
                pid: 10_000 + g * 1_000 + p,
                user: format!("user{}", p % 7),
                process: format!("python3 worker-{p}"),
                used: Some(u64::from(p + 1) << 28),
                peak: Some(u64::from(p + 2) << 28),
                placement: Default::default(),
            })
        })
        .collect();
    worst.allocs = worst
        .procs
        .iter()
        .filter(|p| p.pid % 1_000 == 0)
        .map(|p| AllocRow {
            gpu: p.gpu,
            pid: p.pid,
            user: p.user.clone(),
            process: p.process.clone(),
            placement: p.placement.clone(),
            allocated: p.used,
            reserved: p.peak,
            cached: Some(1 << 28),
            peak_allocated: p.peak,
            peak_reserved: p.peak,
            limit: Some(140 << 30),
            free_total: Some(1 << 28),
            largest_free: Some(1 << 26),
            frag_index: Some(0.75),
            free_blocks: Some(100),
            free_hist: (12..28).map(|k| (k, 3, 3 << k)).collect(),
            epoch: Some(7),
            last_epoch: Some(6),
            epoch_floor: Some(1 << 30),
            epoch_peak: Some(2 << 30),
            ooms: Some(0),
            alloc_retries: Some(2),
            // Fields added later (the last sample) stay empty: this bench is about rows.
            ..AllocRow::default()
        })
        .collect();
    let worst_text = metrics::render(&worst, &[], Format::OpenMetrics);
    report(
        &format!(
            "render 8x50, 8 companions ({} lines, {} KiB)",
            worst_text.lines().count(),
            worst_text.len() / 1024
        ),
        timed(200, || {
            std::hint::black_box(metrics::render(&worst, &[], Format::OpenMetrics));
        }),
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind loopback");
    let url = format!(
        "http://{}/metrics",
        listener.local_addr().expect("bound address")
    );
    rt.spawn(http::serve_on(
        Arc::clone(&exporter),
        listener,
        Limits::default(),
    ));
    let om = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    scrape(&url, om);

    let n = 300;
    let cpu0 = cpu_time();
    let lat = timed(n, || {
        scrape(&url, om);
    });
    let cpu = cpu_time() - cpu0;
    report("GET /metrics over loopback (OpenMetrics)", lat);
    println!(
        "{:<44} {:.2?} (server + client, whole process)",
        "CPU per scrape",
        cpu / n as u32
    );

    // Sampling must not notice scrapes: publish latency while a client scrapes flat out.
    let stop = Arc::new(AtomicBool::new(false));
    let hammer = {
        let (stop, url) = (Arc::clone(&stop), url.clone());
        std::thread::spawn(move || {
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                scrape(&url, "text/plain");
                k += 1;
            }
            k
        })
    };
    let busy = timed(2_000, || exporter.publish(&state));
    stop.store(true, Ordering::Relaxed);
    let scrapes = hammer.join().expect("scraper thread");
    report(
        &format!("publish during {scrapes} back-to-back scrapes"),
        busy,
    );
}
