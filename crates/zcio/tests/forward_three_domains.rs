//! Forwarding along a three-domain path A → B → C. B hands every message
//! it receives from A to C unchanged (it never reads the payload). Each of
//! A's regions must cross the B → C channel exactly once, C must see the
//! exact bytes, and A's buffers must stay allocated while C holds them and
//! come back to A's pool once C drops them and B reclaims.

mod common;

use std::collections::HashSet;

use common::{Kid, SockPath, STEP};
use zcio::{Channel, ChannelConfig, Listener, Msg, Pool, Uncached};

/// Message `i`: (payload length, number of parts, secured).
fn schedule() -> Vec<(usize, usize, bool)> {
    let mut v = Vec::new();
    for i in 0..40usize {
        let len = match i % 5 {
            0 => 1 + i,
            1 => 4096 * (1 + i % 3),
            2 => 20_000 + 77 * i,
            3 => 3 + i * 11,
            _ => 60_000,
        };
        let parts = 1 + i % 4;
        v.push((len.max(parts), parts, false));
    }
    v.push((300_000, 1, false)); // a chunk of its own
    v.push((5000, 1, true)); // secured single-use regions
    v.push((9000, 2, true));
    v
}

fn build(pool: &Pool, unc: &Uncached, i: u64, len: usize, parts: usize, secured: bool) -> Msg {
    let mut m = Msg::new();
    let step = len / parts;
    for p in 0..parts {
        let from = p * step;
        let n = if p + 1 == parts { len - from } else { step };
        let mut b = if secured {
            unc.alloc_secured(n).expect("secured")
        } else {
            pool.alloc_timeout(n, STEP).expect("alloc")
        };
        common::fill(b.as_mut_slice(), i, from as u64);
        m.join(Msg::from(b.freeze().expect("freeze")))
            .expect("join");
    }
    if len > 2 && !secured {
        // Split inside a slice and join back: two slices share one buffer.
        // (Not for single-use regions: those travel once per slice; see
        // transfer.rs `single_use_region_travels_once_per_message`.)
        let (mut a, b) = m
            .split_at(len / 2 + 1)
            .map_err(|e| e.into_parts().0)
            .expect("split");
        a.join(b).expect("join");
        m = a;
    }
    m
}

#[test]
fn b_forwards_each_region_once_and_a_gets_everything_back() {
    let sock_a = SockPath::new("fwd-a");
    let sock_b = SockPath::new("fwd-b");
    // A lends every buffer by reference: the test follows its regions.
    let cfg = ChannelConfig {
        lane: zcio::LaneConfig::OFF,
        ..ChannelConfig::default()
    };
    let listener = Listener::bind(sock_a.path(), cfg).expect("bind");
    let mut b = Kid::spawn(
        "child_forwarder",
        "fwd-b",
        &[("SOCK_A", sock_a.arg()), ("SOCK_B", sock_b.arg())],
    );
    // B binds its own listener before connecting to us, so once we have
    // accepted B, C can connect to B.
    let ab = listener.accept_timeout(STEP).expect("accept B");
    let mut c = Kid::spawn("child_sink", "fwd-c", &[("SOCK_B", sock_b.arg())]);
    b.expect("accepted C");

    let pool = common::small_pool("fwd", 128 << 10, 16);
    let unc = Uncached::new("fwd-secured", false);
    let sched = schedule();
    let mut regions = HashSet::new();
    let (mut slices, mut pooled) = (0usize, HashSet::new());
    for (i, &(len, parts, secured)) in sched.iter().enumerate() {
        let m = build(&pool, &unc, i as u64, len, parts, secured);
        for s in m.slices() {
            regions.insert(s.fbuf().region().id());
            if s.fbuf().pool_id().is_some() {
                pooled.insert((s.fbuf().region().id(), s.fbuf().region_offset()));
            }
        }
        slices += m.slice_count();
        ab.send(m).expect("send to B");
    }
    let n = sched.len();
    assert!(
        pool.stats().chunks >= 3,
        "the schedule spans several chunks: {:?}",
        pool.stats()
    );

    assert_eq!(b.ask(&format!("forward {n}")), format!("forwarded {n}"));
    let held = c.ask(&format!("verify {n}"));
    let st = b.ask("stats");
    assert_eq!(
        held,
        format!("held {n} slices={slices} regions={}", regions.len()),
        "C's view"
    );
    let want = format!(
        "stats ab_regions_received={0} bc_regions_sent={0} bc_msgs_sent={n}",
        regions.len()
    );
    assert_eq!(st, want, "each region crossed B → C exactly once");
    assert_eq!(ab.stats().regions_sent, regions.len() as u64);

    // C holds everything, so B's ledger holds A's buffers, so A's do too.
    ab.reclaim();
    assert_eq!(
        ab.stats().held_by_peer,
        slices,
        "B still references every slice"
    );
    assert_eq!(
        pool.stats().buffers_in_use,
        pooled.len(),
        "A's pool buffers are pinned by C"
    );

    assert_eq!(c.ask("release"), "released");
    assert_eq!(b.ask("settle"), format!("settled notices={slices}"));
    common::settle(&ab, "A's pool after C released and B reclaimed", || {
        pool.stats().buffers_in_use == 0 && ab.stats().held_by_peer == 0
    });
    assert!(ab.check_peer(), "released by notices, not by B's death");
    assert_eq!(ab.stats().bad_notices, 0);
    assert_eq!(ab.stats().notices_received, slices as u64);
    b.send("exit");
    c.send("exit");
    c.finish();
    b.finish();
}

