//! One HTTP/1.1 connection to Prometheus's query API, kept alive between refreshes: hyper's
//! client connection over a TCP stream, or over rustls for `https` (the crates gpumon's
//! endpoint already uses, so the client adds no dependency of its own).

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

use super::http_config::HttpConfig;

/// Largest answer read off the wire (compressed), and once inflated: a fleet of 1,000
/// nodes' current state is a few MB; past this it is not Prometheus answering.
pub const MAX_WIRE: usize = 64 << 20;
pub const MAX_BODY: usize = 256 << 20;

/// Where Prometheus is: `http(s)://host[:port][/prefix]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Url {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// A path prefix (`/prometheus` behind a reverse proxy), without a trailing slash.
    pub prefix: String,
}

impl Url {
    pub fn parse(s: &str) -> Result<Url, String> {
        let (tls, rest) = if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = s.strip_prefix("http://") {
            (false, r)
        } else if s.contains("://") {
            return Err(format!("{s}: only http:// and https:// URLs"));
        } else {
            (false, s)
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(format!(
                "{s}: credentials in the URL would show in `ps`; put them in \
                 --prometheus-http-config (basic_auth with password_file)"
            ));
        }
        if path.contains(['?', '#']) {
            return Err(format!("{s}: give the server's URL without a query"));
        }
        let default_port = if tls { 443 } else { 9090 };
        let (host, port) = if let Some(r) = authority.strip_prefix('[') {
            let (h, after) = r
                .split_once(']')
                .ok_or_else(|| format!("{s}: unclosed `[` in the host"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => p.parse().map_err(|_| format!("{s}: bad port `{p}`"))?,
                None if after.is_empty() => default_port,
                None => return Err(format!("{s}: unexpected `{after}` after the host")),
            };
            (h.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    p.parse().map_err(|_| format!("{s}: bad port `{p}`"))?,
                ),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err(format!("{s}: no host"));
        }
        Ok(Url {
            tls,
            host,
            port,
            prefix: path.trim_end_matches('/').to_string(),
        })
    }

    /// For the status line: scheme, host and port, never credentials.
    pub fn show(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!(
            "{}://{host}:{}{}",
            if self.tls { "https" } else { "http" },
            self.port,
            self.prefix
        )
    }
}

/// `application/x-www-form-urlencoded` for one value: PromQL has braces, quotes and `=~`.
pub fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3 / 2);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// One answer: the body (inflated), its size on the wire, and how long it took.
#[derive(Debug)]
pub struct Answer {
    pub body: Vec<u8>,
    pub wire_bytes: usize,
    pub took: Duration,
}

pub struct Client {
    url: Url,
    cfg: HttpConfig,
    tls: Option<tokio_rustls::TlsConnector>,
    conn: Option<SendRequest<Empty<Bytes>>>,
    timeout: Duration,
}

impl Client {
    pub fn new(url: Url, cfg: HttpConfig, timeout: Duration) -> Result<Client, String> {
        let tls = if url.tls {
            Some(tls_connector(&cfg)?)
        } else {
            None
        };
        Ok(Client {
            url,
            cfg,
            tls,
            conn: None,
            timeout,
        })
    }

    pub fn url(&self) -> &Url {
        &self.url
    }

    /// GET `path?query`, within the timeout; any failure drops the connection so the next
    /// call starts a fresh one.
    pub async fn get(&mut self, path: &str, query: &[(&str, &str)]) -> Result<Answer, String> {
        let start = Instant::now();
        let result = tokio::time::timeout(self.timeout, self.get_inner(path, query)).await;
        let out = match result {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {} s", self.timeout.as_secs_f64())),
        };
        if out.is_err() {
            self.conn = None;
        }
        out.map(|(body, wire_bytes)| Answer {
            body,
            wire_bytes,
            took: start.elapsed(),
        })
    }

