//! In-process tests of the ring protocols (threads on both sides); the
//! cross-process, kill -9 and permission tests live in `tests/`.

use std::sync::atomic::{AtomicU32, Ordering as O};
use std::time::Duration;

use super::*;

/// A ring name unique to this test process and call, removed on drop.
struct Name(String);

impl Name {
    fn new(tag: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        Self(format!(
            "unit-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, O::Relaxed)
        ))
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        let _ = unlink(&self.0);
    }
}

/// Block `i` of a test stream: its length and contents are functions of
/// `i`, and its first 8 bytes carry `i`, so a reader can check any block
/// it is given on its own.
fn block(i: u64, max: usize) -> Vec<u8> {
    let len = 8 + (i as usize * 37 + 11) % (max - 8);
    let mut v: Vec<u8> = (0..len).map(|k| (i as usize * 31 + k) as u8).collect();
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

fn check_block(b: &[u8], max: usize) -> u64 {
    assert!(b.len() >= 8, "short block");
    let i = u64::from_le_bytes(b[..8].try_into().unwrap());
    assert_eq!(b, &block(i, max)[..], "block {i} corrupt");
    i
}

fn opts(layout: Layout, overflow: Overflow) -> Options {
    Options::new()
        .layout(layout)
        .overflow(overflow)
        .size(64 << 10)
        .slot_size(2048)
        .entries(64)
}

/// A fresh ring made with `o` (named after `tag`), its producer and one
/// consumer from the newest position; the name is removed on drop.
fn pair(tag: &str, o: Options) -> (Name, Producer, Consumer) {
    let name = Name::new(tag);
    let map = o.create(&name.0).unwrap();
    let p = Producer::attach(map.clone()).unwrap();
    let c = Consumer::attach(map, Start::Newest).unwrap();
    (name, p, c)
}

/// A slotted ring of 8 slots of 1 KiB under `overflow`.
fn eight_slots(overflow: Overflow) -> Options {
    opts(Layout::Slotted, overflow).size(8192).slot_size(1024)
}

/// The options of the small FRP rings the lapping tests use.
fn small_frp(layout: Layout) -> Options {
    opts(layout, Overflow::Frp)
        .size(8192)
        .slot_size(512)
        .entries(16)
}

const BLOCK_LAYOUTS: [Layout; 3] = [Layout::Slotted, Layout::Variable, Layout::Descriptors];

/// A timeout or bound too long to represent (`Duration::MAX`) is no
/// deadline, not an overflow: the explicit way to wait without a bound.
#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn duration_max_waits_without_a_bound() {
    let (_name, mut p, mut c) = pair("max", opts(Layout::Variable, Overflow::Block));
    assert_eq!(p.wait_bound(), Producer::DEFAULT_WAIT_BOUND);
    assert_eq!(c.wait_bound(), Consumer::DEFAULT_WAIT_BOUND);
    p.write_timeout(b"one", Duration::MAX).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(c.read_timeout(&mut buf, Duration::MAX), Ok(3));
    p.set_wait_bound(Duration::MAX);
    c.set_wait_bound(Duration::MAX);
    p.write(b"two").unwrap();
    p.write_tagged(b"three", 3, Wait::Default).unwrap();
    assert_eq!(c.read(&mut buf), Ok(3));
    let pk = c.peek(16).unwrap().expect("a block");
    assert_eq!(pk.to_vec(), b"three");
    pk.release().unwrap();
    p.write(b"four").unwrap();
    let pk = c.peek_timeout(16, Duration::MAX).unwrap().expect("a block");
    assert_eq!(pk.to_vec(), b"four");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn block_layouts_deliver_every_block_to_every_consumer() {
    for layout in BLOCK_LAYOUTS {
        let name = Name::new("blk");
        let map = opts(layout, Overflow::Block).create(&name.0).unwrap();
        let mut p = Producer::attach(map.clone()).unwrap();
        let consumers: Vec<Consumer> = (0..3)
            .map(|_| Consumer::attach(map.clone(), Start::Newest).unwrap())
            .collect();
        let n = 3000u64;
        let max = 2000;
        let readers: Vec<_> = consumers
            .into_iter()
            .enumerate()
            .map(|(k, mut c)| {
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 4096];
                    let mut next = 0;
                    loop {
                        // Alternate copy and peek readers.
                        let got = if k % 2 == 0 {
                            match c.read(&mut buf).unwrap() {
                                0 => break,
                                len => check_block(&buf[..len], max),
                            }
                        } else {
                            match c.peek(usize::MAX).unwrap() {
                                None => break,
                                Some(pk) => {
                                    let i = check_block(&pk.to_vec(), max);
                                    pk.release().unwrap();
                                    i
                                }
                            }
                        };
                        assert_eq!(got, next, "{layout:?}: out of order");
                        next += 1;
                    }
                    next
                })
            })
            .collect();
        for i in 0..n {
            p.write_tagged(&block(i, max), i as u32, Wait::Forever)
                .unwrap();
        }
        drop(p);
        for r in readers {
            assert_eq!(r.join().unwrap(), n, "{layout:?}");
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn continuous_stream_is_byte_exact_across_wraps() {
    let (_name, mut p, mut c) = pair(
        "cont",
        opts(Layout::Continuous, Overflow::Block).size(16 << 10),
    );
    let data: Vec<u8> = (0..1_000_003u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let expect = data.clone();
    let t = std::thread::spawn(move || {
        for chunk in data.chunks(4099) {
            assert_eq!(p.write(chunk).unwrap(), chunk.len());
        }
    });
    let mut got = Vec::new();
    let mut buf = [0u8; 777];
    loop {
        match c.read(&mut buf).unwrap() {
            0 => break,
            n => got.extend_from_slice(&buf[..n]),
        }
    }
    t.join().unwrap();
    assert_eq!(got.len(), expect.len());
    assert!(got == expect);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn nonblocking_and_timeout_variants() {
    let (_name, mut p, mut c) = pair("nb", opts(Layout::Variable, Overflow::Block).size(4096));
    let mut buf = [0u8; 4096];
    assert_eq!(c.try_read(&mut buf), Err(ReadError::WouldBlock));
    assert_eq!(
        c.read_timeout(&mut buf, Duration::from_millis(20)),
        Err(ReadError::TimedOut)
    );
    // Fill the ring: 4096 / (16 + 1008) = 4 blocks.
    for _ in 0..4 {
        p.try_write(&[1u8; 1008]).unwrap();
    }
    assert_eq!(p.try_write(&[1u8; 1008]), Err(WriteError::WouldBlock));
    assert_eq!(
        p.write_timeout(&[1u8; 1008], Duration::from_millis(20)),
        Err(WriteError::TimedOut)
    );
    assert!(matches!(
        p.try_write(&[0u8; 5000]),
        Err(WriteError::TooLarge { .. })
    ));
    assert_eq!(
        c.read(&mut buf[..10]),
        Err(ReadError::BufferTooSmall {
            need: 1008,
            have: 10
        })
    );
    assert_eq!(c.read(&mut buf).unwrap(), 1008);
    p.try_write(&[2u8; 1008]).unwrap();
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn srp_drops_when_slowest_is_a_ring_behind_and_counts_it() {
    let (name, mut p, mut c) = pair("srp", eight_slots(Overflow::Srp));
    for i in 0..8 {
        p.write(&[i; 100]).unwrap();
    }
    assert_eq!(p.write(&[9; 100]), Err(WriteError::Dropped));
    assert_eq!(p.write(&[9; 100]), Err(WriteError::Dropped));
    let mut buf = [0u8; 1024];
    assert_eq!(c.read(&mut buf).unwrap(), 100);
    assert_eq!(buf[0], 0);
    p.write(&[10; 100]).unwrap();
    let s = c.stats();
    assert_eq!(s.drops, 2);
    let st = stat(&name.0).unwrap();
    assert_eq!(st.dropped_blocks, 2);
    assert_eq!(st.consumers.len(), 1);
    assert_eq!(st.consumers[0].drops, 2);
    // The rest arrives in order, the dropped blocks never.
    let mut seen = Vec::new();
    while let Ok(n) = c.try_read(&mut buf) {
        seen.push((buf[0], n));
    }
    assert_eq!(
        seen,
        (1..8)
            .map(|i| (i, 100))
            .chain([(10, 100)])
            .collect::<Vec<_>>()
    );
}

/// A lapped FRP consumer never returns overwritten data and counts skips.
#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn frp_lapped_consumer_skips_and_never_returns_overwritten_data() {
    for layout in [
        Layout::Continuous,
        Layout::Slotted,
        Layout::Variable,
        Layout::Descriptors,
    ] {
        let (_name, mut p, mut c) = pair("frp", small_frp(layout));
        let max = 400;
        if layout == Layout::Continuous {
            // Whole stream of u64 counters; a lap must show as a skip.
            for i in 0..10_000u64 {
                p.write(&i.to_le_bytes()).unwrap();
            }
            let mut buf = [0u8; 8];
            let mut last = None;
            while let Ok(n) = c.try_read(&mut buf) {
                assert_eq!(n, 8);
                let v = u64::from_le_bytes(buf);
                assert!(last.is_none_or(|l| v > l));
                last = Some(v);
            }
            assert_eq!(last, Some(9_999));
        } else {
            for i in 0..500 {
                p.write_tagged(&block(i, max), 0, Wait::No).unwrap();
            }
            let mut buf = [0u8; 512];
            let mut last = None;
            while let Ok(n) = c.try_read(&mut buf) {
                let i = check_block(&buf[..n], max);
                assert!(last.is_none_or(|l| i > l));
                last = Some(i);
            }
            // A lapped variable ring can only jump to the head (no block
            // boundary is known behind it); the others keep the newest data.
            if layout != Layout::Variable {
                assert_eq!(last, Some(499), "{layout:?}");
            }
        }
        let s = c.stats();
        assert!(s.skipped_blocks >= 1, "{layout:?}: {s:?}");
        assert!(s.skipped_units > 0);
    }
}

/// Overwrites racing with a slow reader in another thread: whatever the
/// reader accepts is intact.
#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn frp_concurrent_overwrite_never_yields_torn_blocks() {
    for layout in [Layout::Variable, Layout::Descriptors, Layout::Slotted] {
        let (_name, mut p, mut c) = pair(
            "frpc",
            opts(layout, Overflow::Frp)
                .size(16384)
                .slot_size(2048)
                .entries(16),
        );
        let max = 2000;
        // The writer starts racing only once the reader has read its first
        // block: a writer that ran all its blocks and closed the ring
        // before the reader was scheduled left nothing to read (a Variable
        // ring reports end of stream to a reader lapped past a closed
        // producer), which failed this test under load.
        let reading = std::sync::Arc::new(std::sync::Barrier::new(2));
        let go = reading.clone();
        let w = std::thread::spawn(move || {
            p.write_tagged(&block(0, max), 0, Wait::No).unwrap();
            go.wait();
            for i in 1..100_000 {
                p.write_tagged(&block(i, max), 0, Wait::No).unwrap();
            }
        });
        let (mut got, mut lapped) = (0u64, 0u64);
        let mut first = Some(reading);
        loop {
            // Bounded: the first block is written before the barrier, the
            // rest end with the writer closing the ring.
            match c.peek_timeout(usize::MAX, Duration::from_secs(60)) {
                Ok(Some(pk)) => {
                    let copy = pk.to_vec();
                    // Slow reader: give the producer time to lap us.
                    std::hint::black_box(copy.iter().map(|&b| b as u64).sum::<u64>());
                    match pk.release() {
                        Ok(()) => {
                            check_block(&copy, max);
                            got += 1;
                        }
                        Err(ReadError::Lapped) => lapped += 1,
                        Err(e) => panic!("{e}"),
                    }
                    // The first block was read with the writer held back;
                    // from here on it races.
                    if let Some(b) = first.take() {
                        b.wait();
                    }
                }
                Ok(None) => break,
                Err(e) => panic!("{layout:?}: {e}"),
            }
        }
        w.join().unwrap();
        assert!(got > 0, "{layout:?}: nothing read ({lapped} lapped)");
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn mrp_reader_updates_shared_pointer() {
    let (name, mut p, mut a) = pair("mrp", eight_slots(Overflow::Mrp));
    let mut b = Consumer::attach(p.ring().clone(), Start::Newest).unwrap();
    for i in 0..8 {
        p.write(&[i; 10]).unwrap();
    }
    // R is still 0: the ring is full for the producer.
    assert_eq!(p.write(&[8; 10]), Err(WriteError::Dropped));
    let mut buf = [0u8; 1024];
    // R becomes the previous position of whichever consumer read last.
    a.read(&mut buf).unwrap(); // R = 0
    b.read(&mut buf).unwrap(); // R = 0
    a.read(&mut buf).unwrap(); // R = 1024
    p.write(&[8; 10]).unwrap();
    assert_eq!(p.write(&[9; 10]), Err(WriteError::Dropped));
    b.read(&mut buf).unwrap(); // R = 1024 (b's previous position)
    assert_eq!(p.write(&[9; 10]), Err(WriteError::Dropped));
    a.read(&mut buf).unwrap(); // R = 2048
    p.write(&[9; 10]).unwrap();
    assert_eq!(stat(&name.0).unwrap().dropped_blocks, 3);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn index_ring_filters_by_tag_and_reads_through() {
    let (_dn, mut p, mut filter) = pair("data", opts(Layout::Variable, Overflow::Block));
    let (_inn, mut ip, mut reader) =
        pair("idx", opts(Layout::Index, Overflow::Block).entries(1024));
    let max = 1000;
    for i in 0..40u64 {
        p.write_tagged(&block(i, max), (i % 4) as u32, Wait::Forever)
            .unwrap();
    }
    // The filter selects tag 1 by splicing rich pointers: only through
    // `splice(&peek)`; writing the peeked bytes (or any bytes) is refused.
    for _ in 0..40 {
        let pk = filter.try_peek(usize::MAX).unwrap().unwrap();
        if pk.tag() == 1 {
            assert_eq!(ip.write(&pk.to_vec()), Err(WriteError::NotIndexable));
            ip.splice(&pk, Wait::No).unwrap();
        }
        pk.release().unwrap();
    }
    assert_eq!(ip.write(b"not peeked"), Err(WriteError::NotIndexable));
    let mut buf = [0u8; 1024];
    let mut seen = Vec::new();
    while let Ok(n) = reader.try_read(&mut buf) {
        seen.push(check_block(&buf[..n], max));
    }
    assert_eq!(seen, (0..10).map(|k| 4 * k + 1).collect::<Vec<_>>());
    // An index entry chains: splicing a peek of the index ring points at
    // the data ring, not at the index ring.
    let (_idx2n, mut ip2, mut r2) = pair("idx2", opts(Layout::Index, Overflow::Block));
    let mut reader = Consumer::attach(ip.ring().clone(), Start::Oldest).unwrap();
    let pk = reader.try_peek(usize::MAX).unwrap().unwrap();
    assert_eq!(pk.origin().0.ring_id, p.geometry().ring_id);
    ip2.splice(&pk, Wait::No).unwrap();
    drop(pk);
    let n = r2.try_read(&mut buf).unwrap();
    assert_eq!(check_block(&buf[..n], max), 1);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn close_with_error_is_reported_after_the_data_and_a_new_producer_continues() {
    let (name, mut p, mut c) = pair("fail", opts(Layout::Continuous, Overflow::Block));
    let map = p.ring().clone();
    p.write(b"partial").unwrap();
    p.close_with_error(5);
    let mut buf = [0u8; 16];
    assert_eq!(c.read(&mut buf).unwrap(), 7);
    let failed = || ReadError::ProducerFailed {
        pid: std::process::id(),
        code: 5,
    };
    assert_eq!(c.read(&mut buf), Err(failed()));
    assert_eq!(c.try_read(&mut buf), Err(failed()));
    assert_eq!(stat(&name.0).unwrap().producer.state, "failed");
    // A consumer joining now waits for the next producer, like after close.
    let mut late = Consumer::attach(map.clone(), Start::Newest).unwrap();
    assert_eq!(late.try_read(&mut buf), Err(ReadError::WouldBlock));
    let mut p2 = Producer::attach(map).unwrap();
    p2.write(b"again").unwrap();
    assert_eq!(c.read(&mut buf).unwrap(), 5);
    assert_eq!(late.read(&mut buf).unwrap(), 5);
    drop(p2);
    assert_eq!(c.read(&mut buf).unwrap(), 0);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn open_errors_read_as_sentences() {
    use super::layout::BadHeader;
    let e = OpenError::BadHeader(BadHeader::Length {
        expected: 12288,
        actual: 4096,
    });
    assert_eq!(
        e.to_string(),
        "not a usable zcio ring: the file has 4096 bytes, its header needs 12288 (truncated, or not a ring)"
    );
    let e = OpenError::BadHeader(BadHeader::Magic).to_string();
    assert!(!e.contains("Magic"), "{e}");
    let e = OpenError::NoSpace {
        dir: "/dev/shm".into(),
        need: (1 << 30) + 12288,
        available: 512 << 20,
    }
    .to_string();
    assert!(
        e.starts_with("no space left on /dev/shm: the ring needs 1.0 GiB, 512 MiB available"),
        "{e}"
    );
}

#[test]
fn source_errors_are_typed_and_read_as_sentences() {
    use super::error::SourceError;
    let e = ReadError::Source(SourceError::UnknownId(0x1111));
    assert_eq!(
        e.to_string(),
        "index entry points into an unreachable ring: unknown ring id 0x1111"
    );
    let e = ReadError::Source(SourceError::Open {
        name: "src".into(),
        error: Box::new(OpenError::NotFound("src".into())),
    });
    assert!(
        e.to_string()
            .ends_with("src: no ring named \"src\" (create it with `zcio ring create src`)"),
        "{e}"
    );
    match e {
        ReadError::Source(SourceError::Open { error, .. }) => {
            assert_eq!(*error, OpenError::NotFound("src".into()))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn producer_close_gives_eof_after_draining_and_a_new_producer_continues() {
    let (name, mut p, mut c) = pair("eof", opts(Layout::Continuous, Overflow::Block));
    let map = p.ring().clone();
    assert!(matches!(
        Producer::attach(map.clone()),
        Err(OpenError::ProducerBusy(_))
    ));
    p.write(b"hello").unwrap();
    p.close();
    let mut buf = [0u8; 16];
    assert_eq!(c.read(&mut buf).unwrap(), 5);
    assert_eq!(c.read(&mut buf).unwrap(), 0);
    assert_eq!(stat(&name.0).unwrap().producer.state, "closed");
    let mut p2 = Producer::attach(map).unwrap();
    p2.write(b"again").unwrap();
    assert_eq!(c.read(&mut buf).unwrap(), 5);
    assert_eq!(&buf[..5], b"again");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn seek_moves_within_the_ring() {
    let (_name, mut p, mut c) = pair("seek", eight_slots(Overflow::Frp));
    for i in 0..12u8 {
        p.write(&[i; 4]).unwrap();
    }
    let mut buf = [0u8; 1024];
    assert_eq!(c.seek(SeekTo::Oldest).unwrap(), 4 * 1024);
    c.read(&mut buf).unwrap();
    assert_eq!(buf[0], 4);
    c.seek(SeekTo::Forward(2)).unwrap();
    c.read(&mut buf).unwrap();
    assert_eq!(buf[0], 7);
    c.seek(SeekTo::Backward(100)).unwrap();
    c.read(&mut buf).unwrap();
    assert_eq!(buf[0], 4);
    c.seek(SeekTo::Newest).unwrap();
    assert_eq!(c.try_read(&mut buf), Err(ReadError::WouldBlock));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn reservation_publishes_only_on_commit() {
    let (_name, mut p, mut c) = pair("resv", opts(Layout::Descriptors, Overflow::Block));
    {
        let mut r = p.reserve(100, Wait::No).unwrap();
        r.put(b"abc");
        // Dropped without commit: nothing published.
    }
    let mut buf = [0u8; 128];
    assert_eq!(c.try_read(&mut buf), Err(ReadError::WouldBlock));
    let mut r = p.reserve(100, Wait::No).unwrap();
    assert_eq!(r.put(&[7u8; 150]), 100);
    r.commit(42).unwrap();
    let pk = c.try_peek(usize::MAX).unwrap().unwrap();
    assert_eq!((pk.len(), pk.tag()), (100, 42));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn auto_doorbell_polls_readable_for_data_and_eof() {
    use rustix::event::{poll, PollFd, PollFlags};
    let (_name, mut p, mut c) = pair("ready", opts(Layout::Variable, Overflow::Block));
    // A duplicate, so the consumer can be used while we poll.
    let fd = rustix::io::fcntl_dupfd_cloexec(c.auto_doorbell().unwrap(), 0).unwrap();
    // `ready(false)` looks without waiting; `ready(true)` waits (bounded,
    // generously: the ring was sent before we poll, so it is queued).
    let ready = |wait: bool| {
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        let ts = rustix::time::Timespec {
            tv_sec: if wait { 10 } else { 0 },
            tv_nsec: 0,
        };
        poll(&mut fds, Some(&ts)).unwrap() > 0
    };
    let mut buf = [0u8; 64];
    // Armed by `auto_doorbell`: no read is needed before the first poll.
    assert!(!ready(false));
    p.write(b"ping").unwrap();
    assert!(ready(true), "the doorbell never became readable");
    assert_eq!(c.try_read(&mut buf).unwrap(), 4);
    // `WouldBlock` took the ring and armed the bell again.
    assert_eq!(c.try_read(&mut buf), Err(ReadError::WouldBlock));
    assert!(!ready(false), "the old ring was not taken");
    // Two publishes after one arming ring once; both blocks are read.
    p.write(b"a").unwrap();
    p.write(b"b").unwrap();
    assert!(ready(true));
    assert_eq!(c.try_peek(usize::MAX).unwrap().unwrap().to_vec(), b"a");
    assert_eq!(c.try_read(&mut buf).unwrap(), 1);
    assert!(matches!(c.try_peek(usize::MAX), Err(ReadError::WouldBlock)));
    assert!(!ready(false));
    // A consumer whose data already waits when it asks: readable at once.
    let mut c2 = Consumer::attach(p.ring().clone(), Start::Newest).unwrap();
    p.write(b"c").unwrap();
    let fd2 = rustix::io::fcntl_dupfd_cloexec(c2.auto_doorbell().unwrap(), 0).unwrap();
    let mut fds = [PollFd::new(&fd2, PollFlags::IN)];
    assert_eq!(
        poll(&mut fds, Some(&rustix::time::Timespec::default())).unwrap(),
        1
    );
    assert_eq!(c2.try_read(&mut buf).unwrap(), 1);
    assert_eq!(c.try_read(&mut buf).unwrap(), 1);
    assert_eq!(c.try_read(&mut buf), Err(ReadError::WouldBlock));
    // The end of the stream rings too.
    drop(p);
    assert!(
        ready(true),
        "the doorbell not readable at the end of the stream"
    );
    assert_eq!(c.try_read(&mut buf).unwrap(), 0);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn truncated_ring_gives_errors_not_crashes() {
    let (name, mut p, mut c) = pair("trunc", opts(Layout::Variable, Overflow::Block));
    p.write(&[1u8; 100]).unwrap();
    let fd = crate::sys::shm::open(&name.0, true).unwrap();
    rustix::fs::ftruncate(&fd, 0).unwrap();
    let mut buf = [0u8; 128];
    // The first access faults; the guard maps zeros and reports it.
    let r = c.read(&mut buf);
    assert!(matches!(r, Err(ReadError::Corrupt(_))), "{r:?}");
    assert!(matches!(p.write(&[1u8; 10]), Err(WriteError::Corrupt(_))));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn bad_files_are_refused_on_open() {
    let name = Name::new("bad");
    let path = crate::sys::shm::path_of(&name.0);
    std::fs::write(&path, vec![0u8; 20000]).unwrap();
    assert!(matches!(
        RingMap::open(&name.0, true),
        Err(OpenError::BadHeader(BadHeader::Magic))
    ));
    std::fs::write(&path, b"short").unwrap();
    assert!(matches!(
        RingMap::open(&name.0, true),
        Err(OpenError::BadHeader(BadHeader::Length { .. }))
    ));
    assert!(matches!(
        RingMap::open("../etc/passwd", true),
        Err(OpenError::InvalidName(_))
    ));
    assert!(matches!(
        RingMap::open(&format!("{}-none", name.0), true),
        Err(OpenError::NotFound(_))
    ));
    assert!(matches!(
        Options::new().size(5000).create(&name.0),
        Err(OpenError::InvalidConfig(_))
    ));
}

/// Mode bits beyond 0777 (setuid, setgid, sticky, a file type) are refused,
/// not silently dropped; plain permission bits are applied as given.
#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn mode_beyond_permission_bits_is_refused() {
    let name = Name::new("mode");
    for mode in [0o7777, 0o4600, 0o1600, 0o100600] {
        for r in [
            opts(Layout::Continuous, Overflow::Block)
                .mode(mode)
                .create(&name.0),
            opts(Layout::Continuous, Overflow::Block)
                .mode(mode)
                .create_or_open(&name.0),
        ] {
            match r {
                Err(e @ OpenError::InvalidConfig(_)) => {
                    assert!(e.to_string().contains("beyond 0777"), "{e}");
                }
                other => panic!("mode {mode:#o}: expected InvalidConfig, got {other:?}"),
            }
        }
        assert!(
            !ring_path(&name.0).unwrap().exists(),
            "mode {mode:#o}: nothing created"
        );
    }
    let map = opts(Layout::Continuous, Overflow::Block)
        .mode(0o640)
        .create(&name.0)
        .unwrap();
    assert_eq!(map.file_info().mode, 0o640);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn consumer_slots_are_freed_and_counted() {
    let name = Name::new("slots");
    let map = opts(Layout::Continuous, Overflow::Block)
        .create(&name.0)
        .unwrap();
    let p = Producer::attach(map.clone()).unwrap();
    let cs: Vec<_> = (0..Geometry::MAX_CONSUMERS)
        .map(|_| Consumer::attach(map.clone(), Start::Newest).unwrap())
        .collect();
    assert_eq!(p.consumers(), Geometry::MAX_CONSUMERS);
    assert!(matches!(
        Consumer::attach(map.clone(), Start::Newest),
        Err(OpenError::NoSlot(_))
    ));
    drop(cs);
    assert_eq!(p.consumers(), 0);
    assert!(Consumer::attach(map, Start::Newest).is_ok());
}

mod frp_property {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// The producer writes this many blocks.
        Write(u16),
        /// The consumer reads this many blocks (or until empty).
        Read(u16),
        /// The consumer peeks one block, the producer writes this many
        /// more while it is borrowed, then the consumer releases it.
        PeekDuring(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u16..40).prop_map(Op::Write),
            (1u16..40).prop_map(Op::Read),
            (0u16..40).prop_map(Op::PeekDuring),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Under FRP, whatever interleaving of writes, reads and peeks:
        /// every block a consumer accepts is exactly a block the producer
        /// wrote, in increasing order; a peek overwritten while borrowed is
        /// reported as `Lapped`, never accepted.
        #[test]
        #[cfg_attr(miri, ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri")]
        fn frp_never_accepts_overwritten_data(layout in 0usize..4, ops in prop::collection::vec(op(), 1..40)) {
            let layout = [Layout::Continuous, Layout::Slotted, Layout::Variable, Layout::Descriptors][layout];
            let (_name, mut p, mut c) = pair("prop", small_frp(layout));
            let max = 400;
            let mut next_write = 0u64;
            let mut last_read: Option<u64> = None;
            let mut write = |p: &mut Producer, n: u16| {
                for _ in 0..n {
                    if layout == Layout::Continuous {
                        p.write(&block(next_write, 16)[..8]).unwrap();
                    } else {
                        p.write_tagged(&block(next_write, max), 0, Wait::No).unwrap();
                    }
                    next_write += 1;
                }
            };
            let check = |b: &[u8]| -> u64 {
                if layout == Layout::Continuous {
                    u64::from_le_bytes(b[..8].try_into().unwrap())
                } else {
                    check_block(b, max)
                }
            };
            let read_max = if layout == Layout::Continuous { 8 } else { usize::MAX };
            for op in ops {
                match op {
                    Op::Write(n) => write(&mut p, n),
                    Op::Read(n) => {
                        let mut buf = [0u8; 512];
                        for _ in 0..n {
                            let Ok(len) = c.try_read(&mut buf[..read_max.min(512)]) else { break };
                            prop_assert!(layout != Layout::Continuous || len == 8);
                            let i = check(&buf[..len]);
                            prop_assert!(last_read.is_none_or(|l| i > l), "out of order: {} after {:?}", i, last_read);
                            last_read = Some(i);
                        }
                    }
                    Op::PeekDuring(n) => {
                        let Ok(Some(pk)) = c.try_peek(read_max) else { continue };
                        let before = pk.to_vec();
                        write(&mut p, n);
                        let intact = pk.is_intact();
                        let now = pk.to_vec();
                        match pk.release() {
                            Ok(()) => {
                                prop_assert!(intact);
                                prop_assert_eq!(&now, &before, "accepted bytes changed under the peek");
                                let i = check(&now);
                                prop_assert!(last_read.is_none_or(|l| i > l));
                                last_read = Some(i);
                            }
                            Err(ReadError::Lapped) => prop_assert!(!intact),
                            Err(e) => prop_assert!(false, "{}", e),
                        }
                    }
                }
            }
        }
    }
}

/// A detached peek keeps its block until resumed and released; reading
/// meanwhile makes it stale; another consumer's is refused; a lapped one
/// reports `Lapped` on release.
#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn detached_peek_resumes_only_while_current() {
    let (_name, mut p, mut c) = pair("detach", eight_slots(Overflow::Frp));
    p.write(b"one").unwrap();
    p.write(b"two").unwrap();
    let d = c.try_peek(1024).unwrap().unwrap().detach();
    assert_eq!((d.len(), d.tag(), d.is_empty()), (3, 0, false));
    let pk = c.resume(d).unwrap();
    assert_eq!(pk.to_vec(), b"one");
    let d = pk.detach();
    // Another consumer of the same ring cannot take it.
    let mut other = Consumer::attach(c.ring().clone(), Start::Oldest).unwrap();
    let d = match other.resume(d) {
        Ok(_) => panic!("resumed on another consumer"),
        Err(d) => d,
    };
    // Still current here: release advances past "one".
    c.resume(d).unwrap().release().unwrap();
    let mut buf = [0u8; 1024];
    let d = c.try_peek(1024).unwrap().unwrap().detach();
    // A read in between makes it stale (and reads the same block: the
    // cursor never moved past it).
    assert_eq!(c.try_read(&mut buf).unwrap(), 3);
    assert_eq!(&buf[..3], b"two");
    assert!(c.resume(d).is_err());
    // Lapped while detached: release says so.
    p.write(b"three").unwrap();
    let d = c.try_peek(1024).unwrap().unwrap().detach();
    for i in 0..16u8 {
        p.write(&[i; 8]).unwrap();
    }
    assert_eq!(c.resume(d).unwrap().release(), Err(ReadError::Lapped));
    // Seeking makes a detached peek stale too.
    let d = c.try_peek(1024).unwrap().unwrap().detach();
    c.seek(SeekTo::Newest).unwrap();
    assert!(c.resume(d).is_err());
}

/// `peek_detached` gives what `peek` + `detach` gives: the block's address
/// and length, released through `resume`; `Wait::No` on an empty ring is
/// `WouldBlock`, and the end of the stream is `None`.
#[test]
#[cfg_attr(
    miri,
    ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
)]
fn peek_detached_is_peek_then_detach() {
    let (_name, mut p, mut c) = pair("pkdet", eight_slots(Overflow::Srp));
    assert_eq!(
        c.peek_detached(1024, Wait::No).unwrap_err(),
        ReadError::WouldBlock
    );
    p.write(b"alpha").unwrap();
    p.write(b"beta").unwrap();
    let d = c.peek_detached(1024, Wait::No).unwrap().unwrap();
    let at = d.addr();
    let pk = c.resume(d).unwrap();
    assert_eq!((pk.view().as_ptr(), pk.to_vec()), (at, b"alpha".to_vec()));
    pk.release().unwrap();
    let d = c.peek_detached(1024, Wait::Forever).unwrap().unwrap();
    assert_eq!(d.len(), 4);
    c.resume(d).unwrap().release().unwrap();
    drop(p);
    assert!(c.peek_detached(1024, Wait::Forever).unwrap().is_none());
}
