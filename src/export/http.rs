//! The HTTP side of the exporter: hyper 1 over tokio, on a thread and runtime
//! of its own, one task per connection.
//!
//! Why its own thread: gpumon's main loop is a single-threaded runtime that
//! also decodes companion traffic, so a flood there would delay scrapes (610 ms
//! p50 with 8 flooding companions); here a scrape waits only on other
//! scrapes. Why eviction rather than refusal at the connection cap: refusing
//! lets 64 idle, slowloris or non-reading clients lock every scraper out; so at
//! the cap the connection that has gone longest without completing a request
//! is closed to make room, and every connection that completes no request
//! within `request_timeout` is closed anyway. A legitimate scrape completes
//! within milliseconds of connecting, so it is always the freshest and never
//! the one evicted. hyper answers malformed requests with 400 and oversized
//! heads with 431.
//!
//! `/metrics` is gzipped when the client accepts it (Prometheus always does); the
//! compressed body is cached beside the plain one, so a scrape flood costs one
//! compression per published sample, not one per scrape. `/healthz` answers 200
//! while the sampler is producing samples and 503 once it has stopped (see
//! `Exporter::health`), for liveness probes and load balancers.
//!
//! With `--web-config-file` (`web_config.rs`) connections are TLS (the handshake must end
//! within `header_read_timeout`, as a request head must) and every path asks for basic
//! auth (401 otherwise). A bcrypt check runs on the blocking pool, one at a time, within a
//! per-peer rate (`http_auth.rs`), so wrong passwords cannot take the machine's cores or
//! stall the scrapes of the right one; a credential that verified or failed is remembered
//! and costs nothing the next time.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot};

use super::encode::Format;
use super::http_auth::{AuthGate, Checked};
use super::web_config::WebConfig;
use super::{AlertRow, Exporter, Health, Snapshot, metrics};

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A client must send its whole request head within this time.
    pub header_read_timeout: Duration,
    /// Largest request head accepted; larger gets 431. hyper's floor is 8 KiB.
    pub max_header_bytes: usize,
    /// Connections kept at once; at the cap the stalest one is closed to admit
    /// the new one (see the module doc), so a flood cannot exhaust memory or fds.
    pub max_connections: usize,
    /// A connection that completes no request for this long (idle keep-alive,
    /// slowloris, a client that stops reading its responses) is closed.
    pub request_timeout: Duration,
    /// After this a connection finishes its current request and is closed.
    pub max_connection_age: Duration,
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(5),
            max_header_bytes: 16 * 1024,
            max_connections: 128,
            request_timeout: Duration::from_secs(10),
            max_connection_age: Duration::from_secs(600),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// Serve on `listener` until this future is dropped; returns early only if the
/// listener itself is unusable. The work runs on a dedicated thread.
pub async fn serve_on(
    exporter: Arc<Exporter>,
    listener: TcpListener,
    limits: Limits,
) -> std::io::Result<()> {
    serve_with(exporter, listener, limits, Arc::new(WebConfig::default())).await
}

/// `serve_on` with TLS and basic auth as `web` says.
pub async fn serve_with(
    exporter: Arc<Exporter>,
    listener: TcpListener,
    limits: Limits,
    web: Arc<WebConfig>,
) -> std::io::Result<()> {
    let listener = listener.into_std()?;
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (done_tx, done_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("gpumon-http".into())
        .spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .and_then(|rt| {
                    rt.block_on(async move {
                        let listener = TcpListener::from_std(listener)?;
                        tokio::select! {
                            r = accept_loop(exporter, listener, limits, web) => r,
                            // The caller dropped us (its task ended or was aborted).
                            _ = stop_rx => Ok(()),
                        }
                    })
                });
            let _ = done_tx.send(result);
        })?;
    // Held across the await: dropping this future drops `stop_tx`, which stops the thread.
    let _stop = stop_tx;
    done_rx.await.unwrap_or(Ok(()))
}

/// One live connection as the cap sees it.
struct Slot {
    /// Milliseconds since the server started at which this connection last
    /// completed a request head (or connected).
    last_done: AtomicI64,
    evict: Notify,
}

