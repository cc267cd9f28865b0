//! `--web-config-file`: the metrics endpoint over TLS with basic auth, in the
//! Prometheus exporters' format. A self-signed certificate is made here (rcgen), the real
//! `gpumon serve` is scraped by a rustls client (401 without or with wrong credentials, 200
//! with the right ones) and by a real Prometheus when one is installed; bad files are refused
//! at start.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use predicates::prelude::*;
use tokio_rustls::rustls;

use crate::support::gpumon;

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

/// A certificate for localhost and 127.0.0.1 with its key, written into `dir`; returns the
/// certificate's DER for the client's trust store.
fn self_signed(dir: &Path) -> Vec<u8> {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("certificate");
    std::fs::write(dir.join("server.crt"), ck.cert.pem()).expect("write cert");
    std::fs::write(dir.join("server.key"), ck.signing_key.serialize_pem()).expect("write key");
    ck.cert.der().to_vec()
}

/// A web config with relative paths (read relative to the file) and one user.
fn web_config(dir: &Path, user: &str, password: &str) -> PathBuf {
    let hash = bcrypt::hash(password, 4).expect("bcrypt");
    let path = dir.join("web.yml");
    std::fs::write(
        &path,
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
             basic_auth_users:\n  {user}: '{hash}'\n"
        ),
    )
    .expect("write web config");
    path
}

/// `gpumon serve --replay` on a port the system picks; returns the child and its address
/// (from the line it prints).
fn serve(config: &Path) -> (KillOnDrop, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["serve", "--listen", "127.0.0.1:0", "--web-config-file"])
        .arg(config)
        .arg("--replay")
        .arg(demo())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpumon serve starts");
    let stderr = child.stderr.take().expect("stderr");
    let child = KillOnDrop(child);
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).expect("a line");
    let addr = line
        .trim()
        .strip_prefix("gpumon: serving metrics on https://")
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .parse()
        .expect("an address");
    (child, addr)
}

fn client(cert_der: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(cert_der.to_vec()))
        .expect("trusted");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// One GET over TLS; returns the status code and the whole response.
fn get(
    cfg: &Arc<rustls::ClientConfig>,
    addr: SocketAddr,
    auth: Option<(&str, &str)>,
) -> (u16, String) {
    use base64::Engine;
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let conn = rustls::ClientConnection::new(Arc::clone(cfg), name).expect("client");
    let tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut req = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n".to_string();
    if let Some((u, p)) = auth {
        let b = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        req.push_str(&format!("Authorization: Basic {b}\r\n"));
    }
    req.push_str("\r\n");
    tls.write_all(req.as_bytes()).expect("request");
    let mut resp = String::new();
    // A server closing without close_notify is an error to rustls; the bytes are in.
    let _ = tls.read_to_string(&mut resp);
    let code = resp
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, resp)
}

