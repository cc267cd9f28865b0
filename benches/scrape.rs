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
use gpumon::export::{Exporter, Format, Limits, http};

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
