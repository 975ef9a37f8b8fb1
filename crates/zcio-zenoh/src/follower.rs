//! The importer's state machine, driven from Zenoh's own callbacks: each
//! sample is checked and written into the local sink on the Zenoh thread
//! that received it, with no queue and no hop to an async task in between
//! (one wake-up less per sample: the local reader's).
//!
//! Back-pressure is the sink's: a full lossless ring (or a channel whose
//! reader is slow) holds the Zenoh receive thread, and so the link and,
//! under `CongestionControl::Block`, the remote publisher. Every such wait
//! is cut into slices of `STOP_CHECK` so that a stop, the end of the
//! stream or a lost exporter releases it.
//!
//! The importer task only waits: for the finish a callback records, for the
//! loss timer (the exporter's liveliness token gone and no samples for the
//! grace period) and for its stop.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use zcio::array::ArrayHeader;
use zcio::ring::{Producer, Wait, WriteError};
use zcio::{Channel, Msg, Pool};
use zenoh::sample::{Sample, SampleKind};

use crate::config::STOP_CHECK;
use crate::delivery::DeliverySender;
use crate::error::{local, BridgeError};
use crate::liveness::{parse_token, Token};
use crate::stats::Counters;
use crate::track::{End, Step, Tracker};

/// The local end samples go into.
pub(crate) enum Local {
    Ring(Box<Producer>),
    Chan { ch: Channel, pool: Pool },
    Deliver(DeliverySender),
}

impl Local {
    /// Write one sample: `header` (a `send_array` header) then the payload.
    /// A halt while waiting for room drops the sample (the sink is about to
    /// be closed, with an error if the stream was not complete).
    fn deliver(
        &mut self,
        sample: &Sample,
        header: Option<&ArrayHeader>,
        tag: u32,
        counters: &Counters,
        halt: &AtomicBool,
    ) -> Result<(), BridgeError> {
        let payload = sample.payload();
        let hdr = header.map(ArrayHeader::to_bytes);
        let hl = hdr.as_ref().map_or(0, Vec::len);
        let total = hl + payload.len();
        // SYNC: `Follower::halt` stores it (Relaxed: a flag, no data).
        let halted = || halt.load(Ordering::Relaxed);
        match self {
            Self::Deliver(tx) => {
                if !tx.push(sample, header, tag, halted)? {
                    return Ok(());
                }
            }
            Self::Ring(p) => {
                let mut r = loop {
                    match p.reserve(total, Wait::Until(Instant::now() + STOP_CHECK)) {
                        Ok(r) => break r,
                        Err(WriteError::TimedOut) if !halted() => {}
                        Err(WriteError::TimedOut) => return Ok(()),
                        Err(WriteError::TooLarge { .. }) => {
                            counters.oversize(1);
                            p.record_lost(1, total as u64);
                            return Ok(());
                        }
                        // A dropping ring dropped it (and counted it).
                        Err(WriteError::Dropped) => return Ok(()),
                        Err(e) => return Err(local("ring", e)),
                    }
                };
                if let Some(h) = &hdr {
                    r.put(h);
                }
                for s in payload.slices() {
                    r.put(s);
                }
                r.commit(tag).map_err(|e| local("ring", e))?;
            }
            Self::Chan { ch, pool } => {
                if total == 0 {
                    // A channel carries no empty messages.
                    counters.ignored(1);
                    return Ok(());
                }
                let mut buf = pool.alloc(total).map_err(|e| local("pool", e))?;
                let dst = buf.as_mut_slice();
                let mut at = 0;
                if let Some(h) = &hdr {
                    dst[..hl].copy_from_slice(h);
                    at = hl;
                }
                for s in payload.slices() {
                    dst[at..at + s.len()].copy_from_slice(s);
                    at += s.len();
                }
                let mut msg = Msg::from(buf.freeze().map_err(|e| local("pool", e))?);
                loop {
                    match ch.send_timeout(msg, STOP_CHECK) {
                        Ok(()) => break,
                        Err(e) if e.is_timeout() && !halted() => msg = e.into_inner(),
                        Err(e) if e.is_timeout() => return Ok(()),
                        Err(e) => return Err(local("channel", e)),
                    }
                }
            }
        }
        counters.sample(total);
        Ok(())
    }

    /// Tell local readers that `blocks` blocks (`bytes` bytes) were lost
    /// upstream (rings count them as drops; channels cannot say it).
    fn lost(&mut self, blocks: u64, bytes: u64) {
        if let Self::Ring(p) = self {
            p.record_lost(blocks, bytes);
        }
    }

    /// Close: cleanly (`None`) or with an error code (rings only: a channel
    /// cannot tell readers why it closed).
    fn close(self, code: Option<u32>) {
        match (self, code) {
            (Self::Ring(p), None) => p.close(),
            (Self::Ring(p), Some(c)) => p.close_with_error(c),
            (Self::Chan { ch, .. }, _) => ch.close(),
            (Self::Deliver(tx), code) => tx.close(code),
        }
    }
}

