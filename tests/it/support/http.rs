//! The metrics endpoint on a loopback port, for export_http and http_hostile: a server that
//! serves the two-GPU frames of `support::export`, and plain clients.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use gpumon::export::{Exporter, Limits, http};

use super::export::{state_of, two_gpu_frames};

/// A running endpoint; it stops when this is dropped (with its runtime).
pub struct Server {
    pub addr: SocketAddr,
    pub exporter: Arc<Exporter>,
    _rt: tokio::runtime::Runtime,
}

/// The endpoint on 127.0.0.1 (a free port), on a runtime of `workers` threads, publishing
/// the state of `two_gpu_frames()`.
pub fn start(workers: usize, limits: Limits) -> Server {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let exporter = Arc::new(Exporter::new("test-host".into()));
    exporter.publish(&state_of(&two_gpu_frames()));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind loopback");
    let addr = listener.local_addr().expect("bound address");
    rt.spawn(http::serve_on(Arc::clone(&exporter), listener, limits));
    Server {
        addr,
        exporter,
        _rt: rt,
    }
}

/// Send raw bytes, return the whole response (the server closes or the read times out).
pub fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("set timeout");
    // A server may answer and close before reading everything we send.
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

pub fn status_line(resp: &str) -> &str {
    resp.lines().next().unwrap_or_default()
}

/// GET `path` with an HTTP client: (status, content type, body).
pub fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut req = ureq::get(&format!("http://{addr}{path}"));
    if let Some(a) = accept {
        req = req.header("Accept", a);
    }
    let resp = req
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .expect("request completes");
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let status = resp.status().as_u16();
    let body = resp.into_body().read_to_string().expect("utf-8 body");
    (status, ct, body)
}
