//! The originator's ledger: which buffers a peer holds. A notice can only
//! release an entry this ledger handed out to that peer.
//!
//! An entry ends in one of two ways. A *release* notice says the peer and
//! everyone it passed the slice on to dropped it: the buffer may be reused.
//! Anything else — the peer dies, breaks the protocol, is aborted, or the
//! ledger itself goes away while the peer still holds slices — ends the
//! entry by *retiring* the buffer: the peer may have forwarded it to a
//! process we cannot see, so its memory is never reused (the kernel frees
//! it when the last mapping anywhere is gone).

use crate::buf::Fbuf;

/// Tokens are `generation << 32 | index`: an index into the slab plus the
/// generation the slot had when it was handed out, so a stale or forged
/// token for a reused slot is rejected.
#[derive(Default)]
pub struct Ledger {
    entries: Vec<Entry>,
    free: Vec<u32>,
    live: usize,
    /// Bytes of the slices the peer holds (the sum of `Entry::len`).
    bytes: u64,
}

#[derive(Default)]
struct Entry {
    gen: u32,
    /// Bytes of the slice lent under this entry.
    len: u64,
    held: Held,
}

/// What an entry keeps alive.
#[derive(Default)]
enum Held {
    /// Free slot.
    #[default]
    Nothing,
    /// A buffer that returns to its pool when released.
    Buf(Fbuf),
    /// Accounting only (single-use regions: the peer has its own fd).
    Detached,
    /// One of the channel's small-message slots (`slots.rs`).
    Slot(u32),
}

/// What a released entry kept alive, for the caller to give back.
#[derive(Debug)]
pub enum Returned {
    /// A buffer (dropped by the caller: it returns to its pool).
    Buf(Fbuf),
    /// A small-message slot, free again.
    Slot(u32),
    /// Nothing.
    Nothing,
}

/// A notice named a token this peer does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownToken(pub u64);

impl Ledger {
    /// Record that the peer now holds (a reference to) `buf`: a slice of
    /// `len` bytes of it.
    pub fn insert(&mut self, buf: Fbuf, len: u64) -> u64 {
        self.put(Held::Buf(buf), len)
    }

    /// Record that the peer holds a slice of `len` bytes we keep nothing
    /// alive for.
    pub fn insert_detached(&mut self, len: u64) -> u64 {
        self.put(Held::Detached, len)
    }

    /// Record that the peer holds small-message slot `slot` (`len` bytes).
    pub fn insert_slot(&mut self, slot: u32, len: u64) -> u64 {
        self.put(Held::Slot(slot), len)
    }

    fn put(&mut self, held: Held, len: u64) -> u64 {
        self.live += 1;
        self.bytes += len;
        if let Some(i) = self.free.pop() {
            let e = &mut self.entries[i as usize];
            e.held = held;
            e.len = len;
            return (u64::from(e.gen) << 32) | u64::from(i);
        }
        let i = self.entries.len() as u32;
        self.entries.push(Entry { gen: 0, len, held });
        // Room on the free list for every entry: `release` runs on whichever
        // thread drains the notices (the waitset settles every channel of
        // the process) and must not allocate there; the sender grows it here.
        let want = self.entries.len();
        if self.free.capacity() < want {
            self.free.reserve(want - self.free.len());
        }
        u64::from(i)
    }

    /// Release the entry for `token`; returns what it kept (a buffer
    /// reference, so the caller decides where to drop it, or a slot).
    pub fn release(&mut self, token: u64) -> Result<Returned, UnknownToken> {
        let (gen, idx) = ((token >> 32) as u32, token as u32);
        let e = self
            .entries
            .get_mut(idx as usize)
            .ok_or(UnknownToken(token))?;
        if e.gen != gen || matches!(e.held, Held::Nothing) {
            return Err(UnknownToken(token));
        }
        let held = std::mem::take(&mut e.held);
        e.gen = e.gen.wrapping_add(1);
        self.free.push(idx);
        self.live -= 1;
        self.bytes -= std::mem::take(&mut e.len);
        Ok(match held {
            Held::Buf(b) => Returned::Buf(b),
            Held::Slot(slot) => Returned::Slot(slot),
            Held::Nothing | Held::Detached => Returned::Nothing,
        })
    }

