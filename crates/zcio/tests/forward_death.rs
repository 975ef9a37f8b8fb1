//! A forwarder that dies must not let the originator reuse a buffer that a
//! live receiver further down the path still reads.
//!
//! O (this test) → F (forwarder process) → R (keeper process). O sends one
//! 64 KiB buffer of `'A'` to F, F forwards it to R, R keeps it. F is killed
//! with SIGKILL. O's ledger loses its only witness of where the buffer went,
//! so it must retire the buffer instead of reusing it: whatever O allocates
//! and writes afterwards, R must still read `'A'`. Before retirement existed,
//! O's next allocation returned the very same pages and R saw `'B'`.
//!
//! And one death must not cost the pool: buffers still on the ring that F
//! never read are freed, not retired; a chunk whose buffers were all
//! retired is replaced by fresh memory within `PoolConfig::retire_budget`;
//! an allocation nothing could ever satisfy fails at once.

mod common;

use std::time::Duration;

use common::{Kid, SockPath, STEP};
use zcio::{Channel, ChannelConfig, Listener, Msg, Pool, PoolConfig};

const LEN: usize = 64 << 10;

#[test]
fn dead_forwarder_does_not_let_the_originator_reuse_what_a_receiver_holds() {
    let r_sock = SockPath::new("fwd-death-r");
    let f_sock = SockPath::new("fwd-death-f");
    let mut keeper = Kid::spawn("child_keeper", "keeper", &[("SOCK", r_sock.arg())]);
    keeper.expect("listening");
    let mut fwd = Kid::spawn(
        "child_forwarder",
        "forwarder",
        &[("UP", f_sock.arg()), ("DOWN", r_sock.arg())],
    );
    fwd.expect("listening");
    let o = Channel::connect(f_sock.path(), ChannelConfig::default()).expect("connect to F");
    // One chunk with room for two buffers: after the kill, a pool that
    // forgot where its buffer went hands out the same pages again.
    let pool = Pool::new(PoolConfig {
        chunk_size: 2 * LEN,
        max_chunks: 1,
        populate: false,
        ..PoolConfig::named("fwd-death")
    });
    let mut b = pool.alloc_timeout(LEN, STEP).expect("alloc");
    b.as_mut_slice().fill(b'A');
    let first = b.freeze().expect("freeze");
    let first_offset = first.region_offset();
    o.send(Msg::from(first)).expect("send to F");
    assert_eq!(fwd.expect("forwarded"), LEN.to_string());
    assert_eq!(keeper.expect("holding"), LEN.to_string());

    fwd.kill();
    common::eventually("O notices F's death", || !o.check_peer());

    // Allocate and overwrite whatever the pool hands out now — twice, so a
    // LIFO quick list or a best-fit extent would both have had their chance
    // to return the forwarded pages.
    let mut later = Vec::new();
    for fill in [b'B', b'C'] {
        match pool.alloc_timeout(LEN, Duration::from_millis(200)) {
            Ok(mut b) => {
                assert_ne!(
                    b.region_offset(),
                    first_offset,
                    "the forwarded buffer's pages were handed out again"
                );
                b.as_mut_slice().fill(fill);
                later.push(b.freeze().expect("freeze"));
            }
            Err(e) => eprintln!("alloc after the kill: {e}"),
        }
    }
    assert_eq!(keeper.ask("check"), format!("intact {LEN}"));
    let st = pool.stats();
    assert_eq!(st.buffers_retired, 1, "{st:?}");
    assert_eq!(st.bytes_retired, LEN, "{st:?}");
    assert_eq!(
        st.bytes_free + st.bytes_in_use + st.bytes_retired,
        st.bytes_total,
        "retired memory is accounted, not free: {st:?}"
    );
    drop(later);
    keeper.send("exit");
    keeper.finish();
}

/// O → F → R with O's whole pool on the ring (one 1 MiB chunk, sixteen
/// 64 KiB buffers), F having taken `taken` of them (and forwarded them to
/// R, so their region escaped); then F is killed.
struct PoolOnTheRing {
    o: Channel,
    pool: Pool,
    fwd: Kid,
    keeper: Kid,
    _socks: (SockPath, SockPath),
}

const BUFS: usize = 16;

fn pool_on_the_ring(tag: &str, taken: usize, retire_budget: usize) -> PoolOnTheRing {
    let r_sock = SockPath::new(&format!("{tag}-r"));
    let f_sock = SockPath::new(&format!("{tag}-f"));
    let count = ("COUNT", taken.to_string());
    let mut keeper = Kid::spawn(
        "child_keeper",
        "keeper",
        &[("SOCK", r_sock.arg()), count.clone()],
    );
    keeper.expect("listening");
    let mut fwd = Kid::spawn(
        "child_forwarder",
        "forwarder",
        &[("UP", f_sock.arg()), ("DOWN", r_sock.arg()), count],
    );
    fwd.expect("listening");
    let o = Channel::connect(f_sock.path(), ChannelConfig::default()).expect("connect to F");
    let pool = Pool::new(PoolConfig {
        chunk_size: BUFS * LEN,
        max_chunks: 1,
        populate: false,
        retire_budget,
        ..PoolConfig::named(tag)
    });
    for _ in 0..BUFS {
        let mut b = pool.alloc_timeout(LEN, STEP).expect("alloc");
        b.as_mut_slice().fill(b'A');
        o.send(Msg::from(b.freeze().expect("freeze")))
            .expect("send to F");
    }
    assert!(matches!(
        pool.try_alloc(LEN),
        Err(zcio::AllocError::WouldBlock(_))
    ));
    assert_eq!(fwd.expect("forwarded"), (taken * LEN).to_string());
    assert_eq!(keeper.expect("holding"), (taken * LEN).to_string());
    fwd.kill();
    common::eventually("O notices F's death", || !o.check_peer());
    PoolOnTheRing {
        o,
        pool,
        fwd,
        keeper,
        _socks: (r_sock, f_sock),
    }
}

