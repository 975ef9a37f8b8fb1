//! An endpoint: one end of a [`Channel`] with buffering semantics, an
//! arena for the application's buffers, and the cost model's thresholds.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use super::arena::{Arena, ArenaBuf, ArenaError, Lend, LendRefused};
use super::error::{InputError, OutputError, OutputOwnedError, SetupError};
use super::owned::{Kind, Mapped, OwnedBuf};
use super::wire::{self, Header, HEADER_LEN};
use super::{Policy, Semantics};
use crate::msg::Slice;
use crate::vm;
use crate::{Channel, Msg, Pool, PoolConfig, Uncached, View};

/// Most buffers the move family keeps for reuse (see `SemanticEndpoint::cache_push`).
const CACHE_MAX: usize = 256;

/// How an endpoint is set up.
#[derive(Clone, Debug)]
pub struct SemanticConfig {
    /// Semantics of [`SemanticEndpoint::output`] / [`SemanticEndpoint::output_owned`]
    /// (default: emulated copy).
    pub output: Semantics,
    /// Semantics of [`SemanticEndpoint::input`] / [`SemanticEndpoint::input_owned`]
    /// (default: emulated copy).
    pub input: Semantics,
    /// Bytes of registered memory for the application's buffers.
    pub arena_capacity: usize,
    /// How long [`SemanticEndpoint::new`] waits for the peer's hello.
    pub hello_timeout: Duration,
    /// Thresholds and mechanism choices; `None`: [`Policy::calibrated`]
    /// (this machine's calibrated cost model, `zcio calibrate`, or the
    /// built-in defaults), taken when the endpoint is created.
    pub policy: Option<Policy>,
}

impl Default for SemanticConfig {
    fn default() -> Self {
        Self {
            output: Semantics::EmulatedCopy,
            input: Semantics::EmulatedCopy,
            arena_capacity: 64 << 20,
            hello_timeout: Duration::from_secs(10),
            policy: None,
        }
    }
}

/// How one output travelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Copied into a system buffer.
    Copied,
    /// Lent in place, write-protected until returned (TCOW).
    Protected,
    /// Lent in place, hidden until returned (region hiding).
    Hidden,
    /// Lent in place, no protection (share, weak move).
    Lent,
    /// A sealed single-use region (move).
    Sealed,
}

/// How one input arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Received {
    /// Bytes delivered.
    pub len: usize,
    /// Whole pages swapped in (zero copy).
    pub swapped_pages: usize,
    /// Bytes copied (partial pages, unaligned or untrusted data).
    pub copied: usize,
    /// The sender's semantics.
    pub sender: Option<Semantics>,
}

/// Counters of an endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemanticStats {
    /// Outputs by delivery: copied, protected, hidden, lent, sealed.
    pub out_copied: u64,
    /// See `out_copied`.
    pub out_protected: u64,
    /// See `out_copied`.
    pub out_hidden: u64,
    /// See `out_copied`.
    pub out_lent: u64,
    /// See `out_copied`.
    pub out_sealed: u64,
    /// Outputs that wanted to lend but copied (heap buffer, no spare, ...).
    pub out_fallbacks: u64,
    /// Emulated-copy outputs copied because the application rewrote the
    /// buffer while its previous lend was in flight, more than the cost
    /// model tolerates ([`Policy::rewrite`]); also counted as copied.
    pub out_rewrite_copies: u64,
    /// Pages swapped in by input.
    pub in_swapped_pages: u64,
    /// Bytes copied by input.
    pub in_copied_bytes: u64,
}

#[derive(Default)]
struct Counters {
    out: [AtomicU64; 5],
    out_fallbacks: AtomicU64,
    out_rewrite_copies: AtomicU64,
    in_swapped_pages: AtomicU64,
    in_copied_bytes: AtomicU64,
}

