//! Fairness: a flooding companion is held to its budget —
//! read slower, its excess markers dropped and counted, the status line says
//! so — while a well-behaved companion next to it loses no epoch.

use std::path::Path;
use std::time::{Duration, Instant};

use gpumon::channel::budget::Rates;
use gpumon::channel::{Config, spawn_with};
use gpumon::model::frame::CompanionFrame;
use gpumon::model::frame::Frame;
use gpumon::wire::Message;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;
use tokio::sync::mpsc;

use crate::support::channel::{HELLO, private_dir};
use crate::support::serial::flood;

const RATES: Rates = Rates {
    msgs_per_s: 2_000.0,
    bytes_per_s: 1024.0 * 1024.0,
    important_per_s: 20.0,
    burst_s: 0.5,
};

async fn serve(
    path: &Path,
    body: impl FnOnce(tokio::net::UnixStream) -> tokio::task::JoinHandle<()> + Send + 'static,
) {
    let l = UnixListener::bind(path).expect("bind");
    tokio::spawn(async move {
        let (s, _) = l.accept().await.expect("accept");
        let _ = body(s).await;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooder_is_held_to_its_budget_and_a_good_companion_loses_no_epoch() {
    let _flood = flood();
    let dir = private_dir();
    // pid 1 floods markers and samples; our own pid sends 30 epochs, one per 50 ms.
    serve(&dir.path().join("1.sock"), |s| {
        tokio::spawn(async move {
            let (rd, mut wr) = s.into_split();
            let _ = BufReader::new(rd).read_line(&mut String::new()).await;
            let _ = wr.write_all(format!("{HELLO}\n").as_bytes()).await;
            let chunk: String = (0..500)
                .map(|i| {
                    format!(
                        "{{\"v\":1,\"type\":\"marker\",\"kind\":\"mark\",\"label\":\"flood {i}\"}}\n{{\"v\":1,\"type\":\"sample\",\"dev\":0,\"allocated\":{i}}}\n"
                    )
                })
                .collect();
            while wr.write_all(chunk.as_bytes()).await.is_ok() {}
        })
    })
    .await;
    let me = std::process::id();
    serve(&dir.path().join(format!("{me}.sock")), |s| {
        tokio::spawn(async move {
            let (rd, mut wr) = s.into_split();
            let _ = BufReader::new(rd).read_line(&mut String::new()).await;
            let _ = wr.write_all(format!("{HELLO}\n").as_bytes()).await;
            for n in 0..30 {
                let line =
                    format!("{{\"v\":1,\"type\":\"epoch\",\"epoch\":{n},\"dev\":0,\"floor\":1}}\n");
                let _ = wr.write_all(line.as_bytes()).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        })
    })
    .await;
    let cfg = Config {
        dirs: Some(vec![dir.path().to_path_buf()]),
        scan_interval: Duration::from_millis(50),
        stats_interval: Duration::from_millis(100),
        // In-process fakes stand for two pids (identity is tests/it/channel_identity.rs).
        check_peer_pid: false,
        budget: RATES,
        ..Config::default()
    };
    let (tx, mut rx) = mpsc::channel(256);
    let _h = spawn_with(cfg, tx);
    let t0 = Instant::now();
    let (mut epochs, mut flood_markers, mut said) = (0, 0, false);
    let mut link = None;
    while t0.elapsed() < Duration::from_secs(3) {
        match tokio::time::timeout(Duration::from_millis(100), rx.recv()).await {
            Ok(Some(Frame::Companion(CompanionFrame { pid, msg, .. }))) => match msg {
                Message::Epoch(_) if pid == me => epochs += 1,
                Message::Marker(_) if pid == 1 => flood_markers += 1,
                Message::Link(l) if pid == 1 => link = Some(l),
                _ => {}
            },
            Ok(Some(Frame::Status { text, .. }))
                if text.contains("companion 1 sends more than its budget") =>
            {
                said = true
            }
            _ => {}
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(epochs, 30, "the good companion lost epochs");
    let allowed = (RATES.important_per_s * (secs + RATES.burst_s)) as usize + 1;
    assert!(
        flood_markers <= allowed,
        "{flood_markers} flood markers passed, budget {allowed}"
    );
    let link = link.expect("link counters of the flooder");
    assert!(link.over_budget > 0 && link.throttled_ms > 0, "{link:?}");
    assert!(said, "the status line did not name the flooder");
}

/// The review's program (C6): one companion marks every step, 20 a second, and closes an
/// epoch 4 times a second, with an OOM report now and then. Markers, epochs and events
/// shared one budget of 10 a second: most epochs were dropped (4 of 21 in the review).
/// Each kind has its own budget now: every epoch and OOM report arrives, markers are shed
/// and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_at_20_a_second_never_push_out_epochs_or_oom_reports() {
    let _flood = flood();
    let dir = private_dir();
    let me = std::process::id();
    serve(&dir.path().join(format!("{me}.sock")), |s| {
        tokio::spawn(async move {
            let (rd, mut wr) = s.into_split();
            let _ = BufReader::new(rd).read_line(&mut String::new()).await;
            let _ = wr.write_all(format!("{HELLO}\n").as_bytes()).await;
            for step in 0..80 {
                let mut line = format!(
                    "{{\"v\":1,\"type\":\"marker\",\"kind\":\"mark\",\"label\":\"step {step}\"}}\n"
                );
                if step % 5 == 0 {
                    line += &format!(
                        "{{\"v\":1,\"type\":\"epoch\",\"epoch\":{step},\"dev\":0,\"floor\":1}}\n"
                    );
                }
                if step % 40 == 0 {
                    line +=
                        "{\"v\":1,\"type\":\"event\",\"kind\":\"oom\",\"dev\":0,\"requested\":1}\n";
                }
                let _ = wr.write_all(line.as_bytes()).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        })
    })
    .await;
    let cfg = Config {
        dirs: Some(vec![dir.path().to_path_buf()]),
        scan_interval: Duration::from_millis(50),
        stats_interval: Duration::from_millis(100),
        check_peer_pid: false,
        budget: Rates {
            msgs_per_s: 500.0,
            bytes_per_s: 1024.0 * 1024.0,
            important_per_s: 10.0,
            burst_s: 0.5,
        },
        ..Config::default()
    };
    let (tx, mut rx) = mpsc::channel(256);
    let _h = spawn_with(cfg, tx);
    let t0 = Instant::now();
    let (mut epochs, mut ooms, mut marks) = (0, 0, 0);
    let mut link = None;
    while t0.elapsed() < Duration::from_secs(5) && epochs + ooms < 18 {
        match tokio::time::timeout(Duration::from_millis(100), rx.recv()).await {
            Ok(Some(Frame::Companion(CompanionFrame { pid, msg, .. }))) if pid == me => match msg {
                Message::Epoch(_) => epochs += 1,
                Message::Event(_) => ooms += 1,
                Message::Marker(_) => marks += 1,
                Message::Link(l) => link = Some(l),
                _ => {}
            },
            _ => {}
        }
    }
    assert_eq!((epochs, ooms), (16, 2), "epochs and OOM reports lost");
    assert!(
        marks < 80,
        "markers over their budget are shed: {marks} of 80"
    );
    // The link counters come with the next stats interval.
    let deadline = Instant::now() + Duration::from_secs(2);
    while link.as_ref().is_none_or(|l| l.over_budget == 0) && Instant::now() < deadline {
        if let Ok(Some(Frame::Companion(CompanionFrame {
            msg: Message::Link(l),
            ..
        }))) = tokio::time::timeout(Duration::from_millis(100), rx.recv()).await
        {
            link = Some(l);
        }
    }
    assert!(
        link.is_some_and(|l| l.over_budget > 0),
        "shed markers are counted"
    );
}

/// An endless line and a flood of blank lines were never counted: the
/// peer is now closed, with a status line, instead of burning a core forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_lines_and_blank_floods_close_the_peer() {
    let _flood = flood();
    let dir = private_dir();
    for (pid, filler) in [(1u32, b'x'), (std::os::unix::process::parent_id(), b'\n')] {
        serve(&dir.path().join(format!("{pid}.sock")), move |s| {
            tokio::spawn(async move {
                let (rd, mut wr) = s.into_split();
                let _ = BufReader::new(rd).read_line(&mut String::new()).await;
                let _ = wr.write_all(format!("{HELLO}\n").as_bytes()).await;
                let chunk = vec![filler; 64 * 1024];
                while wr.write_all(&chunk).await.is_ok() {}
            })
        })
        .await;
    }
    let cfg = Config {
        dirs: Some(vec![dir.path().to_path_buf()]),
        scan_interval: Duration::from_millis(50),
        retry_after: Duration::from_secs(60),
        check_peer_pid: false,
        budget: Rates {
            bytes_per_s: 256.0 * 1024.0 * 1024.0,
            ..Rates::default()
        },
        ..Config::default()
    };
    let (tx, mut rx) = mpsc::channel(256);
    let _h = spawn_with(cfg, tx);
    let t0 = Instant::now();
    let mut said = Vec::new();
    let mut gone = 0;
    while gone < 2 && t0.elapsed() < Duration::from_secs(15) {
        match tokio::time::timeout(Duration::from_millis(200), rx.recv()).await {
            Ok(Some(Frame::Status { text, .. })) if text.contains("closing") => said.push(text),
            Ok(Some(Frame::Companion(CompanionFrame {
                msg: Message::Disconnected(d),
                ..
            }))) if d.reason == "hostile or broken peer" => gone += 1,
            _ => {}
        }
    }
    assert_eq!(gone, 2, "{said:?}");
    assert!(said.iter().any(|t| t.contains("without end")), "{said:?}");
    assert!(said.iter().any(|t| t.contains("blank lines")), "{said:?}");
}