impl PoolOnTheRing {
    /// R still reads `'A'` in every buffer F forwarded to it.
    fn keeper_check(&mut self) -> String {
        self.keeper.ask("check")
    }

    fn finish(mut self) {
        let held = self.o.stats().retired as usize * LEN;
        assert_eq!(self.keeper_check(), format!("intact {held}"));
        self.keeper.send("exit");
        self.keeper.finish();
        drop(self.fwd);
    }
}

#[test]
fn buffers_the_dead_forwarder_never_read_are_freed_not_retired() {
    let t = pool_on_the_ring("fwd-death-unread", 1, 0);
    let st = t.o.stats();
    assert_eq!(st.never_received, (BUFS - 1) as u64, "{st:?}");
    assert_eq!(st.retired, 1, "only the forwarded buffer: {st:?}");
    let ps = t.pool.stats();
    assert_eq!(ps.buffers_retired, 1, "{ps:?}");
    assert_eq!(ps.buffers_in_use, 0, "{ps:?}");
    // The 15 unread buffers are free at once: no wait for a dead peer.
    let mut again = Vec::new();
    for _ in 0..BUFS - 1 {
        let mut b = t.pool.try_alloc(LEN).expect("an unread buffer is free");
        b.as_mut_slice().fill(b'B');
        again.push(b.freeze().unwrap());
    }
    // The sixteenth is retired (R may still read it) and the budget for
    // replacing chunks is 0: nothing can satisfy this, so it fails at
    // once, not after the timeout.
    drop(again);
    let held_one = t.pool.alloc_timeout(BUFS * LEN, Duration::from_secs(3));
    assert!(
        matches!(held_one, Err(zcio::AllocError::Unsatisfiable { .. })),
        "{held_one:?}"
    );
    t.finish();
}

#[test]
fn a_chunk_whose_buffers_were_all_retired_is_replaced_within_the_budget() {
    let mut t = pool_on_the_ring("fwd-death-all", BUFS, BUFS * LEN);
    let st = t.o.stats();
    assert_eq!((st.retired, st.never_received), (BUFS as u64, 0), "{st:?}");
    // Every buffer is retired: the chunk is replaced by fresh memory, and
    // what R holds stays intact while O writes the new chunk.
    let mut fresh = Vec::new();
    for _ in 0..BUFS {
        let mut b = t
            .pool
            .alloc_timeout(LEN, Duration::from_secs(3))
            .expect("a fresh chunk");
        b.as_mut_slice().fill(b'C');
        fresh.push(b.freeze().unwrap());
    }
    let ps = t.pool.stats();
    assert_eq!(
        (ps.chunks_replaced, ps.bytes_written_off),
        (1, BUFS * LEN),
        "{ps:?}"
    );
    assert_eq!((ps.chunks, ps.buffers_retired), (1, 0), "{ps:?}");
    assert_eq!(t.keeper_check(), format!("intact {}", BUFS * LEN));
    // The fresh chunk's buffers come back and are reused as usual.
    drop(fresh);
    assert!(t.pool.try_alloc(LEN).is_ok());
    t.finish();
}

#[test]
#[ignore = "child process entry point"]
fn child_forwarder() {
    if common::child_role("forwarder").is_none() {
        return;
    }
    let down = Channel::connect(common::arg("DOWN"), ChannelConfig::default()).expect("connect R");
    let up_l = Listener::bind(common::arg("UP"), ChannelConfig::default()).expect("bind");
    common::report("listening");
    let up = up_l.accept_timeout(STEP).expect("accept O");
    let count: usize = std::env::var("ZCIO_ARG_COUNT").map_or(1, |c| c.parse().unwrap());
    let mut len = 0;
    for _ in 0..count {
        let m = up.recv_timeout(STEP).expect("recv from O");
        len += m.len();
        down.send(m).expect("forward to R");
    }
    common::report(format_args!("forwarded {len}"));
    // Wait to be killed.
    while common::command().is_some() {}
}

#[test]
#[ignore = "child process entry point"]
fn child_keeper() {
    if common::child_role("keeper").is_none() {
        return;
    }
    let l = Listener::bind(common::arg("SOCK"), ChannelConfig::default()).expect("bind");
    common::report("listening");
    let ch = l.accept_timeout(STEP).expect("accept F");
    let count: usize = std::env::var("ZCIO_ARG_COUNT").map_or(1, |c| c.parse().unwrap());
    let held: Vec<_> = (0..count)
        .map(|_| ch.recv_timeout(STEP).expect("recv from F"))
        .collect();
    common::report(format_args!(
        "holding {}",
        held.iter().map(|m| m.len()).sum::<usize>()
    ));
    while let Some(cmd) = common::command() {
        match cmd.as_str() {
            "check" => {
                let bytes: Vec<u8> = held.iter().flat_map(|m| m.to_vec()).collect();
                match bytes.iter().position(|&b| b != b'A') {
                    None => common::report(format_args!("intact {}", bytes.len())),
                    Some(at) => {
                        common::report(format_args!("changed at {at}: {:?}", char::from(bytes[at])))
                    }
                }
            }
            "exit" => return,
            other => panic!("unknown command {other:?}"),
        }
    }
}
