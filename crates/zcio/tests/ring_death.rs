//! Named rings when a peer dies of SIGKILL, across processes:
//! (a) a consumer killed mid-stream under `Block`: the producer evicts it
//!     and keeps going, the other consumer gets every block in order;
//! (b) the producer killed (mid-stream or idle): blocked consumers drain
//!     what was published, then get `Disconnected { pid }`; a new producer
//!     takes the ring over and a new consumer reads its data;
//! (c) a consumer killed while the producer sleeps waiting for it: the
//!     producer's write returns `Ok` (eviction), not `TimedOut`;
//! (d) `ring::stat` shows dead consumers and a dead producer as such;
//! (e) a consumer that died in the middle of attaching;
//! (f) a producer that closes with an error: consumers drain, then get
//!     `ProducerFailed` (not the end of stream);
//! (g) a consumer that joins after its producer died (having written
//!     nothing since) waits for the next producer instead of reporting
//!     `Disconnected`.
//!
//! Every test has its own ring directory (`common::ring::RingDir`); children
//! are re-executions of this binary under a watchdog.

mod common;

use std::time::Duration;

use common::ring::{close, count, parse_end, producer_sleeps_on, reader, writer, RawRing, RingDir};
use common::Kid;
use zcio::internals::ring_layout::SLOT_JOINING;
use zcio::ring::{self, Layout, OpenError, Options, Overflow, Producer, RingMap, WriteError};

fn opts(layout: Layout, size: u64) -> Options {
    Options::new()
        .layout(layout)
        .overflow(Overflow::Block)
        .size(size)
        .slot_size(1024)
        .entries(128)
}

/// A fresh ring directory for test `tag` holding ring `r` (`Block`, with
/// `layout` and `size`); returns the directory and the ring's name.
fn new_ring(tag: &str, layout: Layout, size: u64) -> (RingDir, String) {
    let dir = RingDir::new(tag);
    let name = dir.name("r");
    drop(opts(layout, size).create(&name).expect("create"));
    (dir, name)
}

/// Two readers of ring `name` expecting every block from 0 (with their
/// slots), and a writer of blocks of at most `max` bytes that saw both.
fn two_readers_and_a_writer(dir: &RingDir, name: &str, max: usize) -> ([(Kid, usize); 2], Kid) {
    let a = reader(dir, name, &[("FIRST", "0")]);
    let b = reader(dir, name, &[("FIRST", "0")]);
    ([a, b], writer(dir, name, max, 2, &[]))
}

/// A fresh writer writes `n` blocks (waiting for the readers as it must)
/// and each reader reads all of them.
fn write_and_read_all(w: &mut Kid, readers: [&mut Kid; 2], n: u64) {
    assert_eq!(w.ask(&format!("write {n}")), format!("wrote total={n}"));
    for r in readers {
        assert_eq!(count(r, &format!("until {n}")), n);
    }
}

/// A slotted ring of 16 slots whose only consumer was killed while
/// attaching, its slot put back to `JOINING` (owned by the dead process);
/// returns the directory, the ring's name and file, and that slot.
fn ring_with_a_dead_joiner(tag: &str) -> (RingDir, String, RawRing, usize) {
    let (dir, name) = new_ring(tag, Layout::Slotted, 16 << 10);
    let (mut idle, slot) = reader(&dir, &name, &[("PAUSED", "1")]);
    let pid = idle.pid();
    assert!(idle.kill().code().is_none());
    let raw = RawRing::open(&name);
    raw.write_u64(RawRing::slot(slot) + 8, SLOT_JOINING << 32 | u64::from(pid));
    (dir, name, raw, slot)
}