/// The connections of one server, for the cap and its eviction.
struct Registry {
    epoch: Instant,
    conns: Mutex<HashMap<u64, Arc<Slot>>>,
    next_id: AtomicU64,
    /// Connections closed to make room (observable in tests).
    evicted: AtomicU64,
}

impl Registry {
    fn now(&self) -> i64 {
        i64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Slot>>> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Register a new connection, evicting the stalest when at the cap.
    fn admit(&self, cap: usize) -> (u64, Arc<Slot>) {
        let mut conns = self.lock();
        while conns.len() >= cap.max(1) {
            let Some(id) = conns
                .iter()
                .min_by_key(|(_, s)| s.last_done.load(Ordering::Relaxed))
                .map(|(id, _)| *id)
            else {
                break;
            };
            if let Some(s) = conns.remove(&id) {
                s.evict.notify_one();
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot {
            last_done: AtomicI64::new(self.now()),
            evict: Notify::new(),
        });
        conns.insert(id, Arc::clone(&slot));
        (id, slot)
    }
}

/// The rendered body of the latest snapshot, per format: one render per
/// published sample however many scrapers ask, and the lock is held only to
/// clone a `Bytes` (a reference count), never while rendering or writing.
#[derive(Default)]
struct BodyCache {
    entries: Mutex<Vec<CachedBody>>,
}

/// The inputs a body was rendered from (held, so their addresses stay unique), its
/// format, whether it is gzipped, and the body.
type CachedBody = (Arc<Snapshot>, Arc<Vec<AlertRow>>, Format, bool, Bytes);

impl BodyCache {
    fn body(&self, exporter: &Exporter, format: Format, gzip: bool) -> Bytes {
        let (snap, alerts) = exporter.inputs();
        let hit = |e: &CachedBody, gz: bool| {
            Arc::ptr_eq(&e.0, &snap) && Arc::ptr_eq(&e.1, &alerts) && e.2 == format && e.3 == gz
        };
        if let Some(e) = self.lock().iter().find(|e| hit(e, gzip)) {
            return e.4.clone();
        }
        let plain = match self.lock().iter().find(|e| hit(e, false)) {
            Some(e) => e.4.clone(),
            None => Bytes::from(metrics::render(&snap, &alerts, format)),
        };
        let body = if gzip {
            compress(&plain)
        } else {
            plain.clone()
        };
        let mut entries = self.lock();
        entries.retain(|e| Arc::ptr_eq(&e.0, &snap) && Arc::ptr_eq(&e.1, &alerts));
        for (gz, b) in [(false, &plain), (true, &body)] {
            if (gz == gzip || !gz) && !entries.iter().any(|e| hit(e, gz)) {
                entries.push((
                    Arc::clone(&snap),
                    Arc::clone(&alerts),
                    format,
                    gz,
                    b.clone(),
                ));
            }
        }
        body
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<CachedBody>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn accept_loop(
    exporter: Arc<Exporter>,
    listener: TcpListener,
    limits: Limits,
    web: Arc<WebConfig>,
) -> std::io::Result<()> {
    let checks = Arc::new(AuthGate::default());
    let tls = web.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    let registry = Arc::new(Registry {
        epoch: Instant::now(),
        conns: Mutex::default(),
        next_id: AtomicU64::new(0),
        evicted: AtomicU64::new(0),
    });
    let cache = Arc::new(BodyCache::default());
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) if is_fatal(&e) => return Err(e),
            Err(_) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (id, slot) = registry.admit(limits.max_connections);
        let _ = stream.set_nodelay(true);
        let exporter = Arc::clone(&exporter);
        let cache = Arc::clone(&cache);
        let registry = Arc::clone(&registry);
        let builder = builder.clone();
        let (web, checks, tls) = (Arc::clone(&web), Arc::clone(&checks), tls.clone());
        tokio::spawn(async move {
            let (r, s) = (Arc::clone(&registry), Arc::clone(&slot));
            let svc = service_fn(move |req: Request<Incoming>| {
                s.last_done.store(r.now(), Ordering::Relaxed);
                guarded(&exporter, &cache, &web, &checks, peer.ip(), req)
            });
            let served = async {
                match tls {
                    None => run_conn(&builder, TokioIo::new(stream), svc, limits).await,
                    Some(acceptor) => {
                        let hs = tokio::time::timeout(
                            limits.header_read_timeout,
                            acceptor.accept(stream),
                        );
                        // A failed or slow handshake just closes the connection.
                        if let Ok(Ok(tls_stream)) = hs.await {
                            run_conn(&builder, TokioIo::new(tls_stream), svc, limits).await;
                        }
                    }
                }
            };
            tokio::select! {
                () = served => {}
                _ = slot.evict.notified() => {}
                _ = stale(&registry, &slot, limits.request_timeout) => {}
            }
            registry.lock().remove(&id);
        });
    }
}

/// One connection until it ends or reaches its age, then a graceful close.
async fn run_conn<I, S>(builder: &http1::Builder, io: I, svc: S, limits: Limits)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<Incoming, ResBody = Full<Bytes>>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = tokio::time::sleep(limits.max_connection_age) => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(limits.shutdown_grace, conn).await;
        }
    }
}

