//! The importer's in-process sink ([`crate::Sink::Deliver`]): each sample
//! the importer delivers — in stream order, after its checks, loss
//! accounting and end-of-stream handling — goes into a queue bounded in
//! bytes, which the caller drains on a thread of its own (`zcio record
//! zenoh:KEY` writes them into an MCAP file).
//!
//! Back-pressure is that of the other sinks: when the queue is full, the
//! Zenoh thread that received the sample waits for room (in slices, so a
//! stop or the end of the import releases it), which holds the link and,
//! under `CongestionControl::Block` (block-policy rings), the remote
//! publisher. Memory stays below the bound plus one sample (a sample
//! larger than the bound is let in alone).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use zcio::array::ArrayHeader;
use zenoh::sample::Sample;

use crate::config::STOP_CHECK;
use crate::error::{local, BridgeError};

/// One delivered sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The sample's key expression (a concrete key, never a wildcard).
    pub key: String,
    /// What a ring sink's block would hold: the `send_array` header (if
    /// [`Self::array`]) then the payload.
    pub data: Vec<u8>,
    /// Whether `data` starts with a `send_array` header (`zcio::array`).
    pub array: bool,
    /// The ring block tag the exporter read (0 for channel messages and
    /// plain Zenoh publishers).
    pub tag: u32,
    /// When the importer received it: ns since the Unix epoch
    /// (CLOCK_REALTIME).
    pub received_ns: u64,
    /// The sample's Zenoh timestamp (ns since the Unix epoch), when the
    /// publishing session (or a router on the way) stamps samples.
    pub timestamp_ns: Option<u64>,
}

/// What [`Deliveries::recv_timeout`] returns.
#[derive(Debug)]
pub enum Next {
    /// The next sample.
    Sample(Delivery),
    /// Nothing within the timeout.
    TimedOut,
    /// The import closed the sink and every sample before was taken:
    /// `None` after the exporter's end of stream, else the code a ring sink
    /// would be closed with (`CODE_STOPPED`, `CODE_EXPORTER_LOST`, …).
    Closed(Option<u32>),
}

struct Inner {
    items: VecDeque<Delivery>,
    bytes: usize,
    /// Set once the importer closed the sink.
    closed: Option<Option<u32>>,
}

struct Queue {
    inner: Mutex<Inner>,
    /// Signalled when a sample is taken or the receiver goes.
    room: Condvar,
    /// Signalled when a sample is added or the sink closed.
    ready: Condvar,
    max_bytes: usize,
    /// The receiver was dropped: nobody takes samples any more.
    gone: AtomicBool,
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The importer's end of a delivery queue (goes into
/// [`crate::Sink::Deliver`]).
#[derive(Clone)]
pub struct DeliverySender(Arc<Queue>);

impl std::fmt::Debug for DeliverySender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliverySender")
            .field("max_bytes", &self.0.max_bytes)
            .finish_non_exhaustive()
    }
}

/// The caller's end of a delivery queue.
pub struct Deliveries(Arc<Queue>);

/// A queue of at most `max_bytes` bytes of sample data (plus one sample:
/// a larger one is let in when the queue is empty).
pub fn deliveries(max_bytes: usize) -> (DeliverySender, Deliveries) {
    let q = Arc::new(Queue {
        inner: Mutex::new(Inner {
            items: VecDeque::new(),
            bytes: 0,
            closed: None,
        }),
        room: Condvar::new(),
        ready: Condvar::new(),
        max_bytes,
        gone: AtomicBool::new(false),
    });
    (DeliverySender(q.clone()), Deliveries(q))
}

/// Nanoseconds since the Unix epoch of `t` (0 before it, saturated).
fn ns(t: Duration) -> u64 {
    u64::try_from(t.as_nanos()).unwrap_or(u64::MAX)
}