#[test]
fn tls_scrape_needs_the_right_password() {
    let dir = tempfile::tempdir().expect("tempdir");
    let der = self_signed(dir.path());
    let config = web_config(dir.path(), "prometheus", "s3cret-pass");
    let (_gpumon, addr) = serve(&config);
    let cfg = client(&der);
    let (code, resp) = get(&cfg, addr, None);
    assert_eq!(code, 401, "{resp}");
    assert!(
        resp.to_ascii_lowercase()
            .contains("www-authenticate: basic"),
        "{resp}"
    );
    assert_eq!(get(&cfg, addr, Some(("prometheus", "wrong"))).0, 401);
    assert_eq!(get(&cfg, addr, Some(("nobody", "s3cret-pass"))).0, 401);
    // The replay is read at full speed; its samples are there within moments.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, resp) = get(&cfg, addr, Some(("prometheus", "s3cret-pass")));
        assert_eq!(code, 200, "{resp}");
        if resp.contains("gpumon_gpu_memory_used_bytes{") {
            break;
        }
        assert!(Instant::now() < deadline, "no samples served: {resp}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Plain HTTP to the TLS port gets no metrics.
    let mut tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let mut back = Vec::new();
    let _ = tcp.read_to_end(&mut back);
    assert!(
        !String::from_utf8_lossy(&back).contains("gpumon_"),
        "served in the clear"
    );
}

#[test]
fn a_bad_web_config_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    self_signed(dir.path());
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write");
        p
    };
    let cases = [
        (
            write("plain.yml", "basic_auth_users:\n  prom: hunter2\n"),
            "basic_auth_users.prom: not a bcrypt hash",
        ),
        (
            write("nokey.yml", "tls_server_config:\n  cert_file: server.crt\n"),
            "key_file is missing",
        ),
        (
            write(
                "nofile.yml",
                "tls_server_config:\n  cert_file: none.crt\n  key_file: server.key\n",
            ),
            "none.crt",
        ),
        (
            write("typo.yml", "tls_server_config:\n  cert_fil: server.crt\n"),
            "unknown field `cert_fil`",
        ),
        (
            write(
                "mtls.yml",
                "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n",
            ),
            "client_ca_file is not supported",
        ),
        (
            write(
                "swapped.yml",
                "tls_server_config:\n  cert_file: server.key\n  key_file: server.crt\n",
            ),
            "server.key",
        ),
    ];
    for (file, says) in &cases {
        gpumon()
            .args(["serve", "--listen", "127.0.0.1:0", "--web-config-file"])
            .arg(file)
            .arg("--replay")
            .arg(demo())
            .timeout(Duration::from_secs(20))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(*says).and(predicate::str::contains("serving").not()));
    }
    // The same file and check for --serve beside a headless replay; and it needs --serve.
    gpumon()
        .args([
            "replay",
            "--headless",
            "--serve",
            "127.0.0.1:0",
            "--web-config-file",
        ])
        .arg(&cases[0].0)
        .arg(demo())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not a bcrypt hash"));
    gpumon()
        .args(["replay", "--headless", "--web-config-file"])
        .arg(&cases[0].0)
        .arg(demo())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--serve"));
}

fn prometheus_available() -> bool {
    let found = Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("GPUMON_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
            "GPUMON_REQUIRE_PROMETHEUS=1 but `prometheus` cannot run"
        );
        eprintln!("skipping: `prometheus` is not installed (apt-get install prometheus)");
    }
    found
}

/// `up` of one job, once Prometheus has scraped it.
fn up(prom: SocketAddr, job: &str) -> Option<f64> {
    let body = ureq::get(&format!("http://{prom}/api/v1/query"))
        .query("query", format!("up{{job=\"{job}\"}}"))
        .call()
        .ok()?
        .into_body()
        .read_to_string()
        .ok()?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// A real Prometheus scrapes over TLS with basic auth (its own `tls_config` and
/// `basic_auth`): the job with the password is up, the one with a wrong one is down.
#[test]
fn prometheus_scrapes_over_tls_with_basic_auth() {
    if !prometheus_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    self_signed(dir.path());
    let config = web_config(dir.path(), "prometheus", "s3cret-pass");
    let (_gpumon, target) = serve(&config);
    let job = |name: &str, password: &str| {
        format!(
            "  - job_name: {name}\n    scheme: https\n    tls_config:\n      ca_file: {ca}\n      \
             server_name: localhost\n    basic_auth:\n      username: prometheus\n      \
             password: {password}\n    static_configs:\n      - targets: ['{target}']\n",
            ca = dir.path().join("server.crt").display()
        )
    };
    let prom_cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &prom_cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{}{}",
            job("right", "s3cret-pass"),
            job("wrong", "nope")
        ),
    )
    .expect("prometheus config");
    let prom: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        l.local_addr().expect("addr")
    };
    let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log");
    let _prometheus = KillOnDrop(
        Command::new("prometheus")
            .arg(format!("--config.file={}", prom_cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={prom}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let (right, wrong) = loop {
        if let (Some(r), Some(w)) = (up(prom, "right"), up(prom, "wrong")) {
            break (r, w);
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped; its log:\n{}",
            std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(
        (right, wrong),
        (1.0, 0.0),
        "up of the right and the wrong password"
    );
}
