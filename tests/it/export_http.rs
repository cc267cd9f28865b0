//! The endpoint over real loopback sockets: content negotiation, and clients
//! that misbehave (unknown paths, huge heads, garbage, slow senders).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::export::*;
use crate::support::http::{get, raw, start, status_line};
use gpumon::export::Limits;

fn quick() -> Limits {
    Limits {
        header_read_timeout: Duration::from_millis(500),
        ..Limits::default()
    }
}

#[test]
fn metrics_are_negotiated() {
    let srv = start(2, quick());
    let (status, ct, body) = get(srv.addr, "/metrics", None);
    assert_eq!(status, 200);
    assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
    assert!(body.contains("gpumon_gpu_memory_used_bytes{gpu=\"0\""));
    assert!(!body.contains("# EOF"));

    let (status, ct, body) = get(
        srv.addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    );
    assert_eq!(status, 200);
    assert_eq!(
        ct,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(body.ends_with("# EOF\n"));
}

#[test]
fn published_state_shows_on_the_next_scrape() {
    let srv = start(2, quick());
    let mut frames = two_gpu_frames();
    frames.push(tick(
        T0 + 4_000,
        vec![gpu(0, 7 * GIB, &[]), gpu(1, 8 * GIB, &[])],
    ));
    srv.exporter.publish(&state_of(&frames));
    let (_, _, body) = get(srv.addr, "/metrics", None);
    assert!(
        body.contains(&format!("hostname=\"node-a\"}} {}\n", 7 * GIB)),
        "{body}"
    );
}

#[test]
fn index_unknown_paths_and_methods() {
    let srv = start(2, quick());
    let (status, ct, body) = get(srv.addr, "/", None);
    assert_eq!(status, 200);
    assert!(ct.starts_with("text/html"));
    assert!(body.contains("href=\"/metrics\""));
    assert_eq!(get(srv.addr, "/nope", None).0, 404);
    assert_eq!(get(srv.addr, "/metrics/extra", None).0, 404);
    let resp = raw(
        srv.addr,
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert!(status_line(&resp).contains(" 405 "), "{resp}");
    assert!(resp.to_ascii_lowercase().contains("allow: get, head"));
    let resp = raw(
        srv.addr,
        b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(status_line(&resp).contains(" 200 "), "{resp}");
    assert!(!resp.contains("gpumon_up"), "HEAD has no body: {resp}");
}

#[test]
fn garbage_is_a_bad_request() {
    let srv = start(2, quick());
    let resp = raw(srv.addr, b"\x16\x03\x01 this is not http\r\n\r\n");
    assert!(status_line(&resp).contains(" 400 "), "{resp:?}");
}

#[test]
fn huge_headers_get_431() {
    let srv = start(2, quick());
    let mut req = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    req.extend(std::iter::repeat_n(b'a', 64 * 1024));
    req.extend_from_slice(b"\r\n\r\n");
    let resp = raw(srv.addr, &req);
    assert!(
        status_line(&resp).contains(" 431 "),
        "{:?}",
        status_line(&resp)
    );
    // Still serving afterwards.
    assert_eq!(get(srv.addr, "/metrics", None).0, 200);
}

#[test]
fn a_slow_client_stalls_nobody_and_is_cut_off() {
    let srv = start(2, quick());
    let mut slow = TcpStream::connect(srv.addr).expect("connect");
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .expect("partial head");
    // Others are served at once while the slow head is pending.
    let t = Instant::now();
    for _ in 0..5 {
        assert_eq!(get(srv.addr, "/metrics", None).0, 200);
    }
    assert!(
        t.elapsed() < Duration::from_millis(400),
        "scrapes waited on the slow client: {:?}",
        t.elapsed()
    );
    // The slow client is dropped once the head timeout passes.
    slow.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("set timeout");
    let t = Instant::now();
    let mut buf = Vec::new();
    let _ = slow.read_to_end(&mut buf);
    let waited = t.elapsed();
    assert!(
        waited < Duration::from_secs(3),
        "connection was kept {waited:?}"
    );
    let resp = String::from_utf8_lossy(&buf);
    assert!(
        resp.is_empty() || status_line(&resp).contains(" 408 "),
        "{resp}"
    );
}

#[test]
fn at_the_connection_cap_the_stalest_connection_makes_room() {
    let srv = start(
        2,
        Limits {
            max_connections: 2,
            ..quick()
        },
    );
    let mut idle: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(srv.addr).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    // A third connection is served (it once was refused, so two idle
    // sockets locked every scraper out), and the oldest idle one is closed.
    let resp = raw(
        srv.addr,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(status_line(&resp).contains(" 200 "), "{resp}");
    idle[0]
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("set timeout");
    let mut buf = [0u8; 16];
    assert!(
        matches!(idle[0].read(&mut buf), Ok(0) | Err(_)),
        "the stalest connection was kept"
    );
}

/// The raw response split into its head (lower-cased) and body bytes.
fn raw_bytes(addr: std::net::SocketAddr, request: &[u8]) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("set timeout");
    s.write_all(request).expect("send request");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&out[..split]).to_ascii_lowercase();
    (head, out[split + 4..].to_vec())
}

#[test]
fn metrics_are_gzipped_when_asked_and_decode_to_the_plain_body() {
    let srv = start(2, quick());
    let (_, _, plain) = get(srv.addr, "/metrics", None);
    let (head, body) = raw_bytes(
        srv.addr,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n",
    );
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(head.contains("vary: accept, accept-encoding"), "{head}");
    assert!(
        body.len() * 3 < plain.len(),
        "gzip {} bytes vs plain {}",
        body.len(),
        plain.len()
    );
    let mut decoded = String::new();
    flate2::read::GzDecoder::new(&body[..])
        .read_to_string(&mut decoded)
        .expect("a valid gzip stream");
    assert_eq!(decoded, plain);

    // Refused by q=0, or not asked: plain text, no Content-Encoding.
    for ask in [
        "Accept-Encoding: gzip;q=0\r\n",
        "Accept-Encoding: br\r\n",
        "",
    ] {
        let req = format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{ask}Connection: close\r\n\r\n");
        let (head, body) = raw_bytes(srv.addr, req.as_bytes());
        assert!(!head.contains("content-encoding"), "{ask}: {head}");
        assert_eq!(String::from_utf8_lossy(&body), plain, "{ask}");
    }
}

#[test]
fn healthz_is_200_while_samples_arrive_and_503_before_any() {
    let srv = start(2, quick());
    let (status, ct, body) = get(srv.addr, "/healthz", None);
    assert_eq!(status, 200, "{body}");
    assert!(ct.starts_with("text/plain"), "{ct}");
    assert!(
        body.starts_with("ok: last sample ") && body.ends_with("s ago\n"),
        "{body:?}"
    );
    assert_eq!(body.lines().count(), 1);

    // An endpoint whose sampler never delivered (nothing published) is not healthy.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let ex = std::sync::Arc::new(gpumon::export::Exporter::new("h".into()));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let _srv = std::thread::spawn(move || {
        let _ = rt.block_on(gpumon::export::http::serve_on(ex, listener, quick()));
    });
    let (status, _, body) = get(addr, "/healthz", None);
    assert_eq!((status, body.as_str()), (503, "stale: no sample yet\n"));
    let resp = raw(
        addr,
        b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert!(status_line(&resp).contains(" 405 "), "{resp}");
}

#[test]
fn health_goes_stale_after_missed_samples_and_recovers_on_the_next() {
    use gpumon::export::{Exporter, HEALTH_MIN_GAP, Health};
    let ex = Exporter::new("h".into());
    let frames = two_gpu_frames();
    ex.publish(&state_of(&frames));
    let now = Instant::now();
    assert!(matches!(ex.health_at(now), Health::Fresh(_)));
    // The frames' header says 1 s sampling: three missed samples are under the floor.
    assert!(matches!(
        ex.health_at(now + HEALTH_MIN_GAP - Duration::from_millis(500)),
        Health::Fresh(_)
    ));
    let later = now + HEALTH_MIN_GAP + Duration::from_secs(1);
    assert!(
        matches!(ex.health_at(later), Health::Stale(_, limit) if limit == HEALTH_MIN_GAP),
        "{:?}",
        ex.health_at(later)
    );
    // Publishing the same state again (events without a new sample) does not refresh it.
    ex.publish(&state_of(&frames));
    assert!(matches!(ex.health_at(later), Health::Stale(..)));
    let mut more = frames.clone();
    more.push(tick(T0 + 4_000, vec![gpu(0, GIB, &[]), gpu(1, GIB, &[])]));
    ex.publish(&state_of(&more));
    assert!(matches!(ex.health_at(Instant::now()), Health::Fresh(_)));
}