/// One end of a channel with buffering semantics (see the module docs).
pub struct SemanticEndpoint {
    chan: Channel,
    arena: Arena,
    pool: Pool,
    uncached: Uncached,
    cfg: SemanticConfig,
    policy: Policy,
    /// The peer's hello: its input semantics and whether it swaps
    /// protected pages in (trusts us).
    peer_input: Semantics,
    peer_trusts: bool,
    /// A message received but not yet taken (the buffer was too short).
    pending: Mutex<Option<(Header, Msg)>>,
    /// Buffers handed over by the move family, reused once the peer
    /// returned their pages.
    cache: Mutex<Vec<ArenaBuf>>,
    counters: Counters,
}

impl std::fmt::Debug for SemanticEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemanticEndpoint")
            .field("output", &self.cfg.output)
            .field("input", &self.cfg.input)
            .field("peer_input", &self.peer_input)
            .field("peer_trusts", &self.peer_trusts)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SemanticEndpoint {
    /// Wrap a connected channel. Both ends must wrap theirs: each sends a
    /// hello (its input semantics, and whether it trusts the peer — see
    /// [`Channel::trust_peer`]) and waits for the other's.
    pub fn new(chan: Channel, cfg: SemanticConfig) -> Result<SemanticEndpoint, SetupError> {
        let arena = Arena::new(cfg.arena_capacity)?;
        let pool = Pool::new(PoolConfig {
            max_chunks: 64,
            ..PoolConfig::named("zcio-semantics")
        });
        let policy = cfg.policy.clone().unwrap_or_else(Policy::calibrated);
        let mut flags = wire::HELLO;
        if chan.is_peer_trusted() {
            flags |= wire::TRUSTS;
        }
        let hello = Header::new(cfg.input, flags, 0, 0, 0);
        let msg = header_msg(&pool, hello, View::from_slice(&[])).map_err(SetupError::Alloc)?;
        chan.send(msg).map_err(|e| SetupError::Send(e.kind()))?;
        let reply = chan
            .recv_timeout(cfg.hello_timeout)
            .map_err(SetupError::Recv)?;
        let h = parse_hello(&reply, crate::sys::page_size()).ok_or(SetupError::BadHello)?;
        Ok(SemanticEndpoint {
            peer_input: h.sem(),
            peer_trusts: h.flags & wire::TRUSTS != 0,
            chan,
            arena,
            pool,
            uncached: Uncached::new("semantics-move", true),
            cfg,
            policy,
            pending: Mutex::new(None),
            cache: Mutex::new(Vec::new()),
            counters: Counters::default(),
        })
    }

    /// The arena application buffers should live in for zero-copy output
    /// and page-swapping input.
    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    /// The channel underneath.
    pub fn channel(&self) -> &Channel {
        &self.chan
    }

    /// The thresholds and choices in effect.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The peer's input semantics and whether it trusts us (swaps our
    /// protected pages in instead of copying).
    pub fn peer(&self) -> (Semantics, bool) {
        (self.peer_input, self.peer_trusts)
    }

    /// Preferred input layout: buffers from [`Arena::alloc_at`] at the
    /// sender's page offset (whole pages are then swapped in). Returns
    /// `(page_offset, length multiple)` for the next message when one is
    /// waiting (`None` otherwise): allocate `alloc_at(len, page_offset)`.
    pub fn next_layout(&self) -> Result<Option<(usize, usize)>, InputError> {
        let mut pending = lock(&self.pending);
        if pending.is_none() {
            match self.chan.try_recv() {
                Ok(m) => *pending = Some(parse_message(m, crate::sys::page_size())?),
                Err(crate::TryRecvError::WouldBlock) => return Ok(None),
                Err(e) => return Err(InputError::Recv(e.into())),
            }
        }
        Ok(pending
            .as_ref()
            .map(|(h, _)| (h.page_offset as usize, h.len as usize)))
    }

    /// The endpoint's counters.
    pub fn stats(&self) -> SemanticStats {
        let c = &self.counters;
        SemanticStats {
            out_copied: c.out[0].load(Relaxed),
            out_protected: c.out[1].load(Relaxed),
            out_hidden: c.out[2].load(Relaxed),
            out_lent: c.out[3].load(Relaxed),
            out_sealed: c.out[4].load(Relaxed),
            out_fallbacks: c.out_fallbacks.load(Relaxed),
            out_rewrite_copies: c.out_rewrite_copies.load(Relaxed),
            in_swapped_pages: c.in_swapped_pages.load(Relaxed),
            in_copied_bytes: c.in_copied_bytes.load(Relaxed),
        }
    }

    fn count(&self, d: Delivery) -> Delivery {
        let i = match d {
            Delivery::Copied => 0,
            Delivery::Protected => 1,
            Delivery::Hidden => 2,
            Delivery::Lent => 3,
            Delivery::Sealed => 4,
        };
        self.counters.out[i].fetch_add(1, Relaxed);
        d
    }

    // ---- output (application-allocated) ----

    /// Output `data` under the endpoint's output semantics; shaped like
    /// `write`: when this returns, the application may do anything with
    /// `data` (what the peer receives is decided by the semantics).
    pub fn output(&self, data: &[u8]) -> Result<Delivery, OutputError> {
        self.output_with(data, self.cfg.output)
    }

    /// Output `data` under `sem` (this call only).
    pub fn output_with(&self, data: &[u8], sem: Semantics) -> Result<Delivery, OutputError> {
        self.output_view(View::from_slice(data), sem)
    }

    /// Output bytes of unknown provenance under `sem`: memory another
    /// process might write (a buffer handed in through the C or Python
    /// frontends) is never borrowed as a `&[u8]`; the copy path reads it
    /// with volatile loads, and lending needs only its address (only this
    /// process's arena pages are ever lent).
    pub fn output_view(&self, data: View<'_>, sem: Semantics) -> Result<Delivery, OutputError> {
        if data.is_empty() {
            return Err(OutputError::EmptyMessage);
        }
        let mode = match sem {
            Semantics::Copy => None,
            Semantics::EmulatedCopy if data.len() < self.policy.emulated_copy_min => None,
            Semantics::EmulatedShare if data.len() < self.policy.emulated_share_min => None,
            Semantics::EmulatedCopy | Semantics::EmulatedMove | Semantics::Move => {
                Some(Lend::Protect)
            }
            Semantics::Share | Semantics::WeakMove => Some(Lend::Wire),
            Semantics::EmulatedShare | Semantics::EmulatedWeakMove => Some(Lend::Plain),
        };
        let mode = mode.filter(|_| {
            sem != Semantics::EmulatedCopy || {
                let again = self.arena.core.lend_again(
                    data.as_ptr() as usize,
                    data.len(),
                    self.policy.rewrite_tolerance(data.len()),
                    Policy::MAX_HOLD,
                );
                if !again {
                    self.counters.out_rewrite_copies.fetch_add(1, Relaxed);
                }
                again
            }
        });
        if let Some(mode) = mode {
            let core = &self.arena.core;
            let mut lent = core.lend(data.as_ptr() as usize, data.len(), mode);
            if lent.as_ref().err() == Some(&LendRefused::NoSpare) {
                // Take the peer's pending returns (they free spares), once.
                self.chan.reclaim();
                lent = core.lend(data.as_ptr() as usize, data.len(), mode);
            }
            match lent {
                Ok(bufs) => {
                    let flags = if mode == Lend::Protect {
                        wire::PROTECTED
                    } else {
                        0
                    };
                    let page_offset = data.as_ptr() as usize % crate::sys::page_size();
                    self.send_lent(sem, flags, data.len(), page_offset, bufs)?;
                    return Ok(self.count(if mode == Lend::Protect {
                        Delivery::Protected
                    } else {
                        Delivery::Lent
                    }));
                }
                Err(_) => {
                    self.counters.out_fallbacks.fetch_add(1, Relaxed);
                }
            }
        }
        self.send_copy(sem, data)?;
        Ok(self.count(Delivery::Copied))
    }

    fn send_copy(&self, sem: Semantics, data: View<'_>) -> Result<(), OutputError> {
        let ps = crate::sys::page_size();
        let h = Header::new(
            sem,
            wire::INLINE,
            data.len(),
            data.as_ptr() as usize % ps,
            0,
        );
        let msg = header_msg(&self.pool, h, data).map_err(OutputError::Alloc)?;
        self.chan.send(msg).map_err(|e| OutputError::Send(e.kind()))
    }

    fn send_lent(
        &self,
        sem: Semantics,
        flags: u8,
        len: usize,
        page_offset: usize,
        bufs: Vec<crate::Fbuf>,
    ) -> Result<(), OutputError> {
        let h = Header::new(sem, flags, len, page_offset, bufs.len());
        let mut msg =
            header_msg(&self.pool, h, View::from_slice(&[])).map_err(OutputError::Alloc)?;
        for b in bufs {
            let n = b.len();
            let slice = Slice::new(b, 0, n).ok_or(OutputError::EmptyMessage)?;
            msg.append(Msg::from_slices([slice]).map_err(|_| OutputError::EmptyMessage)?)
                .map_err(|e| OutputError::Msg(e.into_parts().0))?;
        }
        self.chan.send(msg).map_err(|e| OutputError::Send(e.kind()))
    }

    // ---- input (application-allocated) ----

    /// Input the next message into `buf` under the endpoint's input
    /// semantics; shaped like `read`, but message-oriented: the whole
    /// message or an error ([`InputError::TooShort`] keeps it for the next
    /// call). Returns how it arrived.
    pub fn input(&self, buf: &mut [u8]) -> Result<Received, InputError> {
        self.input_with(buf, self.cfg.input)
    }

    /// Input under `sem` (this call only).
    pub fn input_with(&self, buf: &mut [u8], sem: Semantics) -> Result<Received, InputError> {
        let (h, msg) = self.take(buf.len())?;
        self.deliver(&h, &msg, buf, sem)
    }

    /// The next message, from `pending` or the channel; refused (and kept)
    /// when longer than `room`.
    fn take(&self, room: usize) -> Result<(Header, Msg), InputError> {
        let mut pending = lock(&self.pending);
        let (h, msg) = match pending.take() {
            Some(p) => p,
            None => {
                let m = self.chan.recv().map_err(InputError::Recv)?;
                parse_message(m, crate::sys::page_size())?
            }
        };
        if h.len as usize > room {
            let needed = h.len as usize;
            *pending = Some((h, msg));
            return Err(InputError::TooShort { needed });
        }
        Ok((h, msg))
    }

    /// Whether pages of a message under `h` may be swapped in for `sem`.
    fn may_swap(&self, h: &Header, msg: &Msg, sem: Semantics) -> bool {
        if h.flags & wire::INLINE != 0 || sem == Semantics::Copy {
            return false;
        }
        if !sem.strong() {
            return true;
        }
        // Strong integrity: the pages must be unchangeable by the sender —
        // sealed (kernel-enforced), or protected by a sender we trust.
        let data = &msg.slices()[1..];
        data.iter().all(|s| s.fbuf().is_secured())
            || (h.flags & wire::PROTECTED != 0 && self.chan.is_peer_trusted())
    }

    fn deliver(
        &self,
        h: &Header,
        msg: &Msg,
        buf: &mut [u8],
        sem: Semantics,
    ) -> Result<Received, InputError> {
        let ps = crate::sys::page_size();
        let len = h.len as usize;
        let mut got = Received {
            len,
            sender: Some(h.sem()),
            ..Received::default()
        };
        let buf = &mut buf[..len];
        if h.flags & wire::INLINE != 0 {
            msg.slices()[0].view().read_at(HEADER_LEN, buf);
            got.copied = len;
            self.counters.in_copied_bytes.fetch_add(len as u64, Relaxed);
            return Ok(got);
        }
        let dst = buf.as_mut_ptr() as usize;
        let swap = self.may_swap(h, msg, sem)
            && len >= self.policy.swap_min
            && self.arena.contains(buf.as_ptr(), len)
            && dst % ps == h.page_offset as usize;
        let core = &self.arena.core;
        let mut pos = 0usize;
        for s in &msg.slices()[1..] {
            let n = s.len();
            let view = s.view();
            let src_off = s.fbuf().region_offset() + s.offset();
            let d = dst + pos;
            let lo = d.next_multiple_of(ps);
            let hi = (d + n) & !(ps - 1);
            let mut swapped = false;
            if swap && hi > lo && (src_off + (lo - d)).is_multiple_of(ps) {
                let (first, pages) = core
                    .slots_of(lo, hi - lo)
                    .ok_or(InputError::Malformed("slice outside the buffer"))?;
                if core
                    .swap_in(first, pages, s.fbuf().region(), src_off + (lo - d))
                    .is_ok()
                {
                    core.hold(first, pages, s.fbuf());
                    view.read_at(0, &mut buf[pos..pos + (lo - d)]);
                    view.read_at(hi - d, &mut buf[pos + (hi - d)..pos + n]);
                    got.swapped_pages += pages as usize;
                    got.copied += n - (hi - lo);
                    swapped = true;
                }
            }
            if !swapped {
                view.read_at(0, &mut buf[pos..pos + n]);
                got.copied += n;
            }
            pos += n;
        }
        self.counters
            .in_swapped_pages
            .fetch_add(got.swapped_pages as u64, Relaxed);
        self.counters
            .in_copied_bytes
            .fetch_add(got.copied as u64, Relaxed);
        Ok(got)
    }

    // ---- system-allocated (the move family) ----

    /// A system-allocated buffer of `len` bytes for the endpoint's output
    /// semantics: a fresh region under move, otherwise arena pages (reused
    /// from buffers handed over earlier once the peer returned them).
    pub fn alloc(&self, len: usize) -> Result<OwnedBuf, OutputError> {
        self.alloc_for(len, 0, self.cfg.output)
    }

    fn alloc_for(
        &self,
        len: usize,
        page_offset: usize,
        sem: Semantics,
    ) -> Result<OwnedBuf, OutputError> {
        if len == 0 {
            return Err(OutputError::EmptyMessage);
        }
        if sem == Semantics::Move {
            let b = self
                .uncached
                .alloc_secured(len)
                .map_err(OutputError::Alloc)?;
            return Ok(OwnedBuf {
                kind: Kind::Fresh(b),
            });
        }
        let ps = crate::sys::page_size();
        let pages = (page_offset % ps + len).div_ceil(ps) as u32;
        {
            let mut cache = lock(&self.cache);
            let core = &self.arena.core;
            if let Some(i) = cache
                .iter()
                .position(|b| b.pages == pages && !core.in_flight(b.first, b.pages))
            {
                let mut b = cache.swap_remove(i);
                // Reinstate access to hidden pages (emulated move).
                core.set_prot(b.first, b.pages, vm::Prot::ReadWrite)
                    .map_err(OutputError::Os)?;
                b.offset = page_offset % ps;
                b.len = len;
                return Ok(OwnedBuf {
                    kind: Kind::Arena(b),
                });
            }
        }
        let b = match self.arena.alloc_at(len, page_offset) {
            Ok(b) => b,
            // Room may sit in cached buffers of other sizes: take in the
            // peer's returns, give every cached buffer it no longer holds
            // back to the arena (where free runs coalesce), and try again.
            Err(ArenaError::WouldBlock { .. }) => {
                self.chan.reclaim();
                self.evict_cached(0);
                self.arena
                    .alloc_at(len, page_offset)
                    .map_err(OutputError::Arena)?
            }
            Err(e) => return Err(OutputError::Arena(e)),
        };
        Ok(OwnedBuf {
            kind: Kind::Arena(b),
        })
    }

    /// Keep `b` for reuse by a later allocation of its size. The cache
    /// holds at most [`CACHE_MAX`] buffers and a quarter of the arena's
    /// pages; past that the oldest buffers the peer no longer holds go
    /// back to the arena.
    fn cache_push(&self, b: ArenaBuf) {
        let pages = {
            let mut cache = lock(&self.cache);
            cache.push(b);
            cache.iter().map(|b| b.pages as usize).sum::<usize>()
        };
        let bound = self.arena.capacity() / crate::sys::page_size() / 4;
        if pages > bound || lock(&self.cache).len() > CACHE_MAX {
            self.evict_cached(bound);
        }
    }

    /// Give cached buffers the peer no longer holds back to the arena,
    /// oldest first, until the cache holds at most `keep_pages` pages (0:
    /// all of them); buffers still lent stay (their pages must come back
    /// first). Returns how many were given back.
    fn evict_cached(&self, keep_pages: usize) -> usize {
        let core = &self.arena.core;
        let evicted: Vec<ArenaBuf> = {
            let mut cache = lock(&self.cache);
            let mut pages: usize = cache.iter().map(|b| b.pages as usize).sum();
            let mut out = Vec::new();
            let mut i = 0;
            while i < cache.len() && (pages > keep_pages || cache.len() > CACHE_MAX) {
                if core.in_flight(cache[i].first, cache[i].pages) {
                    i += 1;
                    continue;
                }
                let b = cache.remove(i);
                pages -= b.pages as usize;
                out.push(b);
            }
            out
        };
        let n = evicted.len();
        for b in evicted {
            // Hidden pages (emulated move) are visible again before they
            // return; the drop hands the slots back to the arena.
            let _ = core.set_prot(b.first, b.pages, vm::Prot::ReadWrite);
            drop(b);
        }
        n
    }

    /// Hand `buf` to the peer under the endpoint's output semantics; the
    /// application no longer owns it. On failure the buffer comes back.
    pub fn output_owned(&self, buf: OwnedBuf) -> Result<Delivery, OutputOwnedError> {
        self.output_owned_with(buf, self.cfg.output)
    }

    /// As [`SemanticEndpoint::output_owned`] under `sem`.
    pub fn output_owned_with(
        &self,
        buf: OwnedBuf,
        sem: Semantics,
    ) -> Result<Delivery, OutputOwnedError> {
        self.hand_over(buf, sem)
            .map_err(|(e, b)| OutputOwnedError::new(e, b))
    }

    fn hand_over(
        &self,
        buf: OwnedBuf,
        sem: Semantics,
    ) -> Result<Delivery, (OutputError, Option<OwnedBuf>)> {
        match buf.kind {
            Kind::Fresh(b) => {
                // Move: seal (the writable mapping is replaced by a
                // read-only one; nobody can change the region again).
                let len = b.len();
                let frozen = match b.freeze() {
                    Ok(f) => f,
                    // The buffer is frozen (immutable) but not sealed: it
                    // cannot be handed back writable.
                    Err(e) => return Err((OutputError::Freeze(e.to_string()), None)),
                };
                let h = Header::new(sem, wire::SEALED | wire::PROTECTED, len, 0, 1);
                let res = header_msg(&self.pool, h, View::from_slice(&[]))
                    .map_err(OutputError::Alloc)
                    .and_then(|mut msg| {
                        let s = Slice::new(frozen, 0, len).ok_or(OutputError::EmptyMessage)?;
                        msg.append(Msg::from_slices([s]).map_err(|_| OutputError::EmptyMessage)?)
                            .map_err(|e| OutputError::Msg(e.into_parts().0))?;
                        self.chan.send(msg).map_err(|e| OutputError::Send(e.kind()))
                    });
                match res {
                    Ok(()) => Ok(self.count(Delivery::Sealed)),
                    // Sealed already: it cannot be handed back writable.
                    Err(e) => Err((e, None)),
                }
            }
            Kind::Arena(b) => {
                let mode = match sem {
                    Semantics::EmulatedMove
                    | Semantics::Move
                    | Semantics::EmulatedCopy
                    | Semantics::Copy => Lend::Hide,
                    Semantics::WeakMove | Semantics::Share => Lend::Wire,
                    Semantics::EmulatedWeakMove | Semantics::EmulatedShare => Lend::Plain,
                };
                let lent = self.arena.core.lend(b.as_ptr() as usize, b.len(), mode);
                let bufs = match lent {
                    Ok(bufs) => bufs,
                    Err(_) => {
                        // Not lendable (e.g. pages swapped in from a peer):
                        // copy; the buffer is still consumed.
                        self.counters.out_fallbacks.fetch_add(1, Relaxed);
                        let r = self.send_copy(sem, View::from_slice(b.as_slice()));
                        return match r {
                            Ok(()) => {
                                self.free(OwnedBuf {
                                    kind: Kind::Arena(b),
                                });
                                Ok(self.count(Delivery::Copied))
                            }
                            Err(e) => Err((
                                e,
                                Some(OwnedBuf {
                                    kind: Kind::Arena(b),
                                }),
                            )),
                        };
                    }
                };
                let flags = if mode == Lend::Hide {
                    wire::PROTECTED
                } else {
                    0
                };
                match self.send_lent(sem, flags, b.len(), b.page_offset(), bufs) {
                    Ok(()) => {
                        self.cache_push(b);
                        Ok(self.count(if mode == Lend::Hide {
                            Delivery::Hidden
                        } else {
                            Delivery::Lent
                        }))
                    }
                    Err(e) => {
                        // The lent handles are gone with the message;
                        // reveal again before giving the buffer back.
                        let _ = self
                            .arena
                            .core
                            .set_prot(b.first, b.pages, vm::Prot::ReadWrite);
                        Err((
                            e,
                            Some(OwnedBuf {
                                kind: Kind::Arena(b),
                            }),
                        ))
                    }
                }
            }
            Kind::Mapped(m) => {
                // A received region: copy it out under move semantics.
                let src = OwnedBuf {
                    kind: Kind::Mapped(m),
                };
                match self.alloc_for(src.len(), 0, Semantics::Move) {
                    Ok(mut fresh) => {
                        zcio_sys::copy::copy(fresh.as_mut_slice(), src.as_slice());
                        self.hand_over(fresh, Semantics::Move)
                    }
                    Err(e) => Err((e, Some(src))),
                }
            }
        }
    }

    /// Receive the next message into a system-allocated buffer under the
    /// endpoint's input semantics.
    pub fn input_owned(&self) -> Result<OwnedBuf, InputError> {
        self.input_owned_with(self.cfg.input)
    }

    /// As [`SemanticEndpoint::input_owned`] under `sem`.
    pub fn input_owned_with(&self, sem: Semantics) -> Result<OwnedBuf, InputError> {
        let (h, msg) = self.take(usize::MAX)?;
        let len = h.len as usize;
        let data = &msg.slices()[1..];
        if h.flags & wire::INLINE == 0 && data.len() == 1 {
            let s = &data[0];
            let region = s.fbuf().region();
            if region.is_secured() && region.is_single_use() {
                // Move: map the sealed region privately at a fresh address.
                let map_len = region.len();
                let addr = vm::reserve(map_len).map_err(InputError::Os)?;
                let off = s.fbuf().region_offset() + s.offset();
                // The reservation is ours alone.
                // SAFETY: as argued just above.
                let r = unsafe { vm::map_private_fixed(addr, map_len, region.fd(), 0, true) };
                if let Err(e) = r {
                    // SAFETY: reserved above, unused.
                    let _ = unsafe { vm::release(addr, map_len) };
                    return Err(InputError::Os(e));
                }
                return Ok(OwnedBuf {
                    kind: Kind::Mapped(Mapped {
                        addr,
                        map_len,
                        offset: off,
                        len,
                        _src: s.fbuf().clone(),
                    }),
                });
            }
        }
        let mut b = self
            .alloc_for(len, h.page_offset as usize, Semantics::EmulatedWeakMove)
            .map_err(|e| InputError::Alloc(Box::new(e)))?;
        self.deliver(&h, &msg, b.as_mut_slice(), sem)?;
        Ok(b)
    }

    /// Give a system-allocated buffer back (cached for reuse).
    pub fn free(&self, buf: OwnedBuf) {
        if let Kind::Arena(mut b) = buf.kind {
            b.release_swapped();
            self.cache_push(b);
        }
    }
}