    /// Whether `token` names an entry the peer still holds.
    pub fn holds(&self, token: u64) -> bool {
        let (gen, idx) = ((token >> 32) as u32, token as u32);
        self.entries
            .get(idx as usize)
            .is_some_and(|e| e.gen == gen && !matches!(e.held, Held::Nothing))
    }

    /// Entries the peer holds.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Bytes of the slices the peer holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether the peer holds nothing.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// End every entry without a release notice (peer gone, aborted,
    /// corrupt): each buffer is retired (see the module docs). Returns the
    /// references so the caller chooses where they are dropped.
    pub fn retire_all(&mut self) -> Vec<Fbuf> {
        self.end_all(|_| true).0
    }

    /// End every entry; `retire(buf)` decides per buffer whether it is
    /// retired or simply released. Returns the references (for the caller
    /// to drop) and how many were retired.
    pub fn end_all(&mut self, retire: impl Fn(&Fbuf) -> bool) -> (Vec<Fbuf>, usize) {
        let mut out = Vec::with_capacity(self.live);
        let mut retired = 0;
        for (i, e) in self.entries.iter_mut().enumerate() {
            match std::mem::take(&mut e.held) {
                Held::Nothing => continue,
                Held::Buf(b) => {
                    if retire(&b) {
                        b.retire();
                        retired += 1;
                    }
                    out.push(b);
                }
                // A slot the peer held is retired with the rest: it never
                // goes back on the free list.
                Held::Detached | Held::Slot(_) => {}
            }
            e.gen = e.gen.wrapping_add(1);
            e.len = 0;
            self.free.push(i as u32);
        }
        self.live = 0;
        self.bytes = 0;
        (out, retired)
    }

    /// How many held entries belong to pool `pool_id`.
    pub fn count_from_pool(&self, pool_id: u64) -> usize {
        self.entries
            .iter()
            .filter(|e| matches!(&e.held, Held::Buf(b) if b.pool_id() == Some(pool_id)))
            .count()
    }
}

impl Drop for Ledger {
    /// A channel end that goes away while its peer still holds slices
    /// cannot learn when the peer is done with them: retire them.
    fn drop(&mut self) {
        drop(self.retire_all());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};

    /// Releasing never grows the free list (a drain on any thread runs it):
    /// the inserts that made the entries made its room.
    #[test]
    fn release_finds_room_on_the_free_list() {
        let mut l = Ledger::default();
        let tokens: Vec<u64> = (0..100).map(|i| l.insert_detached(i)).collect();
        let room = l.free.capacity();
        assert!(room >= tokens.len());
        for t in tokens {
            assert!(l.release(t).is_ok());
        }
        assert_eq!(l.free.capacity(), room, "no release grew the list");
    }

