//! What a credential that is not yet known may cost the machine. A bcrypt check is ~50 ms of
//! CPU at cost 10 by design, so a flood of wrong passwords was a flood of CPU: the review
//! measured 100 connections keeping gpumon at 1.87 of 2 cores for as long as they lasted,
//! and a new good credential waiting 3 s behind them. Now:
//!
//! - a credential that verified, or that failed, is answered from `WebConfig::cached`
//!   without bcrypt (a repeated wrong password costs one check in all);
//! - each peer (an IPv4 address, an IPv6 /64) may start `PEER_RATE` checks a second, with
//!   a burst of `PEER_BURST`; beyond, 429 at once, without bcrypt;
//! - one check runs at a time (at most one core), and at most `MAX_WAITING` wait for it;
//!   beyond, 429 at once: a flood from many peers is bounded too, and a real new credential
//!   waits behind at most `MAX_WAITING` checks.
//!
//! This is what the Prometheus exporters' rate limits and nginx's `limit_req` do: the
//! expensive comparison is made rare, not faster.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::web_config::WebConfig;

/// bcrypt checks running at once.
const AUTH_CHECKS: usize = 1;
/// Checks waiting for their turn, at most.
const MAX_WAITING: usize = 8;
/// Checks a peer may start a second, and at once.
const PEER_RATE: f64 = 1.0;
const PEER_BURST: f64 = 5.0;
/// Peers remembered; past it, those with a full bucket (idle) are forgotten.
const MAX_PEERS: usize = 4096;

/// The answer to a credential that needed a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Checked {
    Admitted,
    Refused,
    /// Not checked: the peer is over its rate or too many checks wait (429).
    TooMany,
}

pub(super) struct AuthGate {
    checks: Arc<tokio::sync::Semaphore>,
    waiting: AtomicUsize,
    peers: Mutex<HashMap<[u8; 8], (f64, Instant)>>,
}

impl Default for AuthGate {
    fn default() -> Self {
        AuthGate {
            checks: Arc::new(tokio::sync::Semaphore::new(AUTH_CHECKS)),
            waiting: AtomicUsize::new(0),
            peers: Mutex::default(),
        }
    }
}

/// A peer as rate-limited: an IPv4 address, or an IPv6 address's /64 (one host has them all).
fn peer_key(ip: IpAddr) -> [u8; 8] {
    match ip {
        IpAddr::V4(v4) => {
            let mut k = [0; 8];
            k[..4].copy_from_slice(&v4.octets());
            k[4] = 4;
            k
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => peer_key(IpAddr::V4(v4)),
            None => {
                let mut k = [0; 8];
                k.copy_from_slice(&v6.octets()[..8]);
                k
            }
        },
    }
}

impl AuthGate {
    /// Whether `peer` may start a check now (takes one from its bucket).
    fn peer_may_check(&self, peer: IpAddr, now: Instant) -> bool {
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        let refill = |(level, at): (f64, Instant)| {
            let dt = now.saturating_duration_since(at).as_secs_f64();
            (level + dt * PEER_RATE).min(PEER_BURST)
        };
        let key = peer_key(peer);
        if peers.len() >= MAX_PEERS && !peers.contains_key(&key) {
            peers.retain(|_, b| refill(*b) < PEER_BURST);
            if peers.len() >= MAX_PEERS {
                return false;
            }
        }
        let b = peers.entry(key).or_insert((PEER_BURST, now));
        let level = refill(*b);
        if level >= 1.0 {
            *b = (level - 1.0, now);
            true
        } else {
            *b = (level, now);
            false
        }
    }

    /// Check `authorization` with bcrypt on the blocking pool, within the limits above.
    pub(super) async fn check(
        &self,
        web: Arc<WebConfig>,
        peer: IpAddr,
        authorization: Vec<u8>,
    ) -> Checked {
        if !self.peer_may_check(peer, Instant::now()) {
            return Checked::TooMany;
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= MAX_WAITING {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Checked::TooMany;
        }
        let permit = Arc::clone(&self.checks).acquire_owned().await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        let Ok(permit) = permit else {
            return Checked::Refused;
        };
        let ok = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            web.admits(Some(&authorization))
        })
        .await
        .unwrap_or(false);
        if ok {
            Checked::Admitted
        } else {
            Checked::Refused
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_peer_gets_its_burst_then_its_rate_and_others_are_not_touched() {
        let g = AuthGate::default();
        let t0 = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        assert!((0..5).all(|_| g.peer_may_check(a, t0)));
        assert!(!g.peer_may_check(a, t0), "burst spent");
        assert!(g.peer_may_check(b, t0), "another peer has its own");
        assert!(
            g.peer_may_check(a, t0 + Duration::from_secs(1)),
            "one a second"
        );
        assert!(!g.peer_may_check(a, t0 + Duration::from_secs(1)));
        // One host's IPv6 addresses are one peer.
        let v6a: IpAddr = "2001:db8::1".parse().expect("ip");
        let v6b: IpAddr = "2001:db8::ffff:2".parse().expect("ip");
        assert!((0..5).all(|_| g.peer_may_check(v6a, t0)));
        assert!(!g.peer_may_check(v6b, t0));
    }
}