/// The answer once basic auth (when configured) admits the request; 401 otherwise, 429
/// when the check is refused for its cost (`http_auth.rs`). A credential not yet known is
/// checked with bcrypt on the blocking pool.
fn guarded(
    exporter: &Arc<Exporter>,
    cache: &Arc<BodyCache>,
    web: &Arc<WebConfig>,
    gate: &Arc<AuthGate>,
    peer: std::net::IpAddr,
    req: Request<Incoming>,
) -> impl std::future::Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send + use<> {
    let auth = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes().to_vec());
    let now = match web.cached(auth.as_deref()) {
        Some(true) => Some(respond(exporter, cache, &req)),
        Some(false) => Some(unauthorized()),
        None => None,
    };
    let (exporter, cache, web, gate) = (
        Arc::clone(exporter),
        Arc::clone(cache),
        Arc::clone(web),
        Arc::clone(gate),
    );
    async move {
        if let Some(r) = now {
            return Ok(r);
        }
        let checked = match auth {
            Some(a) => gate.check(web, peer, a).await,
            None => Checked::Refused,
        };
        Ok(match checked {
            Checked::Admitted => respond(&exporter, &cache, &req),
            Checked::Refused => unauthorized(),
            Checked::TooMany => too_many(),
        })
    }
}

/// A credential check refused for its cost: try again in a second.
fn too_many() -> Response<Full<Bytes>> {
    let mut r = reply(
        StatusCode::TOO_MANY_REQUESTS,
        "text/plain; charset=utf-8",
        "too many authentication attempts\n",
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

fn unauthorized() -> Response<Full<Bytes>> {
    let mut r = reply(
        StatusCode::UNAUTHORIZED,
        "text/plain; charset=utf-8",
        "unauthorized\n",
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"gpumon\", charset=\"UTF-8\""),
    );
    r
}

/// One connection's request handling on any byte stream, with the same
/// limits as the server: what the fuzz target (`fuzz/`) drives in memory.
pub async fn serve_stream<I>(exporter: Arc<Exporter>, io: I, limits: Limits)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let cache = BodyCache::default();
    let svc = service_fn(move |req| {
        let resp = respond(&exporter, &cache, &req);
        async move { Ok::<_, Infallible>(resp) }
    });
    let _ = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .serve_connection(TokioIo::new(io), svc)
        .await;
}

/// Resolves once the connection has completed no request for `timeout`.
async fn stale(registry: &Registry, slot: &Slot, timeout: Duration) {
    let timeout_ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
    loop {
        let idle = registry.now() - slot.last_done.load(Ordering::Relaxed);
        if idle >= timeout_ms {
            return;
        }
        let left = u64::try_from(timeout_ms - idle).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(left.max(1))).await;
    }
}

