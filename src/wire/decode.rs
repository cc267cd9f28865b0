//! The decoder: one line of a companion's byte stream to a [`Message`], never trusting
//! its input: a hard line limit ([`LineSplitter`] never holds more), version check,
//! unknown fields ignored and unknown types reported for counting.

use super::messages::{HistBucket, Message};
use super::protocol::{LOCAL_TYPES, MAX_BUCKET, MAX_MESSAGE_LINE, PEER_TYPES, VERSION};

/// Why a line was refused. Every variant is counted; none is fatal on its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reject {
    #[error("line of {0} bytes exceeds the {MAX_MESSAGE_LINE}-byte limit")]
    Oversize(usize),
    #[error("line is not UTF-8")]
    NotUtf8,
    #[error("not JSON: {0}")]
    Json(String),
    #[error("not a JSON object")]
    NotObject,
    #[error("no \"type\" field")]
    NoType,
    #[error("protocol version {0}; this gpumon speaks v{VERSION}")]
    Version(u64),
    #[error("invalid {kind} message: {err}")]
    Invalid { kind: String, err: String },
    #[error("{0:?} is gpumon-internal and not accepted from a peer")]
    Local(String),
}

/// A decoded line: a message, or a type this gpumon does not know (skipped, counted).
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    Msg(Box<Message>),
    Unknown(String),
}

/// Decode one line (without or with its trailing newline).
pub fn decode_line(line: &[u8]) -> Result<Decoded, Reject> {
    if line.len() > MAX_MESSAGE_LINE {
        return Err(Reject::Oversize(line.len()));
    }
    let text = std::str::from_utf8(line).map_err(|_| Reject::NotUtf8)?;
    let value: serde_json::Value =
        serde_json::from_str(text.trim_end()).map_err(|e| Reject::Json(e.to_string()))?;
    let obj = value.as_object().ok_or(Reject::NotObject)?;
    match obj.get("v") {
        None | Some(serde_json::Value::Null) => {}
        Some(v) => match v.as_u64() {
            Some(n) if n == u64::from(VERSION) => {}
            Some(n) => return Err(Reject::Version(n)),
            None => {
                return Err(Reject::Invalid {
                    kind: "?".into(),
                    err: "\"v\" is not a version number".into(),
                });
            }
        },
    }
    let kind = obj
        .get("type")
        .and_then(|t| t.as_str())
        .ok_or(Reject::NoType)?
        .to_string();
    if LOCAL_TYPES.contains(&kind.as_str()) {
        return Err(Reject::Local(kind));
    }
    if !PEER_TYPES.contains(&kind.as_str()) {
        return Ok(Decoded::Unknown(kind));
    }
    let msg: Message = serde_json::from_value(value).map_err(|e| Reject::Invalid {
        kind: kind.clone(),
        err: e.to_string(),
    })?;
    validate(&msg).map_err(|err| Reject::Invalid { kind, err })?;
    Ok(Decoded::Msg(Box::new(msg)))
}

fn validate(msg: &Message) -> Result<(), String> {
    let hist_ok = |h: &Option<Vec<HistBucket>>| match h {
        Some(h) if h.iter().any(|b| b.0 > MAX_BUCKET) => {
            Err(format!("histogram bucket above {MAX_BUCKET}"))
        }
        _ => Ok(()),
    };
    match msg {
        Message::Frag(f) => hist_ok(&f.hist),
        Message::Alloc(a) => hist_ok(&a.hist),
        Message::History(h) => h.frag.iter().try_for_each(|f| hist_ok(&f.hist)),
        _ => Ok(()),
    }
}