#[test]
fn killed_consumer_is_evicted_and_the_other_keeps_reading() {
    let size = 64u64 << 10;
    let (dir, name) = new_ring("death-cons", Layout::Variable, size);
    let ([(mut a, _), (mut b, _)], mut w) = two_readers_and_a_writer(&dir, &name, 500);
    w.send("stream");
    assert!(
        count(&mut a, "until 1000") >= 1000,
        "reader a is mid-stream"
    );
    let a_pid = a.pid();
    assert!(a.kill().code().is_none(), "a died of a signal");
    // Everything the writer writes from now on lies beyond the dead reader's
    // cursor (≤ at_kill). A ring holds at most size/32 blocks (16-byte
    // header + at least 16 bytes), so b getting four rings' worth past
    // at_kill means the writer got past the dead reader: it evicted it.
    let at_kill = count(&mut w, "count");
    let target = at_kill + 4 * (size / 32);
    let got = count(&mut b, &format!("until {target}"));
    assert!(got >= target, "b read {got} blocks, expected ≥ {target}");
    let st = ring::stat(&name).expect("stat");
    assert!(
        st.consumers.iter().all(|c| c.pid != a_pid),
        "dead reader still attached: {st:?}"
    );
    assert_eq!(st.consumers.len(), 1, "{st:?}");
    assert!(st.consumers[0].alive && st.consumers[0].pid == b.pid());
    assert_eq!(st.producer.state, "active");
    w.send("stop");
    let r = w.expect("stopped total=");
    let total: u64 = r.split(' ').next().unwrap().parse().unwrap();
    assert!(r.ends_with("first_error=None"), "{r}");
    close(w);
    // b got every block, in order and intact (checked by the child), then
    // the end of the stream.
    assert_eq!(parse_end(&b.next_report()), ("eof".into(), total));
    b.finish();
}

#[test]
fn killed_producer_mid_stream_consumers_drain_then_new_producer_takes_over() {
    let (dir, name) = new_ring("death-prod", Layout::Descriptors, 64 << 10);
    let ([(mut r1, _), (mut r2, _)], mut w) = two_readers_and_a_writer(&dir, &name, 1000);
    let w_pid = w.pid();
    match Producer::open(&name) {
        Err(OpenError::ProducerBusy(p)) => assert_eq!(p, w_pid),
        other => panic!("second producer while the first lives: {other:?}"),
    }
    w.send("stream");
    assert!(count(&mut r1, "until 300") >= 300);
    assert!(w.kill().code().is_none(), "writer died of a signal");
    // Both readers (in a blocking `read`) drain what was published, then
    // learn that the producer died.
    let died = format!("err Disconnected {{ pid: {w_pid} }}");
    let (o1, n1) = parse_end(&r1.next_report());
    let (o2, n2) = parse_end(&r2.next_report());
    assert_eq!((o1.as_str(), o2.as_str()), (died.as_str(), died.as_str()));
    let st = ring::stat(&name).expect("stat");
    assert_eq!(st.producer.pid, w_pid);
    assert_eq!(st.producer.state, "dead", "{st:?}");
    // Descriptor rings count entries: the head is the number of blocks
    // published, and each reader got all of them.
    assert_eq!((n1, n2), (st.head, st.head), "{st:?}");
    assert!(n1 >= 300);
    r1.finish();
    r2.finish();

    // Takeover: a new producer attaches to the dead one's ring; a new
    // consumer reads only the new producer's blocks.
    let (mut r3, _) = reader(&dir, &name, &[("FIRST", "1000000")]);
    let mut w2 = writer(&dir, &name, 1000, 1, &[("SEQ0", "1000000")]);
    let st = ring::stat(&name).expect("stat");
    assert_eq!((st.producer.pid, st.producer.state), (w2.pid(), "active"));
    assert_eq!(w2.ask("write 300"), "wrote total=300");
    close(w2);
    assert_eq!(parse_end(&r3.next_report()), ("eof".into(), 300));
    r3.finish();
    assert_eq!(ring::stat(&name).unwrap().producer.state, "closed");
}

#[test]
fn killed_idle_producer_wakes_blocked_readers() {
    let (dir, name) = new_ring("death-idle", Layout::Slotted, 64 << 10);
    let ([(mut r1, _), (mut r2, _)], mut w) = two_readers_and_a_writer(&dir, &name, 1000);
    // More blocks than the ring holds: the writer waits for the readers.
    write_and_read_all(&mut w, [&mut r1, &mut r2], 200);
    // Both readers now sleep in a blocking `read` on an idle producer.
    let w_pid = w.pid();
    assert!(w.kill().code().is_none());
    let died = format!("err Disconnected {{ pid: {w_pid} }}");
    assert_eq!(parse_end(&r1.next_report()), (died.clone(), 200));
    assert_eq!(parse_end(&r2.next_report()), (died, 200));
    r1.finish();
    r2.finish();
}