    async fn get_inner(
        &mut self,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<(Vec<u8>, usize), String> {
        let mut target = format!("{}{path}", self.url.prefix);
        for (i, (k, v)) in query.iter().enumerate() {
            target.push(if i == 0 { '?' } else { '&' });
            target.push_str(k);
            target.push('=');
            target.push_str(&form_encode(v));
        }
        if self.conn.as_ref().is_none_or(|c| c.is_closed()) {
            self.conn = Some(self.connect().await?);
        }
        let conn = self.conn.as_mut().ok_or("not connected")?;
        conn.ready().await.map_err(|e| e.to_string())?;
        let host = if self.url.host.contains(':') {
            format!("[{}]:{}", self.url.host, self.url.port)
        } else {
            format!("{}:{}", self.url.host, self.url.port)
        };
        let mut req = hyper::Request::get(target)
            .header(hyper::header::HOST, host)
            .header(hyper::header::ACCEPT, "application/json")
            .header(hyper::header::ACCEPT_ENCODING, "gzip")
            .header(
                hyper::header::USER_AGENT,
                concat!("gpumon/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(a) = &self.cfg.authorization {
            req = req.header(hyper::header::AUTHORIZATION, a);
        }
        let req = req.body(Empty::new()).map_err(|e| e.to_string())?;
        let resp = conn.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let gzip = resp
            .headers()
            .get(hyper::header::CONTENT_ENCODING)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
        let wire = Limited::new(resp.into_body(), MAX_WIRE)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        let wire_bytes = wire.len();
        let body = if gzip {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&wire[..])
                .take(MAX_BODY as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("inflating the answer: {e}"))?;
            if out.len() > MAX_BODY {
                return Err(format!("answer larger than {} MiB", MAX_BODY >> 20));
            }
            out
        } else {
            wire.to_vec()
        };
        match status.as_u16() {
            200 => Ok((body, wire_bytes)),
            // The API's errors come as JSON with a reason; the caller reads it.
            400 | 422 | 503 if body.starts_with(b"{") => Ok((body, wire_bytes)),
            401 | 403 => Err(format!(
                "{status}: Prometheus refused the credentials (--prometheus-http-config)"
            )),
            _ => Err(format!(
                "{status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(200)]).trim()
            )),
        }
    }

    async fn connect(&self) -> Result<SendRequest<Empty<Bytes>>, String> {
        let tcp = tokio::net::TcpStream::connect((self.url.host.as_str(), self.url.port))
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => handshake(tcp).await,
            Some(tls) => {
                let name = self.cfg.server_name.as_deref().unwrap_or(&self.url.host);
                let name = ServerName::try_from(name.to_string())
                    .map_err(|e| format!("{name}: not a server name: {e}"))?;
                let stream = tls
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS: {e}"))?;
                handshake(stream).await
            }
        }
    }
}

async fn handshake<S>(io: S) -> Result<SendRequest<Empty<Bytes>>, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    // The connection's own task; it ends when `send` is dropped or the peer closes.
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

/// The system's trust store, where Debian, Fedora and SUSE keep it, unless `ca_file`.
const SYSTEM_CAS: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

