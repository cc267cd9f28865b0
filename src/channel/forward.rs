//! The way from connections to the one bounded queue towards the app.
//!
//! Periodic data (samples, frag, alloc batches) never waits: when the queue is
//! full the newest frame per (pid, device, type) is parked and older ones are
//! dropped and counted, so a flooding companion costs only its own data.
//! Everything else (hello, epochs, events, disconnects) waits a bounded time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::sync::mpsc::Sender;
use tokio::sync::mpsc::error::TrySendError;

use crate::model::frame::Frame;

use crate::model::frame::CompanionFrame;

type Key = (u32, u32, &'static str);

/// Sends into the loop's own queue, whose event type `E` wraps frames (`From<Frame>`).
pub(crate) struct Forwarder<E> {
    tx: Sender<E>,
    parked: Arc<Mutex<BTreeMap<Key, Frame>>>,
    wake: Arc<Notify>,
    pub(crate) dropped: Arc<AtomicU64>,
    important_wait: Duration,
}

impl<E> Clone for Forwarder<E> {
    fn clone(&self) -> Self {
        Forwarder {
            tx: self.tx.clone(),
            parked: Arc::clone(&self.parked),
            wake: Arc::clone(&self.wake),
            dropped: Arc::clone(&self.dropped),
            important_wait: self.important_wait,
        }
    }
}

impl<E: From<Frame> + Send + 'static> Forwarder<E> {
    /// Spawns the task that delivers parked frames as the queue frees up.
    pub(crate) fn new(tx: Sender<E>, important_wait: Duration) -> Self {
        let f = Forwarder {
            tx,
            parked: Arc::default(),
            wake: Arc::default(),
            dropped: Arc::default(),
            important_wait,
        };
        let flusher = f.clone();
        tokio::spawn(async move { flusher.flush_loop().await });
        f
    }

    /// Send a frame; returns how many frames were dropped doing so (0 or 1).
    pub(crate) async fn send(&self, cf: CompanionFrame) -> u64 {
        let key = coalesce_key(&cf);
        if let Some(m) = matches!(cf.msg, crate::wire::Message::Disconnected(_)).then_some(cf.pid) {
            // A parked sample delivered after the disconnect would resurrect the process.
            self.lock().retain(|k, _| k.0 != m);
        }
        let frame = Frame::Companion(cf);
        match key {
            Some(key) => match self.tx.try_reserve() {
                Ok(permit) => {
                    permit.send(E::from(frame));
                    0
                }
                Err(TrySendError::Closed(())) => 0,
                Err(TrySendError::Full(())) => {
                    let replaced = self.lock().insert(key, frame).is_some();
                    self.wake.notify_one();
                    if replaced {
                        self.dropped.fetch_add(1, Ordering::Relaxed);
                        1
                    } else {
                        0
                    }
                }
            },
            None => {
                match tokio::time::timeout(self.important_wait, self.tx.send(frame.into())).await {
                    Ok(_) => 0,
                    Err(_) => {
                        self.dropped.fetch_add(1, Ordering::Relaxed);
                        1
                    }
                }
            }
        }
    }

    /// Status lines take the same bounded wait as important frames.
    pub(crate) async fn status(&self, frame: Frame) {
        if tokio::time::timeout(self.important_wait, self.tx.send(frame.into()))
            .await
            .is_err()
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, Frame>> {
        // A poisoned map only means a panic elsewhere mid-insert; the data is still usable.
        self.parked.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn flush_loop(&self) {
        loop {
            self.wake.notified().await;
            loop {
                let Ok(permit) = self.tx.reserve().await else {
                    return;
                };
                let next = self.lock().pop_first();
                match next {
                    Some((_, frame)) => permit.send(E::from(frame)),
                    None => break,
                }
            }
        }
    }
}

/// Periodic messages are coalesced per (pid, device, type); the rest wait (`wire::Class`).
fn coalesce_key(cf: &CompanionFrame) -> Option<Key> {
    (cf.msg.rule().class == crate::wire::Class::Periodic)
        .then(|| (cf.pid, cf.msg.dev().unwrap_or(0), cf.msg.type_name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Disconnected, Message, Sample};

    fn sample(pid: u32, dev: u32, alloc: u64) -> CompanionFrame {
        CompanionFrame {
            t: 1,
            pid,
            msg: Message::Sample(Sample {
                dev,
                allocated: Some(alloc),
                ..Sample::default()
            }),
        }
    }

    fn allocated(f: &Frame) -> Option<(u32, u64)> {
        match f {
            Frame::Companion(CompanionFrame {
                pid,
                msg: Message::Sample(s),
                ..
            }) => Some((*pid, s.allocated?)),
            _ => None,
        }
    }

    #[tokio::test]
    async fn full_queue_keeps_newest_sample_per_key_and_counts() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let f = Forwarder::new(tx, Duration::from_millis(50));
        assert_eq!(f.send(sample(1, 0, 10)).await, 0);
        assert_eq!(
            f.send(sample(1, 0, 11)).await,
            0,
            "parked, nothing lost yet"
        );
        assert_eq!(
            f.send(sample(1, 0, 12)).await,
            1,
            "older parked one dropped"
        );
        assert_eq!(
            f.send(sample(2, 0, 20)).await,
            0,
            "other process unaffected"
        );
        let mut got = Vec::new();
        while got.len() < 3 {
            let fr = tokio::time::timeout(Duration::from_secs(2), rx.recv())
                .await
                .expect("frames arrive")
                .expect("open");
            got.extend(allocated(&fr));
        }
        assert_eq!(got, vec![(1, 10), (1, 12), (2, 20)]);
        assert_eq!(f.dropped.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn disconnect_discards_parked_samples_of_that_process() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let f = Forwarder::new(tx, Duration::from_secs(2));
        f.send(sample(1, 0, 10)).await;
        f.send(sample(1, 0, 11)).await;
        let first = rx.recv().await.expect("open");
        assert_eq!(allocated(&first), Some((1, 10)));
        // Either the parked sample or nothing may have been flushed meanwhile;
        // what matters is that nothing of pid 1 follows the disconnect.
        let bye = CompanionFrame {
            t: 2,
            pid: 1,
            msg: Message::Disconnected(Disconnected {
                reason: "gone".into(),
            }),
        };
        let sender = f.clone();
        let h = tokio::spawn(async move { sender.send(bye).await });
        let mut seen_disconnect = false;
        while let Ok(Some(fr)) = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await {
            if seen_disconnect {
                panic!("frame after disconnect: {fr:?}");
            }
            if let Frame::Companion(CompanionFrame {
                msg: Message::Disconnected(_),
                ..
            }) = fr
            {
                seen_disconnect = true;
            }
        }
        assert!(seen_disconnect);
        h.await.expect("sender task");
    }
}