/// The monitor's side of the handshake, one line with its newline.
pub fn monitor_hello() -> String {
    format!(
        "{{\"v\":{VERSION},\"type\":\"hello\",\"role\":\"monitor\",\"min_v\":{VERSION},\"max_v\":{VERSION},\"client\":\"gpumon {}\"}}\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// One complete line out of a byte stream, or the size of a line that was
/// over the limit (its bytes already thrown away).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Text(Vec<u8>),
    Oversize(usize),
}

/// Splits a byte stream into lines while holding at most `MAX_MESSAGE_LINE` bytes:
/// an oversize line is skipped up to its newline instead of buffered.
#[derive(Debug, Default)]
pub struct LineSplitter {
    buf: Vec<u8>,
    /// Bytes of an oversize line seen so far; `Some` while skipping it.
    skipping: Option<usize>,
}

impl LineSplitter {
    pub fn feed(&mut self, mut data: &[u8], out: &mut Vec<Line>) {
        while !data.is_empty() {
            let nl = data.iter().position(|&b| b == b'\n');
            let (chunk, rest, complete) = match nl {
                Some(i) => (&data[..i], &data[i + 1..], true),
                None => (data, &data[data.len()..], false),
            };
            data = rest;
            if let Some(n) = self.skipping.as_mut() {
                *n += chunk.len() + usize::from(complete);
                if complete {
                    out.push(Line::Oversize(*n));
                    self.skipping = None;
                }
                continue;
            }
            // The newline counts towards the limit.
            if self.buf.len() + chunk.len() + usize::from(complete) > MAX_MESSAGE_LINE {
                let n = self.buf.len() + chunk.len() + usize::from(complete);
                self.buf.clear();
                if complete {
                    out.push(Line::Oversize(n));
                } else {
                    self.skipping = Some(n);
                }
                continue;
            }
            self.buf.extend_from_slice(chunk);
            if complete {
                out.push(Line::Text(std::mem::take(&mut self.buf)));
            }
        }
    }

    /// Bytes of an over-long line skipped so far, while its newline has not come.
    pub fn skipping(&self) -> Option<usize> {
        self.skipping
    }

    /// Bytes currently buffered (for the memory bound test).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_are_classified() {
        assert!(matches!(decode_line(b"{nope"), Err(Reject::Json(_))));
        assert_eq!(decode_line(b"[1,2]"), Err(Reject::NotObject));
        assert_eq!(decode_line(b"{\"v\":1}"), Err(Reject::NoType));
        assert_eq!(
            decode_line(b"{\"v\":2,\"type\":\"sample\"}"),
            Err(Reject::Version(2))
        );
        assert_eq!(decode_line(&[0xff, 0xfe]), Err(Reject::NotUtf8));
        assert_eq!(
            decode_line(b"{\"type\":\"link\"}"),
            Err(Reject::Local("link".into()))
        );
        assert_eq!(
            decode_line(b"{\"v\":1,\"type\":\"telemetry2\"}"),
            Ok(Decoded::Unknown("telemetry2".into()))
        );
        assert!(matches!(
            decode_line(b"{\"v\":1,\"type\":\"frag\",\"hist\":[[64,1,1]]}"),
            Err(Reject::Invalid { .. })
        ));
        assert!(matches!(
            decode_line(b"{\"v\":1,\"type\":\"sample\",\"settings\":3,\"na\":\"x\"}"),
            Ok(Decoded::Msg(_))
        ));
        let big = vec![b' '; MAX_MESSAGE_LINE + 1];
        assert_eq!(
            decode_line(&big),
            Err(Reject::Oversize(MAX_MESSAGE_LINE + 1))
        );
    }

    #[test]
    fn monitor_hello_is_a_valid_line() {
        let line = monitor_hello();
        assert!(line.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(line.trim()).expect("valid JSON");
        assert_eq!(v["min_v"], 1);
        assert_eq!(v["role"], "monitor");
    }

    #[test]
    fn splitter_skips_oversize_lines_without_buffering_them() {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        s.feed(b"ab\nc", &mut out);
        assert_eq!(out, vec![Line::Text(b"ab".to_vec())]);
        out.clear();
        let big = vec![b'x'; MAX_MESSAGE_LINE * 2];
        s.feed(&big, &mut out);
        assert!(s.buffered() <= MAX_MESSAGE_LINE);
        s.feed(b"tail\nok\n", &mut out);
        assert_eq!(
            out,
            vec![
                Line::Oversize(1 + MAX_MESSAGE_LINE * 2 + 5),
                Line::Text(b"ok".to_vec())
            ]
        );
        // Exactly at the limit (newline included) is accepted.
        out.clear();
        let mut exact = vec![b'y'; MAX_MESSAGE_LINE - 1];
        exact.push(b'\n');
        s.feed(&exact, &mut out);
        assert_eq!(out, vec![Line::Text(vec![b'y'; MAX_MESSAGE_LINE - 1])]);
    }
}