/// A message of one pool buffer: the header, then the `inline` bytes
/// (copied with `memcpy` when they are ours and immutable, else read with
/// volatile loads).
fn header_msg(pool: &Pool, h: Header, inline: View<'_>) -> Result<Msg, crate::AllocError> {
    let mut b = pool.alloc(HEADER_LEN + inline.len())?;
    let s = b.as_mut_slice();
    s[..HEADER_LEN].copy_from_slice(&h.to_bytes());
    match inline.as_slice() {
        Some(bytes) => zcio_sys::copy::copy(&mut s[HEADER_LEN..], bytes),
        None => {
            inline.read_at(0, &mut s[HEADER_LEN..]);
        }
    }
    // Pool buffers are volatile: freezing them cannot fail (only sealing
    // can), but map the error rather than assume it.
    b.freeze()
        .map(Msg::from)
        .map_err(|e| crate::AllocError::Region(e.error))
}

fn read_header(m: &Msg, ps: usize) -> Option<Header> {
    let first = m.slices().first()?;
    let mut b = [0u8; HEADER_LEN];
    if first.view().read_at(0, &mut b) < HEADER_LEN {
        return None;
    }
    Header::parse(&b, ps).ok()
}

/// The peer's hello, as [`SemanticEndpoint::new`] takes it from the first
/// message (`ps`: the page size): a valid header with [`wire::HELLO`] set.
pub fn parse_hello(m: &Msg, ps: usize) -> Option<Header> {
    read_header(m, ps).filter(|h| h.flags & wire::HELLO != 0)
}

