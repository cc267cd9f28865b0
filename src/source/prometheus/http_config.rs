//! `--prometheus-http-config FILE`: how to reach Prometheus, in the HTTP client format
//! Prometheus's own tools read (`promtool --http.config.file`, a scrape job's client keys):
//! `basic_auth` (username, password or password_file), `authorization` (type, credentials
//! or credentials_file), the older `bearer_token`/`bearer_token_file`, and `tls_config`
//! (ca_file, server_name). A key gpumon cannot honour is refused by name rather than
//! silently dropped: a proxy or client certificate that is ignored would send queries where
//! nobody meant them to go.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// What every request carries, read once at start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HttpConfig {
    /// The `Authorization` header's value.
    pub authorization: Option<String>,
    /// PEM certificates to trust instead of the system's.
    pub ca_file: Option<PathBuf>,
    /// The name the server's certificate must carry, when not the URL's host.
    pub server_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileV {
    basic_auth: Option<BasicV>,
    authorization: Option<AuthV>,
    bearer_token: Option<String>,
    bearer_token_file: Option<PathBuf>,
    tls_config: Option<TlsV>,
    follow_redirects: Option<bool>,
    enable_http2: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BasicV {
    username: String,
    password: Option<String>,
    password_file: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthV {
    #[serde(rename = "type")]
    kind: Option<String>,
    credentials: Option<String>,
    credentials_file: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsV {
    ca_file: Option<PathBuf>,
    server_name: Option<String>,
    insecure_skip_verify: Option<bool>,
    min_version: Option<String>,
}

impl HttpConfig {
    pub fn load(path: &Path) -> Result<HttpConfig, String> {
        let show = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read Prometheus HTTP config {show}: {e}"))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, dir).map_err(|e| format!("Prometheus HTTP config {show}: {e}"))
    }

    fn parse(text: &str, dir: &Path) -> Result<HttpConfig, String> {
        if text.trim().is_empty() {
            return Ok(HttpConfig::default());
        }
        let f: FileV = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
        // Prometheus's own defaults; the other values need what gpumon does not do.
        if f.follow_redirects == Some(true) {
            return Err(
                "follow_redirects: true is not supported (gpumon queries the URL given)".into(),
            );
        }
        if f.enable_http2 == Some(true) {
            return Err("enable_http2: true is not supported (gpumon speaks HTTP/1.1)".into());
        }
        let file = |p: &Path, what: &str| -> Result<String, String> {
            let p = if p.is_absolute() {
                p.to_path_buf()
            } else {
                dir.join(p)
            };
            std::fs::read_to_string(&p)
                .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                .map_err(|e| format!("cannot read {what} {}: {e}", p.display()))
        };
        let mut auths = Vec::new();
        if let Some(b) = f.basic_auth {
            let password = match (b.password, b.password_file) {
                (Some(_), Some(_)) => {
                    return Err("basic_auth: give password or password_file, not both".into());
                }
                (Some(p), None) => p,
                (None, Some(p)) => file(&p, "basic_auth password_file")?,
                (None, None) => String::new(),
            };
            use base64::Engine;
            let pair = format!("{}:{password}", b.username);
            auths.push(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            ));
        }
        if let Some(a) = f.authorization {
            let kind = a.kind.unwrap_or_else(|| "Bearer".into());
            if kind.eq_ignore_ascii_case("basic") {
                return Err("authorization: type Basic is not allowed; use basic_auth".into());
            }
            let cred = match (a.credentials, a.credentials_file) {
                (Some(_), Some(_)) => {
                    return Err(
                        "authorization: give credentials or credentials_file, not both".into(),
                    );
                }
                (Some(c), None) => c,
                (None, Some(p)) => file(&p, "authorization credentials_file")?,
                (None, None) => return Err("authorization: no credentials given".into()),
            };
            auths.push(format!("{kind} {cred}"));
        }
        match (f.bearer_token, f.bearer_token_file) {
            (Some(_), Some(_)) => {
                return Err("give bearer_token or bearer_token_file, not both".into());
            }
            (Some(t), None) => auths.push(format!("Bearer {t}")),
            (None, Some(p)) => auths.push(format!("Bearer {}", file(&p, "bearer_token_file")?)),
            (None, None) => {}
        }
        if auths.len() > 1 {
            return Err(
                "at most one of basic_auth, authorization and bearer_token(_file) may be set"
                    .into(),
            );
        }
        if auths.iter().any(|a| a.contains(['\r', '\n'])) {
            return Err("credentials may not contain line breaks".into());
        }
        let mut cfg = HttpConfig {
            authorization: auths.pop(),
            ..HttpConfig::default()
        };
        if let Some(t) = f.tls_config {
            if t.insecure_skip_verify == Some(true) {
                return Err(
                    "tls_config: insecure_skip_verify is not supported; give ca_file with the \
                     certificate (or its CA) instead"
                        .into(),
                );
            }
            if t.min_version.is_some() {
                return Err(
                    "tls_config: min_version is not supported (TLS 1.2 and 1.3 are)".into(),
                );
            }
            cfg.ca_file = t
                .ca_file
                .map(|p| if p.is_absolute() { p } else { dir.join(p) });
            cfg.server_name = t.server_name;
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<HttpConfig, String> {
        HttpConfig::parse(s, Path::new("/nowhere"))
    }

    #[test]
    fn basic_auth_becomes_one_header() {
        let c = parse("basic_auth: {username: prom, password: s3cret}\n").expect("parses");
        // base64("prom:s3cret")
        assert_eq!(c.authorization.as_deref(), Some("Basic cHJvbTpzM2NyZXQ="));
    }

    #[test]
    fn a_token_file_is_read_relative_to_the_config() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("token"), "abc\n").expect("write");
        let c = HttpConfig::parse("authorization: {credentials_file: token}\n", dir.path())
            .expect("parses");
        assert_eq!(c.authorization.as_deref(), Some("Bearer abc"));
        let c = HttpConfig::parse("bearer_token_file: token\n", dir.path()).expect("parses");
        assert_eq!(c.authorization.as_deref(), Some("Bearer abc"));
    }

    #[test]
    fn what_gpumon_cannot_honour_is_refused_by_name() {
        for (text, word) in [
            ("proxy_url: http://p:3128\n", "proxy_url"),
            (
                "tls_config: {insecure_skip_verify: true}\n",
                "insecure_skip_verify",
            ),
            ("tls_config: {cert_file: c.pem}\n", "cert_file"),
            ("enable_http2: true\n", "enable_http2"),
            (
                "basic_auth: {username: a, password: b}\nbearer_token: t\n",
                "at most one",
            ),
            (
                "authorization: {credentials_file: missing}\n",
                "cannot read",
            ),
        ] {
            let e = parse(text).expect_err(text);
            assert!(e.contains(word), "{text}: {e}");
        }
    }

    #[test]
    fn the_ca_file_is_resolved_against_the_config_directory() {
        let c = HttpConfig::parse(
            "tls_config: {ca_file: ca.pem, server_name: prom.lan}\n",
            Path::new("/etc/gpumon"),
        )
        .expect("parses");
        assert_eq!(c.ca_file, Some(PathBuf::from("/etc/gpumon/ca.pem")));
        assert_eq!(c.server_name.as_deref(), Some("prom.lan"));
    }
}