#[test]
#[ignore = "child process entry point"]
fn child_forwarder() {
    if common::child_role("fwd-b").is_none() {
        return;
    }
    let lb = Listener::bind(common::arg("SOCK_B"), ChannelConfig::default()).expect("bind B");
    let ab =
        Channel::connect(common::arg("SOCK_A"), ChannelConfig::default()).expect("connect to A");
    let bc = lb.accept_timeout(STEP).expect("accept C");
    common::report("accepted C");
    while let Some(cmd) = common::command() {
        match cmd.as_str() {
            c if c.starts_with("forward ") => {
                let n = common::count_arg(c, "forward ");
                for _ in 0..n {
                    let m = ab.recv_timeout(STEP).expect("recv from A");
                    // Forward unchanged: slices, offsets and regions as received.
                    bc.send(m).expect("send to C");
                }
                common::report(format_args!("forwarded {n}"));
            }
            "stats" => {
                let (a, c) = (ab.stats(), bc.stats());
                common::report(format_args!(
                    "stats ab_regions_received={} bc_regions_sent={} bc_msgs_sent={}",
                    a.regions_received, c.regions_sent, c.msgs_sent
                ));
            }
            "settle" => {
                common::settle(&bc, "B's ledger towards C", || bc.stats().held_by_peer == 0);
                ab.flush(); // pass the notices for A's buffers upstream
                common::report(format_args!(
                    "settled notices={}",
                    bc.stats().notices_received
                ));
            }
            "exit" => return,
            other => panic!("unknown command {other:?}"),
        }
    }
}

#[test]
#[ignore = "child process entry point"]
fn child_sink() {
    if common::child_role("fwd-c").is_none() {
        return;
    }
    let ch =
        Channel::connect(common::arg("SOCK_B"), ChannelConfig::default()).expect("connect to B");
    let sched = schedule();
    let mut held: Vec<Msg> = Vec::new();
    while let Some(cmd) = common::command() {
        match cmd.as_str() {
            c if c.starts_with("verify ") => {
                let n = common::count_arg(c, "verify ");
                let mut regions = HashSet::new();
                let mut slices = 0;
                for (i, &(len, _, secured)) in sched.iter().enumerate().take(n) {
                    let m = ch.recv_timeout(STEP).expect("recv from B");
                    assert_eq!(m.len(), len, "message {i} length");
                    let mut at = 0u64;
                    for s in m.slices() {
                        assert_eq!(
                            s.fbuf().is_secured(),
                            secured,
                            "message {i}: seals survive forwarding"
                        );
                        assert!(
                            common::first_mismatch(&s.view().to_vec(), i as u64, at).is_none(),
                            "message {i} bytes"
                        );
                        at += s.len() as u64;
                        regions.insert(s.fbuf().region().id());
                    }
                    slices += m.slice_count();
                    held.push(m);
                }
                common::report(format_args!(
                    "held {n} slices={slices} regions={}",
                    regions.len()
                ));
            }
            "release" => {
                held.clear();
                ch.flush();
                common::report("released");
            }
            "exit" => return,
            other => panic!("unknown command {other:?}"),
        }
    }
}