    /// The token logic alone, on entries that keep no buffer (the one part
    /// of the ledger that runs without a pool, so under Miri too).
    #[test]
    fn detached_tokens_are_single_use_generational_and_counted() {
        let mut l = Ledger::default();
        let a = l.insert_detached(10);
        let b = l.insert_detached(20);
        assert_eq!((l.len(), l.bytes()), (2, 30));
        assert!(l.holds(a) && l.holds(b));
        assert!(
            matches!(l.release(a), Ok(Returned::Nothing)),
            "nothing kept alive"
        );
        assert!(!l.holds(a));
        assert_eq!((l.len(), l.bytes()), (1, 20));
        assert_eq!(l.release(a).unwrap_err(), UnknownToken(a), "single use");
        let c = l.insert_detached(5);
        assert_eq!(c as u32, a as u32, "the free slot is reused");
        assert_eq!(c >> 32, 1, "under the next generation");
        assert!(!l.holds(a), "the old token does not name the new entry");
        for forged in [c ^ (1 << 32), c + 2, u64::from(u32::MAX), u64::MAX] {
            assert!(!l.holds(forged));
            assert_eq!(l.release(forged).unwrap_err(), UnknownToken(forged));
        }
        assert_eq!((l.len(), l.bytes()), (2, 25));
        let (bufs, retired) = l.end_all(|_| unreachable!("no buffer to decide on"));
        assert!(bufs.is_empty());
        assert_eq!(retired, 0);
        assert!(l.is_empty());
        assert_eq!(l.bytes(), 0);
        assert!(!l.holds(b) && !l.holds(c), "ending all ends every token");
        assert!(l.release(b).is_err());
        let d = l.insert_detached(7);
        assert!(!l.holds(b) && !l.holds(c) && l.holds(d));
        assert_eq!(l.count_from_pool(1), 0);
        assert!(matches!(l.release(d), Ok(Returned::Nothing)));
        let s = l.insert_slot(3, 64);
        assert_eq!(l.bytes(), 64);
        assert!(
            matches!(l.release(s), Ok(Returned::Slot(3))),
            "the slot comes back"
        );
        assert!(l.release(s).is_err(), "once");
        let s = l.insert_slot(4, 64);
        assert!(l.retire_all().is_empty(), "a slot is retired, not returned");
        assert!(!l.holds(s));
        assert!(l.is_empty());
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn tokens_are_single_use_and_generational() {
        let p = Pool::new(PoolConfig {
            chunk_size: 1 << 16,
            populate: false,
            ..PoolConfig::named("l")
        });
        let b = p.try_alloc(1).unwrap().freeze().unwrap();
        let mut l = Ledger::default();
        let t1 = l.insert(b.clone(), 1);
        assert_eq!(l.bytes(), 1);
        let t2 = l.insert(b.clone(), 4096);
        assert_eq!(l.bytes(), 4097);
        assert_eq!(l.len(), 2);
        assert!(l.holds(t1));
        assert!(l.release(t1).is_ok());
        assert!(!l.holds(t1));
        assert_eq!(l.bytes(), 4096, "a release gives the slice's bytes back");
        assert_eq!(
            l.release(t1).unwrap_err(),
            UnknownToken(t1),
            "double release refused"
        );
        let t3 = l.insert(b.clone(), 7);
        assert_eq!(t3 as u32, t1 as u32, "slot reused");
        assert_ne!(t3, t1, "with a new generation");
        assert!(l.release(t1).is_err());
        assert!(l.release(12345).is_err());
        assert_eq!(l.count_from_pool(p.id()), 2);
        drop(b);
        assert_eq!(p.stats().buffers_in_use, 1, "ledger keeps the buffer alive");
        let _ = t2;
        drop(l.retire_all());
        assert_eq!(l.bytes(), 0);
        let st = p.stats();
        assert_eq!(st.buffers_in_use, 0);
        assert_eq!((st.buffers_retired, st.bytes_retired), (1, 4096));
        let again = p.try_alloc(1).unwrap();
        assert_ne!(again.region_offset(), 0, "retired pages are not reused");
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn released_buffers_are_reused_and_dropped_ledgers_retire() {
        let p = Pool::new(PoolConfig {
            chunk_size: 1 << 16,
            populate: false,
            ..PoolConfig::named("l2")
        });
        let mut l = Ledger::default();
        let t = l.insert(p.try_alloc(1).unwrap().freeze().unwrap(), 1);
        drop(l.release(t).unwrap());
        assert_eq!(p.stats().buffers_retired, 0);
        assert_eq!(p.try_alloc(1).unwrap().region_offset(), 0, "reused");
        l.insert(p.try_alloc(1).unwrap().freeze().unwrap(), 1);
        drop(l);
        assert_eq!(p.stats().buffers_retired, 1);
    }
}
