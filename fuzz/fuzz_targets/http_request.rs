//! The metrics endpoint's request path: any bytes from a client get an HTTP
//! answer or a close, never a panic or a hang.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use gpumon::export::{Exporter, Limits, http};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = http::negotiate(Some(s));
    }
    let exporter = Arc::new(Exporter::new("fuzz".into()));
    rt().block_on(async {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let limits = Limits {
            header_read_timeout: Duration::from_millis(50),
            ..Limits::default()
        };
        let task = tokio::spawn(http::serve_stream(exporter, server, limits));
        let _ = client.write_all(data).await;
        let _ = client.shutdown().await;
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), client.read_to_end(&mut out)).await;
        let done = tokio::time::timeout(Duration::from_secs(2), task).await;
        assert!(done.is_ok(), "connection task hung");
        if !out.is_empty() {
            assert!(out.starts_with(b"HTTP/1."), "not an HTTP answer");
        }
    });
});