#[test]
fn consumer_killed_while_the_producer_waits_for_it_is_evicted() {
    // 16 slots of 1 KiB.
    let (dir, name) = new_ring("death-wait", Layout::Slotted, 16 << 10);
    // A reader that never reads.
    let (mut idle, slot) = reader(&dir, &name, &[("PAUSED", "1")]);
    let mut w = writer(&dir, &name, 1000, 1, &[]);
    assert_eq!(w.ask("fill"), "full n=16 stopped-by=WouldBlock");
    w.send("write_timeout 20");
    // The writer flags the idle reader's cursor word when it sleeps on it.
    let map = RingMap::open(&name, false).expect("open");
    common::eventually("the writer sleeps waiting for the idle reader", || {
        producer_sleeps_on(&map, slot)
    });
    assert!(idle.kill().code().is_none());
    let r = w.expect("write ");
    assert!(
        r.starts_with("Ok("),
        "write while waiting for a dead reader: {r}"
    );
    let st = ring::stat(&name).expect("stat");
    assert!(st.consumers.is_empty(), "dead reader evicted: {st:?}");
    // With no consumer left the ring never fills again.
    assert_eq!(w.ask("write 100"), "wrote total=117");
    close(w);
}

#[test]
fn stat_reports_dead_consumer_and_dead_producer() {
    let (dir, name) = new_ring("death-stat", Layout::Slotted, 64 << 10);
    let ([(mut c1, s1), (mut c2, s2)], mut w) = two_readers_and_a_writer(&dir, &name, 1000);
    write_and_read_all(&mut w, [&mut c1, &mut c2], 20);
    let (p1, p2, wp) = (c1.pid(), c2.pid(), w.pid());

    let st = ring::stat(&name).expect("stat");
    assert_eq!((st.producer.pid, st.producer.state), (wp, "active"));
    assert_eq!(st.blocks, 20);
    let mut seen: Vec<_> = st
        .consumers
        .iter()
        .map(|c| (c.slot, c.pid, c.alive, c.lag, c.read_blocks))
        .collect();
    seen.sort_unstable();
    let mut want = vec![(s1, p1, true, 0, 20), (s2, p2, true, 0, 20)];
    want.sort_unstable();
    assert_eq!(seen, want, "{st:?}");

    // A dead consumer stays listed, as dead, until someone evicts it (the
    // producer has had no reason to: the ring never filled).
    assert!(c1.kill().code().is_none());
    let st = ring::stat(&name).expect("stat");
    let dead: Vec<_> = st.consumers.iter().filter(|c| c.pid == p1).collect();
    assert_eq!(dead.len(), 1, "{st:?}");
    assert!(!dead[0].alive && dead[0].slot == s1, "{st:?}");
    assert!(st.consumers.iter().any(|c| c.pid == p2 && c.alive));
    assert_eq!(st.producer.state, "active");

    assert!(w.kill().code().is_none());
    assert_eq!(
        parse_end(&c2.next_report()),
        (format!("err Disconnected {{ pid: {wp} }}"), 20)
    );
    c2.finish();
    let st = ring::stat(&name).expect("stat");
    assert_eq!((st.producer.pid, st.producer.state), (wp, "dead"), "{st:?}");
    assert_eq!(
        st.consumers
            .iter()
            .map(|c| (c.pid, c.alive))
            .collect::<Vec<_>>(),
        [(p1, false)],
        "the reader that left cleanly is gone, the killed one is listed dead"
    );

    // Cleanup: a new producer takes over and evicts the dead consumer.
    let mut p = Producer::open(&name).expect("take over a dead producer's ring");
    let st = ring::stat(&name).expect("stat");
    assert_eq!(
        (st.producer.pid, st.producer.state),
        (std::process::id(), "active")
    );
    assert_eq!(p.live_consumers(), 0);
    assert!(ring::stat(&name).unwrap().consumers.is_empty());
    drop(p);
    assert_eq!(ring::stat(&name).unwrap().producer.state, "closed");
}