impl DeliverySender {
    /// Queue one sample (`header` then the payload), waiting for room;
    /// `Ok(false)` if `halted()` turned true first (the sample is dropped:
    /// the import is ending). Fails once the receiver is gone.
    pub(crate) fn push(
        &self,
        sample: &Sample,
        header: Option<&ArrayHeader>,
        tag: u32,
        halted: impl Fn() -> bool,
    ) -> Result<bool, BridgeError> {
        let received_ns = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, ns);
        let payload = sample.payload();
        let hdr = header.map(ArrayHeader::to_bytes);
        let mut data = Vec::with_capacity(hdr.as_ref().map_or(0, Vec::len) + payload.len());
        if let Some(h) = &hdr {
            data.extend_from_slice(h);
        }
        for s in payload.slices() {
            data.extend_from_slice(s);
        }
        let d = Delivery {
            key: sample.key_expr().as_str().to_owned(),
            data,
            array: hdr.is_some(),
            tag,
            received_ns,
            timestamp_ns: sample.timestamp().map(|t| ns(t.get_time().to_duration())),
        };
        self.put(d, halted)
    }

    fn put(&self, d: Delivery, halted: impl Fn() -> bool) -> Result<bool, BridgeError> {
        let q = &*self.0;
        let len = d.data.len();
        let mut g = lock(&q.inner);
        loop {
            // SYNC: stored by `Deliveries::drop` (a flag; it is read under
            // the lock the receiver's drop notifies after).
            if q.gone.load(Ordering::Relaxed) {
                return Err(local("delivery queue", "its reader stopped taking samples"));
            }
            if g.items.is_empty() || g.bytes + len <= q.max_bytes {
                break;
            }
            if halted() {
                return Ok(false);
            }
            g = match q.room.wait_timeout(g, STOP_CHECK) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        g.bytes += len;
        g.items.push_back(d);
        drop(g);
        q.ready.notify_one();
        Ok(true)
    }

    /// The import ended: `None` cleanly (end of stream), else with a code.
    pub(crate) fn close(&self, code: Option<u32>) {
        let q = &*self.0;
        let mut g = lock(&q.inner);
        if g.closed.is_none() {
            g.closed = Some(code);
        }
        drop(g);
        q.ready.notify_all();
    }
}

impl Deliveries {
    /// The next sample, waiting at most `timeout`; once the sink is closed
    /// and drained, [`Next::Closed`] (every time it is asked).
    pub fn recv_timeout(&self, timeout: Duration) -> Next {
        let q = &*self.0;
        let deadline = Instant::now() + timeout;
        let mut g = lock(&q.inner);
        loop {
            if let Some(d) = g.items.pop_front() {
                g.bytes -= d.data.len();
                drop(g);
                q.room.notify_one();
                return Next::Sample(d);
            }
            if let Some(code) = g.closed {
                return Next::Closed(code);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Next::TimedOut;
            }
            g = match q.ready.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

impl Drop for Deliveries {
    /// Nobody takes samples any more: the importer fails on its next one
    /// instead of waiting for room forever.
    fn drop(&mut self) {
        let q = &*self.0;
        // SYNC: read by `DeliverySender::put` under the queue's lock, which
        // is taken here before the notification so no waiter misses it.
        q.gone.store(true, Ordering::Relaxed);
        let g = lock(&q.inner);
        drop(g);
        q.room.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(n: usize) -> Delivery {
        Delivery {
            key: "k".into(),
            data: vec![7; n],
            array: false,
            tag: 0,
            received_ns: 1,
            timestamp_ns: None,
        }
    }

    #[test]
    fn bounded_in_bytes_and_drained_before_closed() {
        let (tx, rx) = deliveries(10);
        assert!(tx.put(d(6), || false).unwrap());
        // Full: a halt drops the next one instead of waiting.
        assert!(!tx.put(d(6), || true).unwrap());
        // A sample larger than the bound goes in alone.
        let big = std::thread::spawn({
            let tx = tx.clone();
            move || tx.put(d(50), || false).unwrap()
        });
        assert!(
            matches!(rx.recv_timeout(Duration::from_secs(60)), Next::Sample(s) if s.data.len() == 6)
        );
        assert!(big.join().unwrap());
        tx.close(Some(5));
        assert!(matches!(rx.recv_timeout(Duration::ZERO), Next::Sample(s) if s.data.len() == 50));
        assert!(matches!(
            rx.recv_timeout(Duration::ZERO),
            Next::Closed(Some(5))
        ));
        assert!(matches!(
            rx.recv_timeout(Duration::ZERO),
            Next::Closed(Some(5))
        ));
    }

    #[test]
    fn times_out_when_empty_and_fails_once_the_reader_is_gone() {
        let (tx, rx) = deliveries(10);
        assert!(matches!(
            rx.recv_timeout(Duration::from_millis(1)),
            Next::TimedOut
        ));
        assert!(tx.put(d(8), || false).unwrap());
        // A waiting sender is released by the reader's drop.
        let waiting = std::thread::spawn({
            let tx = tx.clone();
            move || tx.put(d(8), || false)
        });
        drop(rx);
        assert!(waiting.join().unwrap().is_err());
        assert!(tx.put(d(1), || false).is_err());
    }
}
