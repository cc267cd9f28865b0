//! `--web-config-file`: TLS and basic auth for the metrics endpoint, in the YAML format the
//! Prometheus exporters share (exporter-toolkit's, as node_exporter and dcgm-exporter take
//! it), so a fleet's existing file works unchanged:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt      # relative paths are relative to this file
//!   key_file: server.key
//!   min_version: TLS12         # optional: TLS12 (default) or TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$...     # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```
//!
//! Everything is read and checked at start: a file that would not protect the endpoint as
//! written (an unknown key, a key gpumon does not implement, a missing or unreadable
//! certificate, a hash that is not bcrypt) is refused with a message naming it, never served
//! in the clear by mistake. TLS is rustls on the `ring` provider (no cmake, and a glibc old
//! enough for the manylinux2014 wheel).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// What the endpoint enforces. `Default` is plain HTTP without auth (no file given).
#[derive(Default)]
pub struct WebConfig {
    /// The rustls server configuration, when the file has `tls_server_config`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// User name to bcrypt hash; empty: no authentication.
    users: BTreeMap<String, String>,
    /// `Authorization` values that verified: bcrypt costs ~50 ms per check at cost 10, and
    /// Prometheus sends the same header every scrape (exporter-toolkit caches the same way).
    verified: Mutex<Vec<Vec<u8>>>,
    /// `Authorization` values that failed, as keyed hashes, newest last: a flood that
    /// repeats a wrong password costs one bcrypt check, not one per request (the review
    /// measured 1.87 of 2 cores held by 100 such connections).
    failed: Mutex<std::collections::VecDeque<u64>>,
    /// The key of those hashes (random per process).
    failed_key: std::collections::hash_map::RandomState,
}

/// Wrong credentials remembered at once; a new one past this replaces the oldest.
const FAILED_CACHE: usize = 4096;

/// Credentials remembered at once; a new one past this replaces the oldest.
const VERIFIED_CACHE: usize = 16;