/// A data message as input takes it from the channel (`ps`: the page
/// size): its header, checked against the message's own shape — inline
/// data within the header's slice, or exactly `data_slices` slices after
/// a bare header holding exactly `len` bytes — before anything is copied
/// or a page swapped.
pub fn parse_message(m: Msg, ps: usize) -> Result<(Header, Msg), InputError> {
    let h = read_header(&m, ps).ok_or(InputError::Malformed("bad header"))?;
    if h.flags & wire::HELLO != 0 {
        return Err(InputError::Malformed("unexpected hello"));
    }
    let first = &m.slices()[0];
    let ok = if h.flags & wire::INLINE != 0 {
        m.slice_count() == 1
            && first.len() >= HEADER_LEN
            && (first.len() - HEADER_LEN) as u64 >= h.len
    } else {
        first.len() == HEADER_LEN
            && m.slice_count() == h.data_slices as usize + 1
            && (m.len() - HEADER_LEN) as u64 == h.len
    };
    if !ok || h.len == 0 {
        return Err(InputError::Malformed("header does not match the message"));
    }
    Ok((h, m))
}

impl Drop for SemanticEndpoint {
    fn drop(&mut self) {
        self.chan.close();
        // Cached buffers: hidden pages still lent stay hidden (never
        // reused); the rest return to the arena.
        let cache = std::mem::take(&mut *lock(&self.cache));
        for b in cache {
            if !self.arena.core.in_flight(b.first, b.pages) {
                let _ = self
                    .arena
                    .core
                    .set_prot(b.first, b.pages, vm::Prot::ReadWrite);
                drop(b);
            } else {
                b.abandon();
            }
        }
    }
}
