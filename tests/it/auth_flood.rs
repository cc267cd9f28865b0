//! A flood of wrong passwords does not turn into CPU (once 100
//! connections sending wrong basic-auth credentials kept gpumon at 1.87 of 2 cores doing
//! bcrypt, and a new good credential waited 3 s). Here 16 clients send 20 requests a
//! second each for 3 s, first repeating one wrong password, then a new one every time;
//! gpumon's CPU over the flood is read from /proc, and a first scrape with the right
//! password from another address is answered during it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::serial::flood;

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.gpumon.jsonl.gz")
}

fn basic(user: &str, pass: &str) -> String {
    use base64::Engine;
    let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    format!("Basic {b}")
}

/// `gpumon serve --replay` with basic auth over plain HTTP.
fn serve(dir: &Path) -> (KillOnDrop, SocketAddr) {
    // Cost 8: a check is several milliseconds of CPU even in an optimised build.
    let hash = bcrypt::hash("s3cret", 8).expect("bcrypt");
    let cfg = dir.join("web.yml");
    std::fs::write(&cfg, format!("basic_auth_users:\n  prom: '{hash}'\n")).expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["serve", "--listen", "127.0.0.1:0", "--web-config-file"])
        .arg(&cfg)
        .arg("--replay")
        .arg(demo())
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpumon serve");
    let stderr = child.stderr.take().expect("stderr");
    let child = KillOnDrop(child);
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).expect("a line");
    let addr = line
        .trim()
        .strip_prefix("gpumon: serving metrics on http://")
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .parse()
        .expect("an address");
    (child, addr)
}

/// User and system CPU seconds of `pid` so far.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().expect("utime") + f[12].parse::<f64>().expect("stime");
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// One request on `s` (keep-alive); the status code.
fn request(s: &mut TcpStream, auth: &str) -> Option<u16> {
    let req = format!("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut r = BufReader::new(s.try_clone().ok()?);
    let mut status = String::new();
    r.read_line(&mut status).ok()?;
    let code = status.split_whitespace().nth(1)?.parse().ok()?;
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        if h == "\r\n" || h.is_empty() {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(code)
}

/// 16 clients, 20 requests a second each, for `secs`; `fresh`: a new wrong password each
/// time. Returns the requests answered.
fn flood_for(addr: SocketAddr, secs: f64, fresh: bool) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let (stop, answered) = (Arc::clone(&stop), Arc::clone(&answered));
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut s) = TcpStream::connect(addr) else {
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    };
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let pass = if fresh {
                            format!("guess-{t}-{n}")
                        } else {
                            "wrong".into()
                        };
                        if request(&mut s, &basic("prom", &pass)).is_none() {
                            break;
                        }
                        answered.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    answered.load(Ordering::Relaxed)
}

/// A first scrape with the right password from 127.0.0.2 (another peer): its status and
/// how long it took.
async fn good_scrape(addr: SocketAddr) -> (Option<u16>, Duration) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let t0 = Instant::now();
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind("127.0.0.2:0".parse().expect("addr"))
        .expect("bind 127.0.0.2");
    let mut s = sock.connect(addr).await.expect("connect");
    let req = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: {}\r\n\r\n",
        basic("prom", "s3cret")
    );
    s.write_all(req.as_bytes()).await.expect("write");
    let mut head = [0u8; 12];
    let got = tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut head)).await;
    let code = got
        .ok()
        .and_then(|r| r.ok())
        .and_then(|_| std::str::from_utf8(&head[9..12]).ok()?.parse().ok());
    (code, t0.elapsed())
}

#[test]
fn a_wrong_password_flood_costs_no_cpu_and_a_good_scrape_gets_in() {
    let _flood = flood();
    let d = tempfile::tempdir().expect("dir");
    let (child, addr) = serve(d.path());
    let pid = child.0.id();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for fresh in [false, true] {
        let before = cpu_secs(pid);
        let t0 = Instant::now();
        let scrape = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(good_scrape(addr))
        });
        let answered = flood_for(addr, 3.0, fresh);
        let wall = t0.elapsed().as_secs_f64();
        let cpu = cpu_secs(pid) - before;
        let (code, took) = scrape.join().expect("scrape");
        println!(
            "{} wrong passwords: {answered} answered in {wall:.1} s, gpumon {cpu:.2} CPU-s ({:.0} % of a core); a new good credential: {code:?} in {took:?}",
            if fresh { "fresh" } else { "repeated" },
            cpu / wall * 100.0
        );
        assert!(answered > 100, "the flood ran: {answered}");
        assert!(
            cpu < 0.35 * wall,
            "gpumon spent {cpu:.2} CPU-s in {wall:.1} s under the flood"
        );
        assert_eq!(code, Some(200), "the good scrape");
        assert!(
            took < Duration::from_secs(2),
            "the good scrape took {took:?}"
        );
    }
    drop(rt);
}