/// Checked against when the user is unknown, so a wrong name costs what a wrong password
/// does (no user-name oracle by timing). bcrypt("", cost 10).
const DUMMY_HASH: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileV {
    tls_server_config: Option<TlsV>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    http_server_config: Option<serde_yaml_ng::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsV {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    min_version: Option<String>,
    max_version: Option<String>,
    // exporter-toolkit keys gpumon does not implement: read only to be refused by name.
    cert: Option<serde_yaml_ng::Value>,
    key: Option<serde_yaml_ng::Value>,
    client_auth_type: Option<serde_yaml_ng::Value>,
    client_ca_file: Option<serde_yaml_ng::Value>,
    client_allowed_sans: Option<serde_yaml_ng::Value>,
    cipher_suites: Option<serde_yaml_ng::Value>,
    curve_preferences: Option<serde_yaml_ng::Value>,
    prefer_server_cipher_suites: Option<serde_yaml_ng::Value>,
}

impl WebConfig {
    /// Read and check `path`; the error names the file and what is wrong.
    pub fn load(path: &Path) -> Result<WebConfig, String> {
        let show = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read web config {show}: {e}"))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, dir).map_err(|e| format!("web config {show}: {e}"))
    }

    /// Whether requests must carry basic-auth credentials.
    pub fn needs_auth(&self) -> bool {
        !self.users.is_empty()
    }

    fn parse(text: &str, dir: &Path) -> Result<WebConfig, String> {
        // An empty file is a valid empty configuration (plain HTTP), as for the exporters.
        let file: FileV = if text.trim().is_empty() {
            FileV {
                tls_server_config: None,
                basic_auth_users: None,
                http_server_config: None,
            }
        } else {
            serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?
        };
        if let Some(h) = &file.http_server_config
            && !h.is_null()
        {
            return Err(
                "http_server_config is not supported by gpumon (it speaks HTTP/1.1 and sets \
                 its own headers); remove it"
                    .into(),
            );
        }
        let tls = match file.tls_server_config {
            Some(t) => Some(Arc::new(tls_config(t, dir)?)),
            None => None,
        };
        let users = file.basic_auth_users.unwrap_or_default();
        for (user, hash) in &users {
            if user.is_empty() || user.contains(':') {
                return Err(format!(
                    "basic_auth_users: '{}' is not a user name (empty, or has a ':')",
                    crate::fmt::quote(user)
                ));
            }
            if hash.parse::<bcrypt::HashParts>().is_err() {
                return Err(format!(
                    "basic_auth_users.{}: not a bcrypt hash ($2y$..., e.g. from \
                     `htpasswd -nBC 10 \"\" | tr -d ':\\n'`); plain passwords are refused",
                    crate::fmt::quote(user)
                ));
            }
        }
        Ok(WebConfig {
            tls,
            users,
            verified: Mutex::default(),
            failed: Mutex::default(),
            failed_key: Default::default(),
        })
    }

    /// Whether an `Authorization` header value admits the request. Without users every
    /// request is admitted. Blocking (bcrypt): call it off the HTTP thread's loop.
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        if self.users.is_empty() {
            return true;
        }
        let Some(value) = authorization else {
            return false;
        };
        if self.lock().iter().any(|v| v == value) {
            return true;
        }
        let Some((user, pass)) = basic_credentials(value) else {
            return false;
        };
        let (hash, known) = match self.users.get(&user) {
            Some(h) => (h.as_str(), true),
            None => (DUMMY_HASH, false),
        };
        let ok = bcrypt::verify(pass.as_bytes(), hash).unwrap_or(false) && known;
        if ok {
            let mut v = self.lock();
            if v.len() >= VERIFIED_CACHE {
                v.remove(0);
            }
            v.push(value.to_vec());
        } else {
            let h = self.failed_hash(value);
            let mut f = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
            if f.len() >= FAILED_CACHE {
                f.pop_front();
            }
            f.push_back(h);
        }
        ok
    }

    /// The answer without bcrypt when there is one: `Some(true)` for a credential that
    /// verified (a repeat scrape), `Some(false)` for none, one that is not basic auth or
    /// one that already failed; `None` when only a bcrypt check can tell (`admits`). Lets
    /// the HTTP thread answer those without a trip to the blocking pool.
    pub fn cached(&self, authorization: Option<&[u8]>) -> Option<bool> {
        if self.users.is_empty() {
            return Some(true);
        }
        let Some(value) = authorization else {
            return Some(false);
        };
        if self.lock().iter().any(|v| v == value) {
            return Some(true);
        }
        if basic_credentials(value).is_none() {
            return Some(false);
        }
        let h = self.failed_hash(value);
        let f = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        f.contains(&h).then_some(false)
    }

    fn failed_hash(&self, value: &[u8]) -> u64 {
        use std::hash::BuildHasher;
        self.failed_key.hash_one(value)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        self.verified.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `Basic base64(user:pass)` (RFC 7617), the scheme case-insensitive.
fn basic_credentials(value: &[u8]) -> Option<(String, String)> {
    use base64::Engine;
    let text = std::str::from_utf8(value).ok()?.trim();
    let (scheme, b64) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let pair = String::from_utf8(raw).ok()?;
    let (u, p) = pair.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

fn tls_config(t: TlsV, dir: &Path) -> Result<rustls::ServerConfig, String> {
    let unsupported = [
        ("cert", t.cert.is_some()),
        ("key", t.key.is_some()),
        ("client_auth_type", t.client_auth_type.is_some()),
        ("client_ca_file", t.client_ca_file.is_some()),
        ("client_allowed_sans", t.client_allowed_sans.is_some()),
        ("cipher_suites", t.cipher_suites.is_some()),
        ("curve_preferences", t.curve_preferences.is_some()),
        (
            "prefer_server_cipher_suites",
            t.prefer_server_cipher_suites.is_some(),
        ),
    ];
    if let Some((k, _)) = unsupported.iter().find(|(_, set)| *set) {
        return Err(format!(
            "tls_server_config.{k} is not supported by gpumon (it takes cert_file, key_file, \
             min_version and max_version); remove it"
        ));
    }
    let at = |p: PathBuf| if p.is_absolute() { p } else { dir.join(p) };
    let cert_file = t
        .cert_file
        .map(at)
        .ok_or("tls_server_config: cert_file is missing")?;
    let key_file = t
        .key_file
        .map(at)
        .ok_or("tls_server_config: key_file is missing")?;
    let version = |v: &Option<String>, which: &str| -> Result<Option<u8>, String> {
        match v.as_deref() {
            None => Ok(None),
            Some("TLS12") => Ok(Some(12)),
            Some("TLS13") => Ok(Some(13)),
            Some("TLS10" | "TLS11") => Err(format!(
                "tls_server_config.{which}: TLS 1.0 and 1.1 are not offered; use TLS12 or TLS13"
            )),
            Some(other) => Err(format!(
                "tls_server_config.{which}: '{}' is not TLS12 or TLS13",
                crate::fmt::quote(other)
            )),
        }
    };
    let min = version(&t.min_version, "min_version")?.unwrap_or(12);
    let max = version(&t.max_version, "max_version")?.unwrap_or(13);
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
            .into_iter()
            .filter(|(v, _)| (min..=max).contains(v))
            .map(|(_, p)| p)
            .collect();
    if versions.is_empty() {
        return Err("tls_server_config: min_version is above max_version".into());
    }
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_file)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| format!("cert_file {}: {e}", cert_file.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "cert_file {}: no PEM certificate in it",
            cert_file.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&key_file)
        .map_err(|e| format!("key_file {}: {e}", key_file.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls_server_config: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            format!(
                "cert_file {} and key_file {}: {e}",
                cert_file.display(),
                key_file.display()
            )
        })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<WebConfig, String> {
        WebConfig::parse(text, Path::new("/nonexistent"))
    }

    #[test]
    fn bad_files_are_refused_naming_what_is_wrong() {
        let cases = [
            (
                "tls_server_config: {cert_file: a.crt}\n",
                "key_file is missing",
            ),
            (
                "tls_server_config: {key_file: a.key}\n",
                "cert_file is missing",
            ),
            (
                "tls_server_config: {cert_file: a.crt, key_file: a.key}\n",
                "cert_file /nonexistent/a.crt",
            ),
            (
                "tls_server_config: {cert_file: a, key_file: b, client_ca_file: c}\n",
                "client_ca_file is not supported",
            ),
            (
                "basic_auth_users: {ana: hunter2}\n",
                "basic_auth_users.ana: not a bcrypt hash",
            ),
            ("basic_auth_user: {}\n", "unknown field `basic_auth_user`"),
            (
                "http_server_config: {http2: false}\n",
                "http_server_config is not supported",
            ),
            (
                "tls_server_config: {cert_file: a, key_file: b, min_version: TLS10}\n",
                "TLS 1.0 and 1.1 are not offered",
            ),
        ];
        for (text, says) in cases {
            let e = parse(text).err().unwrap_or_default();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let empty = parse("").expect("empty is plain HTTP");
        assert!(empty.tls.is_none() && !empty.needs_auth());
    }

    #[test]
    fn basic_auth_checks_the_bcrypt_hash_and_remembers_what_verified() {
        let hash = bcrypt::hash("s3cret", 4).expect("hash");
        let cfg = parse(&format!("basic_auth_users:\n  prom: '{hash}'\n")).expect("valid");
        let header = |u: &str, p: &str| {
            use base64::Engine;
            let b = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
            format!("Basic {b}").into_bytes()
        };
        assert!(!cfg.admits(None));
        assert!(!cfg.admits(Some(&header("prom", "wrong"))));
        assert!(!cfg.admits(Some(&header("nobody", "s3cret"))));
        assert!(!cfg.admits(Some(b"Bearer abc")));
        assert_eq!(cfg.cached(Some(&header("prom", "s3cret"))), None);
        assert!(cfg.admits(Some(&header("prom", "s3cret"))));
        assert_eq!(cfg.cached(Some(&header("prom", "s3cret"))), Some(true));
        // A wrong password already checked is answered without bcrypt; a new one is not.
        assert_eq!(cfg.cached(Some(&header("prom", "wrong"))), Some(false));
        assert_eq!(cfg.cached(Some(&header("prom", "wrong2"))), None);
        assert_eq!(cfg.cached(None), Some(false));
        assert_eq!(cfg.cached(Some(b"Bearer abc")), Some(false));
        // The dummy hash is a real bcrypt hash, so an unknown user costs a real check.
        assert!(DUMMY_HASH.parse::<bcrypt::HashParts>().is_ok());
    }
}