/// A consumer killed between announcing itself in the consumer bitmap and
/// marking its slot active leaves the slot `JOINING` with its bit set. We
/// recreate exactly that state (kill a reader, then put its slot back to
/// `JOINING`): the producer must not wait for that dead process forever.
#[test]
fn consumer_killed_while_attaching_does_not_block_the_producer_forever() {
    let (_dir, name, _raw, _slot) = ring_with_a_dead_joiner("death-join");
    let mut p = Producer::open(&name).expect("producer");
    let mut n = 0;
    while p.try_write(&common::ring::block(n, 1000)).is_ok() {
        n += 1;
    }
    assert_eq!(n, 16, "the dead joiner's cursor (0) holds the ring");
    let r = p.write_timeout(&common::ring::block(n, 1000), Duration::from_secs(10));
    assert!(
        r.is_ok(),
        "write waiting only for a dead process's JOINING slot: {r:?} (not evicted)"
    );
    assert_ne!(r, Err(WriteError::TimedOut));
}

/// The same death one step earlier (slot claimed as `JOINING`, bitmap bit
/// not yet set) must not cost a consumer slot for good.
#[test]
fn slot_left_joining_by_a_dead_process_is_reclaimed() {
    let (_dir, name, raw, slot) = ring_with_a_dead_joiner("death-joinslot");
    let bits = raw.read_u64(common::ring::CONTROL_CONSUMERS);
    raw.write_u64(common::ring::CONTROL_CONSUMERS, bits & !(1 << slot));
    let mut held = Vec::new();
    for i in 0..ring::Geometry::MAX_CONSUMERS {
        match ring::Consumer::open(&name) {
            Ok(c) => held.push(c),
            Err(e) => panic!(
                "consumer {i} of {}: {e:?} (the dead joiner's slot {slot} was not reclaimed)",
                ring::Geometry::MAX_CONSUMERS
            ),
        }
    }
}

#[test]
fn producer_closing_with_an_error_is_reported_after_the_data() {
    let (dir, name) = new_ring("death-fail", Layout::Variable, 64 << 10);
    let ([(mut r1, _), (mut r2, _)], mut w) = two_readers_and_a_writer(&dir, &name, 500);
    let w_pid = w.pid();
    write_and_read_all(&mut w, [&mut r1, &mut r2], 50);
    w.send("fail 28");
    assert_eq!(w.next_report(), "closed");
    let failed = format!("err ProducerFailed {{ pid: {w_pid}, code: 28 }}");
    assert_eq!(parse_end(&r1.next_report()), (failed.clone(), 50));
    assert_eq!(parse_end(&r2.next_report()), (failed, 50));
    assert_eq!(ring::stat(&name).unwrap().producer.state, "failed");
    r1.finish();
    r2.finish();
    w.finish();
}

#[test]
fn reader_after_a_dead_producer_waits_for_the_next_one() {
    let (dir, name) = new_ring("death-late", Layout::Slotted, 64 << 10);
    let mut w = writer(&dir, &name, 1000, 0, &[]);
    assert_eq!(w.ask("write 5"), "wrote total=5");
    assert!(w.kill().code().is_none());
    assert_eq!(ring::stat(&name).unwrap().producer.state, "dead");
    // Joins at the dead producer's head: nothing new will come from it.
    let (mut r, _) = reader(&dir, &name, &[("FIRST", "100")]);
    let mut w2 = writer(&dir, &name, 1000, 1, &[("SEQ0", "100")]);
    assert_eq!(w2.ask("write 20"), "wrote total=20");
    assert_eq!(count(&mut r, "until 20"), 20);
    close(w2);
    assert_eq!(parse_end(&r.next_report()), ("eof".into(), 20));
    r.finish();
}

ring_child_entry_points!();