fn tls_connector(cfg: &HttpConfig) -> Result<tokio_rustls::TlsConnector, String> {
    let path = match &cfg.ca_file {
        Some(p) => p.clone(),
        None => SYSTEM_CAS
            .iter()
            .map(std::path::PathBuf::from)
            .find(|p| p.exists())
            .ok_or("no system CA bundle found; give tls_config: {ca_file: ...}")?,
    };
    let mut roots = rustls::RootCertStore::empty();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .filter_map(Result::ok)
        .collect();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!("{}: no certificate in it", path.display()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_as_people_write_them() {
        let u = Url::parse("prom:9090").expect("parses");
        assert_eq!((u.tls, u.host.as_str(), u.port), (false, "prom", 9090));
        let u = Url::parse("https://mon.lan/prometheus/").expect("parses");
        assert_eq!(
            (u.tls, u.port, u.prefix.as_str()),
            (true, 443, "/prometheus")
        );
        let u = Url::parse("http://[::1]:9091").expect("parses");
        assert_eq!((u.host.as_str(), u.port), ("::1", 9091));
        assert_eq!(u.show(), "http://[::1]:9091");
        assert_eq!(Url::parse("http://localhost").expect("parses").port, 9090);
        for bad in [
            "ftp://x",
            "http://u:p@x:9090",
            "http://x:port",
            "http://",
            "http://x/?q",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn promql_is_form_encoded() {
        assert_eq!(
            form_encode(r#"{__name__=~"gpumon_.*"} or x"#),
            "%7B__name__%3D~%22gpumon_.%2A%22%7D%20or%20x"
        );
    }

    /// A one-shot server: reads one request head, answers `reply` (or nothing), and hands
    /// back the head it read.
    async fn server(reply: Option<Vec<u8>>) -> (u16, tokio::task::JoinHandle<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = l.local_addr().expect("addr").port();
        let task = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.expect("accept");
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).await.expect("read");
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            match reply {
                Some(r) => s.write_all(&r).await.expect("write"),
                None => tokio::time::sleep(Duration::from_secs(5)).await,
            }
            String::from_utf8_lossy(&head).into_owned()
        });
        (port, task)
    }

    fn client(port: u16, auth: Option<&str>, timeout_ms: u64) -> Client {
        let url = Url::parse(&format!("http://127.0.0.1:{port}/prom")).expect("url");
        let cfg = HttpConfig {
            authorization: auth.map(str::to_string),
            ..HttpConfig::default()
        };
        Client::new(url, cfg, Duration::from_millis(timeout_ms)).expect("client")
    }

    #[tokio::test]
    async fn a_gzipped_answer_comes_back_inflated_with_the_credentials_sent() {
        use std::io::Write;
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(body).expect("gzip");
        let gz = gz.finish().expect("gzip");
        let mut reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
            gz.len()
        )
        .into_bytes();
        reply.extend_from_slice(&gz);
        let (port, head) = server(Some(reply)).await;
        let mut c = client(port, Some("Bearer t0k"), 5_000);
        let a = c
            .get("/api/v1/query", &[("query", "up{a=\"b\"}")])
            .await
            .expect("answer");
        assert_eq!(a.body, body);
        assert_eq!(a.wire_bytes, gz.len());
        let head = head.await.expect("head");
        assert!(
            head.starts_with("GET /prom/api/v1/query?query=up%7Ba%3D%22b%22%7D HTTP/1.1"),
            "{head}"
        );
        assert!(
            head.to_lowercase().contains("authorization: bearer t0k"),
            "{head}"
        );
        assert!(
            head.to_lowercase().contains("accept-encoding: gzip"),
            "{head}"
        );
    }

    #[tokio::test]
    async fn a_silent_server_is_a_timeout_and_a_closed_port_is_said() {
        let (port, _keep) = server(None).await;
        let e = client(port, None, 200)
            .get("/api/v1/query", &[])
            .await
            .expect_err("timeout");
        assert_eq!(e, "no answer within 0.2 s");
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let e = client(closed, None, 2_000)
            .get("/api/v1/query", &[])
            .await
            .expect_err("refused");
        assert!(e.starts_with("cannot connect"), "{e}");
    }

    #[tokio::test]
    async fn refused_credentials_name_the_config_to_fix() {
        let (port, _head) = server(Some(
            b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n".to_vec(),
        ))
        .await;
        let e = client(port, None, 2_000)
            .get("/api/v1/query", &[])
            .await
            .expect_err("401");
        assert!(
            e.contains("401") && e.contains("--prometheus-http-config"),
            "{e}"
        );
    }

    #[test]
    fn a_tls_client_without_any_ca_says_so() {
        let cfg = HttpConfig {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..HttpConfig::default()
        };
        let e = tls_connector(&cfg).err().expect("refused");
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
    }
}
