//! Live statistics of channel ends, lanes and pools (issue 37), as a tool in
//! another process sees them: a child runs a workload of known size over a
//! channel of its own (both ends, a lane on it, one pool) and stays alive;
//! the parent lists the child's run directory and finds every counter at
//! its exact value, without joining any protocol.
//!
//! The child gets a run directory of its own (`ZCIO_RUN_DIR`); the parent
//! only reads it, so nothing here touches the default one.

mod common;

use std::path::PathBuf;

use common::{Kid, SockPath};
use zcio::{Channel, ChannelConfig, LaneConfig, Listener, Msg, Pool, PoolConfig};
use zcio_sys::registry::schema::{channel as ch, lane as ln, pool as pl};
use zcio_sys::registry::{Entry, Kind, RunDir, State};

/// A private run directory, removed on drop.
struct Run(PathBuf);

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const POOL: &str = "stats-xproc-pool";

#[test]
fn a_childs_counters_are_in_the_listing_at_their_exact_values() {
    let run = Run(std::env::temp_dir().join(format!("zcio-stats-xproc-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&run.0);
    let sock = SockPath::new("stats");
    let dir_arg = run.0.display().to_string();
    let mut kid = Kid::spawn_with(
        "child_workload",
        "stats-workload",
        &[("SOCK", sock.arg())],
        |c| {
            c.env("ZCIO_RUN_DIR", &dir_arg);
        },
    );
    kid.expect("ready");
    let Ok(dir) = RunDir::open(&run.0) else {
        eprintln!("skipped: the run directory {} was refused", run.0.display());
        kid.kill();
        return;
    };
    let listing = dir.list().expect("list");
    let mine: Vec<&Entry> = listing
        .entries
        .iter()
        .filter(|e| e.pid == kid.pid() && e.state == State::Live)
        .collect();
    let of = |k: Kind| -> Vec<&Entry> { mine.iter().copied().filter(|e| e.kind == k).collect() };
    let name = sock.arg();

    // The two channel ends: the connector sent, the accepted end received.
    let chans = of(Kind::Channel);
    assert_eq!(chans.len(), 2, "{mine:?}");
    assert!(chans.iter().all(|e| e.name == name));
    let tx = chans
        .iter()
        .find(|e| e.stats[ch::SENT_MESSAGES] > 0)
        .expect("the sending end");
    let rx = chans
        .iter()
        .find(|e| e.stats[ch::RECEIVED_MESSAGES] > 0)
        .expect("the receiving end");
    let s = |e: &Entry, i: usize| e.stats[i];
    assert_eq!((s(tx, ch::SENT_MESSAGES), s(tx, ch::SENT_BYTES)), (3, 300));
    assert_eq!(s(tx, ch::COPIED_MESSAGES), 0, "lent by reference");
    assert_eq!(
        (
            s(tx, ch::HELD_BY_PEER_BUFFERS),
            s(tx, ch::HELD_BY_PEER_BYTES)
        ),
        (1, 100)
    );
    assert_eq!(s(tx, ch::NOTICES_RECEIVED), 2);
    assert_eq!(s(tx, ch::REGIONS_SENT), 1);
    assert_eq!(s(tx, ch::SEND_WOULD_BLOCK), 0);
    assert_eq!(
        (s(rx, ch::RECEIVED_MESSAGES), s(rx, ch::RECEIVED_BYTES)),
        (3, 300)
    );
    let holding = zcio_sys::registry::schema::field(Kind::Channel, "holding_buffers").unwrap();
    assert_eq!(holding.read(&rx.stats), 1);
    assert_eq!(
        (s(rx, ch::RECEIVED_SLICES), s(rx, ch::ENDED_SLICES)),
        (3, 2)
    );
    assert_eq!(s(rx, ch::NOTICES_SENT), 2);
    assert_eq!(s(rx, ch::RECV_WOULD_BLOCK), 1);
    assert_eq!(s(rx, ch::REGIONS_RECEIVED), 1);
    assert_eq!(s(tx, ch::PEER_PID), u64::from(kid.pid()));
    assert_eq!(s(rx, ch::PEER_PID), u64::from(kid.pid()));
    assert_ne!(s(tx, ch::CONNECTION), 0);
    assert_eq!(
        s(tx, ch::CONNECTION),
        s(rx, ch::CONNECTION),
        "one connection"
    );

    // The lane on it, registered under the channel's name.
    let lanes = of(Kind::Lane);
    assert_eq!(lanes.len(), 2, "{mine:?}");
    assert!(lanes.iter().all(|e| e.name == name));
    let lt = lanes
        .iter()
        .find(|e| e.stats[ln::SENT_MESSAGES] > 0)
        .expect("the lane's sender");
    let lr = lanes
        .iter()
        .find(|e| e.stats[ln::RECEIVED_MESSAGES] > 0)
        .expect("the lane's receiver");
    assert_eq!((s(lt, ln::SENT_MESSAGES), s(lt, ln::SENT_BYTES)), (2, 20));
    assert_eq!(
        (s(lr, ln::RECEIVED_MESSAGES), s(lr, ln::RECEIVED_BYTES)),
        (2, 20)
    );
    assert_eq!(s(lr, ln::RECV_WOULD_BLOCK), 1);
    assert_eq!(s(lt, ln::CONNECTION), s(lr, ln::CONNECTION));
    assert_ne!(s(lt, ln::CONNECTION), 0);

    // The pool: one buffer still held by the receiver, three allocated.
    let pools: Vec<&Entry> = of(Kind::Pool)
        .into_iter()
        .filter(|e| e.name == POOL)
        .collect();
    assert_eq!(pools.len(), 1, "{mine:?}");
    let p = pools[0];
    assert_eq!(s(p, pl::ALLOCATED), 3);
    assert_eq!(s(p, pl::IN_USE_BUFFERS), 1);
    assert_eq!(s(p, pl::CAPACITY_BYTES), 1 << 20);
    assert_eq!(p.mode, 0o400, "a pool's entry is its owner's alone");

    assert_eq!(kid.ask("quit"), "bye");
    kid.finish();
    let left = RunDir::open(&run.0).expect("run dir").list().expect("list");
    assert!(
        left.entries.iter().all(|e| e.state != State::Live),
        "nothing of the child is live: {:?}",
        left.entries
    );
}

#[test]
#[ignore = "child process entry point"]
fn child_workload() {
    if common::child_role("stats-workload").is_none() {
        return;
    }
    let path = PathBuf::from(common::arg("SOCK"));
    let cfg = ChannelConfig {
        lane: LaneConfig::OFF,
        ..ChannelConfig::default()
    };
    let l = Listener::bind(&path, cfg.clone()).expect("bind");
    let p2 = path.clone();
    let c2 = cfg.clone();
    let t = std::thread::spawn(move || Channel::connect(&p2, c2).expect("connect"));
    let b = l.accept().expect("accept");
    let a = t.join().expect("connector thread");
    let pool = Pool::new(PoolConfig {
        chunk_size: 1 << 20,
        max_chunks: 1,
        populate: false,
        ..PoolConfig::named(POOL)
    });
    assert!(b.try_recv().is_err(), "nothing sent yet");
    for _ in 0..3 {
        let mut buf = pool.try_alloc(100).expect("alloc");
        buf.as_mut_slice().fill(7);
        a.send(Msg::from(buf.freeze().expect("freeze")))
            .expect("send");
    }
    let m1 = b.recv().expect("recv");
    let m2 = b.recv().expect("recv");
    let kept = b.recv().expect("recv");
    drop((m1, m2));
    b.flush();
    a.reclaim();

    let mut lt = a
        .open_lane(&LaneConfig {
            slots: 4,
            slot_size: 64,
        })
        .expect("open lane");
    let mut lr = b.accept_lane().expect("accept lane");
    assert!(lr.try_recv().is_err(), "nothing on the lane yet");
    for _ in 0..2 {
        lt.send_copy(&[1; 10]).expect("lane send");
    }
    for _ in 0..2 {
        drop(lr.recv().expect("lane recv"));
    }
    common::report("ready");
    common::expect_command("quit");
    drop((kept, lt, lr, a, b, l));
    common::report("bye");
}