/// How following the stream ended.
pub(crate) enum Finish {
    End,
    Failed(u32),
    Died(u32),
    Lost(u64),
    Stopped,
}

/// What the callbacks share, under one lock.
struct State {
    /// `None` once closed.
    local: Option<Local>,
    /// The followed stream and its position (decides about each sample).
    tracker: Tracker,
    /// Live liveliness tokens (nonces) per stream.
    live: HashMap<u64, HashSet<u64>>,
    /// History mode, until the cache has answered: data samples held back
    /// (delivered after the cached ones), and their payload bytes.
    held: Option<VecDeque<Sample>>,
    held_bytes: usize,
    /// The first exporter seen alive (history mode asks its cache).
    first_exporter: Option<(Token, String)>,
}

/// The importer's state, shared by the two Zenoh callbacks (data samples,
/// liveliness tokens) and the importer task.
pub(crate) struct Follower {
    state: Mutex<State>,
    /// Signalled when held samples are taken (history mode).
    room: Condvar,
    /// Set once the import finishes or is stopped: callbacks drop what
    /// comes, waits for room in the sink give up.
    halted: AtomicBool,
    /// When the followed stream is declared lost (armed while it has no
    /// live token, re-armed by each of its samples).
    lost_at: Mutex<Option<Instant>>,
    /// How it finished (the first finish wins).
    finish: Mutex<Option<Result<Finish, BridgeError>>>,
    /// Wakes the importer task: a finish, a loss timer armed, an exporter
    /// seen.
    pub(crate) wake: tokio::sync::Notify,
    counters: Arc<Counters>,
    max_sample: usize,
    hold_budget: usize,
    grace: Duration,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Follower {
    /// Follow into `local`; `hold`: hold data samples back until
    /// [`Self::catch_up`] (history mode), at most `hold_budget` payload
    /// bytes before the receiving Zenoh thread waits.
    pub(crate) fn new(
        local: Local,
        counters: Arc<Counters>,
        opts: &crate::ImportOptions,
        hold: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                local: Some(local),
                tracker: Tracker::new(),
                live: HashMap::new(),
                held: hold.then(VecDeque::new),
                held_bytes: 0,
                first_exporter: None,
            }),
            room: Condvar::new(),
            halted: AtomicBool::new(false),
            lost_at: Mutex::new(None),
            finish: Mutex::new(None),
            wake: tokio::sync::Notify::new(),
            counters,
            max_sample: opts.max_sample,
            hold_budget: opts.queue_bytes,
            grace: opts.grace,
        })
    }

    fn is_halted(&self) -> bool {
        // SYNC: stored by `Self::halt` (Relaxed: a flag; what it guards is
        // under the state lock).
        self.halted.load(Ordering::Relaxed)
    }

    /// Stop taking samples and release every wait for room.
    fn halt(&self) {
        // SYNC: read by `is_halted` and `Local::deliver`. Callers may hold
        // the state lock, so this does not take it: a callback that checked
        // the flag just before it was set waits on `room` one slice at most.
        self.halted.store(true, Ordering::Relaxed);
        self.room.notify_all();
    }

    /// Record how it finished (unless it already had) and wake the task.
    fn finish_with(&self, f: Result<Finish, BridgeError>) {
        self.halt();
        let mut slot = lock(&self.finish);
        if slot.is_none() {
            *slot = Some(f);
        }
        drop(slot);
        self.wake.notify_one();
    }

    /// Whether it has finished (or was stopped).
    pub(crate) fn finished(&self) -> bool {
        lock(&self.finish).is_some()
    }

    /// Finish with an error of the import itself.
    pub(crate) fn fail(&self, e: BridgeError) {
        self.finish_with(Err(e));
    }

    /// How it finished, once it has.
    pub(crate) fn take_finish(&self) -> Option<Result<Finish, BridgeError>> {
        lock(&self.finish).take()
    }

    /// When the followed stream is declared lost, if armed.
    pub(crate) fn lost_deadline(&self) -> Option<Instant> {
        *lock(&self.lost_at)
    }

    /// The loss timer fired: declare the stream lost unless a sample or a
    /// token disarmed or re-armed it meanwhile.
    pub(crate) fn check_lost(&self) {
        let due = lock(&self.lost_at).is_some_and(|t| t <= Instant::now());
        if due {
            let st = lock(&self.state);
            let stream = st.tracker.stream().unwrap_or(0);
            drop(st);
            self.finish_with(Ok(Finish::Lost(stream)));
        }
    }

    /// Stopped on request (before the exporter's end of stream, if that
    /// had not finished it already).
    pub(crate) fn stop(&self) {
        self.finish_with(Ok(Finish::Stopped));
    }

    /// The first exporter seen alive (history mode).
    pub(crate) fn first_exporter(&self) -> Option<(Token, String)> {
        lock(&self.state).first_exporter.clone()
    }

    /// Close the sink (once every callback is undeclared).
    pub(crate) fn close(&self, code: Option<u32>) {
        if let Some(l) = lock(&self.state).local.take() {
            l.close(code);
        }
    }

    /// Arm (`now + grace`) or disarm the loss timer; wakes the task when
    /// it goes from disarmed to armed.
    fn arm(&self, armed: bool) {
        let mut at = lock(&self.lost_at);
        let was = at.is_some();
        *at = armed.then(|| Instant::now() + self.grace);
        drop(at);
        if armed && !was {
            self.wake.notify_one();
        }
    }

    /// A liveliness sample of an exporter token.
    pub(crate) fn on_token(&self, s: &Sample) {
        let Some((token, key)) = parse_token(s.key_expr().as_str()) else {
            return;
        };
        let alive = s.kind() == SampleKind::Put;
        let mut st = lock(&self.state);
        let set = st.live.entry(token.stream).or_default();
        if alive {
            set.insert(token.nonce);
        } else {
            set.remove(&token.nonce);
        }
        let none_live = set.is_empty();
        self.counters
            .peers(st.live.values().map(|s| s.len() as u64).sum());
        if st.tracker.stream() == Some(token.stream) {
            self.arm(none_live);
        }
        if alive && st.first_exporter.is_none() {
            st.first_exporter = Some((token, key.to_string()));
            drop(st);
            self.wake.notify_one();
        }
    }

    /// A data or control sample.
    pub(crate) fn on_sample(&self, s: Sample) {
        if self.is_halted() {
            return;
        }
        let len = s.payload().len();
        if len > self.max_sample {
            self.counters.oversize(1);
            return;
        }
        let mut st = lock(&self.state);
        while st
            .held
            .as_ref()
            .is_some_and(|h| !h.is_empty() && st.held_bytes + len > self.hold_budget)
            && !self.is_halted()
        {
            st = match self.room.wait_timeout(st, STOP_CHECK) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        if self.is_halted() {
            return;
        }
        if let Some(h) = st.held.as_mut() {
            h.push_back(s);
            st.held_bytes += len;
            return;
        }
        self.handle(&mut st, &s);
    }

    /// History mode: deliver the cache's samples (oldest first), then the
    /// ones held back meanwhile; from then on samples go straight through.
    pub(crate) fn catch_up(&self, cached: Vec<Sample>) {
        let mut st = lock(&self.state);
        for s in &cached {
            if self.is_halted() {
                break;
            }
            if s.payload().len() > self.max_sample {
                self.counters.oversize(1);
                continue;
            }
            self.handle(&mut st, s);
        }
        for s in st.held.take().unwrap_or_default() {
            if self.is_halted() {
                break;
            }
            self.handle(&mut st, &s);
        }
        st.held_bytes = 0;
        drop(st);
        self.room.notify_all();
    }

    /// Check one sample (the tracker decides) and carry the decision out.
    fn handle(&self, st: &mut State, sample: &Sample) {
        if let Err(e) = self.handle_inner(st, sample) {
            self.finish_with(Err(e));
        }
    }

    fn handle_inner(&self, st: &mut State, sample: &Sample) -> Result<(), BridgeError> {
        let c = &*self.counters;
        let State {
            local,
            tracker,
            live,
            ..
        } = st;
        let Some(local) = local.as_mut() else {
            return Ok(());
        };
        // A private copy of the attachment; the tracker checks it.
        let att = sample.attachment().map(|a| a.to_bytes().into_owned());
        let is_put = sample.kind() == SampleKind::Put;
        let step = tracker.step(is_put, att.as_deref(), sample.payload().len());
        if let Some(stream) = step.activity() {
            // Activity of the followed stream: (re)arm the loss timer only
            // while it has no live token.
            self.arm(live.get(&stream).is_none_or(HashSet::is_empty));
        }
        if let Some(gap) = step.gap() {
            c.gaps(1);
            c.lost(gap.positions);
            local.lost(gap.blocks, gap.bytes);
        }
        match step {
            Step::Plain => local.deliver(sample, None, 0, c, &self.halted)?,
            Step::Deliver { array, tag, .. } => {
                local.deliver(sample, array.as_ref(), tag, c, &self.halted)?;
            }
            Step::Duplicate { .. } => c.duplicates(1),
            Step::Finish { end, .. } => self.finish_with(Ok(match end {
                End::Clean => Finish::End,
                End::Failed(code) => Finish::Failed(code),
                End::Died(pid) => Finish::Died(pid),
            })),
            Step::Ignored(_) => c.ignored(1),
            Step::Malformed(_) => c.malformed(1),
        }
        Ok(())
    }
}
