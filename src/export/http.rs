//! The HTTP side of the exporter: hyper 1 over tokio, one task per connection,
//! so a slow or hostile client only ever holds its own task and one permit.
//! hyper answers malformed requests with 400 and oversized heads with 431.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::Exporter;
use super::encode::Format;

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A client must send its whole request head within this time (also bounds
    /// how long an idle keep-alive connection is kept).
    pub header_read_timeout: Duration,
    /// Largest request head accepted; larger gets 431. hyper's floor is 8 KiB.
    pub max_header_bytes: usize,
    /// Further connections are closed at once, so a flood cannot exhaust memory.
    pub max_connections: usize,
    /// After this a connection finishes its current request and is closed,
    /// which also bounds a client that stops reading its response.
    pub max_connection_age: Duration,
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(10),
            max_header_bytes: 16 * 1024,
            max_connections: 64,
            max_connection_age: Duration::from_secs(600),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// Accept connections on `listener` forever; returns only if the listener
/// itself is unusable.
pub async fn serve_on(
    exporter: Arc<Exporter>,
    listener: TcpListener,
    limits: Limits,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192));
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) if is_fatal(&e) => return Err(e),
            Err(_) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let exporter = Arc::clone(&exporter);
        let builder = builder.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let svc = service_fn(move |req| {
                let resp = respond(&exporter, &req);
                async move { Ok::<_, Infallible>(resp) }
            });
            let conn = builder.serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = tokio::time::sleep(limits.max_connection_age) => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(limits.shutdown_grace, conn).await;
                }
            }
        });
    }
}

fn is_fatal(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), InvalidInput | NotConnected | Unsupported)
}

const INDEX: &str = "<!doctype html><html><head><title>gpumon</title></head><body>\
<h1>gpumon</h1><p><a href=\"/metrics\">/metrics</a></p></body></html>\n";

fn respond(exporter: &Exporter, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let readable = matches!(*req.method(), Method::GET | Method::HEAD);
    match req.uri().path() {
        "/metrics" if readable => {
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            let format = negotiate(accept);
            reply(
                StatusCode::OK,
                format.content_type(),
                exporter.render(format),
            )
        }
        "/" if readable => reply(StatusCode::OK, "text/html; charset=utf-8", INDEX.into()),
        "/metrics" | "/" => {
            let mut r = reply(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain; charset=utf-8",
                "method not allowed\n".into(),
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            r
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found; metrics are at /metrics\n".into(),
        ),
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// OpenMetrics when the client ranks it at least as high as the plain text
/// format, as Prometheus does by default; Prometheus text otherwise.
pub fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::Prometheus;
    };
    let (mut om, mut text) = (0.0f32, 0.0f32);
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let (mut q, mut version) = (1.0f32, None);
        for p in parts {
            let Some((k, v)) = p.split_once('=') else {
                continue;
            };
            let v = v.trim().trim_matches('"');
            match k.trim().to_ascii_lowercase().as_str() {
                "q" => q = v.parse::<f32>().unwrap_or(0.0).clamp(0.0, 1.0),
                "version" => version = Some(v.to_string()),
                _ => {}
            }
        }
        match media.as_str() {
            "application/openmetrics-text"
                if matches!(version.as_deref(), None | Some("1.0.0" | "0.0.1")) =>
            {
                om = om.max(q)
            }
            "text/plain" => text = text.max(q),
            _ => {}
        }
    }
    if om > 0.0 && om >= text {
        Format::OpenMetrics
    } else {
        Format::Prometheus
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_the_scrapers_preference() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(negotiate(None), Format::Prometheus);
        assert_eq!(negotiate(Some("*/*")), Format::Prometheus);
        assert_eq!(
            negotiate(Some("text/plain;version=0.0.4")),
            Format::Prometheus
        );
        assert_eq!(
            negotiate(Some("text/plain;q=0.9, application/openmetrics-text;q=0.5")),
            Format::Prometheus
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text; version=\"1.0.0\"")),
            Format::OpenMetrics
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;version=2.0.0")),
            Format::Prometheus,
            "an unknown version is not served"
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0")),
            Format::Prometheus
        );
        assert_eq!(negotiate(Some(";;,=,q=")), Format::Prometheus);
    }
}