/// gzip at flate2's fast level: a metrics body is repetitive text (about 8x smaller
/// even so), and the sampler's host should not pay for the last few percent.
fn compress(plain: &[u8]) -> Bytes {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(plain.len() / 4),
        flate2::Compression::fast(),
    );
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(plain);
    Bytes::from(enc.finish().unwrap_or_default())
}

/// Whether `Accept-Encoding` admits gzip (RFC 9110 12.5.3): named with q > 0 (`x-gzip`
/// too), or `*` with q > 0 and gzip not refused by name.
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    let Some(v) = accept_encoding else {
        return false;
    };
    let (mut named, mut star) = (None::<f32>, None::<f32>);
    for item in v.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let mut q = 1.0f32;
        for p in parts {
            if let Some((k, val)) = p.split_once('=')
                && k.trim().eq_ignore_ascii_case("q")
            {
                q = val.trim().parse::<f32>().unwrap_or(0.0).clamp(0.0, 1.0);
            }
        }
        match coding.as_str() {
            "gzip" | "x-gzip" => named = Some(named.map_or(q, |n| n.max(q))),
            "*" => star = Some(star.map_or(q, |n| n.max(q))),
            _ => {}
        }
    }
    named.or(star).is_some_and(|q| q > 0.0)
}

fn is_fatal(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), InvalidInput | NotConnected | Unsupported)
}

const INDEX: &str = "<!doctype html><html><head><title>gpumon</title></head><body>\
<h1>gpumon</h1><p><a href=\"/metrics\">/metrics</a> <a href=\"/healthz\">/healthz</a></p></body></html>\n";

fn respond(
    exporter: &Exporter,
    cache: &BodyCache,
    req: &Request<Incoming>,
) -> Response<Full<Bytes>> {
    let readable = matches!(*req.method(), Method::GET | Method::HEAD);
    match req.uri().path() {
        "/metrics" if readable => {
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            let format = negotiate(accept);
            let gzip = accepts_gzip(
                req.headers()
                    .get(header::ACCEPT_ENCODING)
                    .and_then(|v| v.to_str().ok()),
            );
            let mut r = reply(
                StatusCode::OK,
                format.content_type(),
                cache.body(exporter, format, gzip),
            );
            let h = r.headers_mut();
            h.insert(
                header::VARY,
                HeaderValue::from_static("Accept, Accept-Encoding"),
            );
            if gzip {
                h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            }
            r
        }
        "/healthz" if readable => {
            let (status, text) = health_line(&exporter.health());
            let mut r = reply(status, "text/plain; charset=utf-8", text);
            r.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        "/" if readable => reply(StatusCode::OK, "text/html; charset=utf-8", INDEX),
        "/metrics" | "/" | "/healthz" => {
            let mut r = reply(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain; charset=utf-8",
                "method not allowed\n",
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            r
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found; metrics are at /metrics\n",
        ),
    }
}

/// `/healthz`'s status and one-line body.
fn health_line(h: &Health) -> (StatusCode, String) {
    match h {
        Health::Fresh(age) => (
            StatusCode::OK,
            format!("ok: last sample {:.1}s ago\n", age.as_secs_f64()),
        ),
        Health::NoSample => (
            StatusCode::SERVICE_UNAVAILABLE,
            "stale: no sample yet\n".to_string(),
        ),
        Health::Stale(age, limit) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "stale: last sample {:.0}s ago (limit {:.0}s)\n",
                age.as_secs_f64(),
                limit.as_secs_f64()
            ),
        ),
    }
}

fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
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
    fn gzip_only_when_the_client_admits_it() {
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("identity, GZIP;q=0.5")));
        assert!(accepts_gzip(Some("x-gzip")));
        assert!(accepts_gzip(Some("*")));
        assert!(!accepts_gzip(None));
        assert!(!accepts_gzip(Some("")));
        assert!(!accepts_gzip(Some("br, deflate")));
        assert!(!accepts_gzip(Some("gzip;q=0")));
        assert!(
            !accepts_gzip(Some("gzip;q=0, *")),
            "refused by name beats *"
        );
        assert!(!accepts_gzip(Some("gzipx, ;;=,q")));
    }

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
