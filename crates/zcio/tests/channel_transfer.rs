//! Cross-process transfer: an originator (this process) sends messages of
//! many sizes and shapes — single pool buffers from 1 byte to 1 MiB,
//! multi-slice aggregates built with join/split/clip/prepend, uncached
//! volatile buffers and secured (sealed) buffers — to a receiver child that
//! verifies every byte against a deterministic pattern and reports a
//! checksum back over the same channel. Afterwards nothing may leak: the
//! pool is back to zero buffers in use and the peer holds nothing.

mod common;

use common::{Kid, SockPath, STEP};
use zcio::{Channel, ChannelConfig, Listener, Msg, Pool, Uncached};

const HDR: usize = 24;
const END: u64 = u64::MAX;
/// Header flag: every payload slice is secured.
const F_SECURED: u64 = 1;

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// One pool buffer.
    Pool,
    /// Several pool buffers joined, split and re-joined.
    Multi,
    /// A pool buffer with junk in front, clipped off.
    Clipped,
    /// One uncached volatile buffer.
    Uncached,
    /// One uncached secured buffer.
    Secured,
    /// A secured buffer from `Pool::alloc_secured` joined with an uncached secured one.
    SecuredMulti,
}

fn schedule() -> Vec<(Kind, usize)> {
    let sizes = [
        1,
        2,
        100,
        4095,
        4096,
        4097,
        65_536,
        100_000,
        333_333,
        (1 << 20) - 1,
        1 << 20,
    ];
    let mut v = Vec::new();
    for round in 0..2 {
        for &s in &sizes {
            v.push((Kind::Pool, s));
        }
        for &s in &[3usize, 5000, 70_000, 1 << 20] {
            v.push((Kind::Multi, s + round));
            v.push((Kind::Clipped, s));
        }
        for &s in &[1usize, 4096, 200_000] {
            v.push((Kind::Uncached, s));
            v.push((Kind::Secured, s + round));
            v.push((Kind::SecuredMulti, s + 7));
        }
    }
    // Many small messages so the 64-entry ring wraps many times.
    for k in 0..600 {
        v.push((
            if k % 3 == 0 { Kind::Multi } else { Kind::Pool },
            1 + (k * 37) % 3000,
        ));
    }
    v
}

fn filled(pool: &Pool, i: u64, from: u64, len: usize) -> Msg {
    let mut b = pool.alloc_timeout(len, STEP).expect("alloc");
    common::fill(b.as_mut_slice(), i, from);
    Msg::from(b.freeze().expect("freeze"))
}

fn header(pool: &Pool, i: u64, len: u64, flags: u64) -> Msg {
    let mut h = [0u8; HDR];
    h[..8].copy_from_slice(&i.to_le_bytes());
    h[8..16].copy_from_slice(&len.to_le_bytes());
    h[16..].copy_from_slice(&flags.to_le_bytes());
    common::msg_of(pool, &h)
}

/// Build message `i`: header + `len` payload bytes of pattern `i`.
fn build(pool: &Pool, unc: &Uncached, i: u64, kind: Kind, len: usize) -> Msg {
    let secured_buf = |alloc: &dyn Fn(usize) -> zcio::FbufMut, from: u64, n: usize| {
        let mut b = alloc(n);
        common::fill(b.as_mut_slice(), i, from);
        Msg::from(b.freeze().expect("secure freeze"))
    };
    let (mut body, flags) = match kind {
        Kind::Pool => (filled(pool, i, 0, len), 0),
        Kind::Multi => {
            // Parts of uneven sizes, then split inside a slice and re-join.
            let mut cuts = vec![0, len / 7, len / 3, len / 2 - len / 9, 4 * len / 5, len];
            cuts.dedup();
            let mut m = Msg::new();
            for w in cuts.windows(2) {
                m.join(filled(pool, i, w[0] as u64, w[1] - w[0]))
                    .expect("join");
            }
            let cut = len / 2 + 1;
            let (mut a, b) = m
                .split_at(cut.min(len))
                .map_err(|e| e.into_parts().0)
                .expect("split");
            a.join(b).expect("rejoin");
            (a, 0)
        }
        Kind::Clipped => {
            let mut b = pool.alloc_timeout(len + 10, STEP).expect("alloc");
            b.as_mut_slice()[..10].fill(0xEE);
            common::fill(&mut b.as_mut_slice()[10..], i, 0);
            let mut m = Msg::from(b.freeze().expect("freeze"));
            m.clip_front(10).expect("clip");
            (m, 0)
        }
        Kind::Uncached => (secured_buf(&|n| unc.alloc(n).expect("uncached"), 0, len), 0),
        Kind::Secured => (
            secured_buf(&|n| unc.alloc_secured(n).expect("secured"), 0, len),
            F_SECURED,
        ),
        Kind::SecuredMulti => {
            let first = len / 2;
            let mut m = secured_buf(&|n| pool.alloc_secured(n).expect("secured"), 0, first);
            m.join(secured_buf(
                &|n| unc.alloc_secured(n).expect("secured"),
                first as u64,
                len - first,
            ))
            .expect("join");
            (m, F_SECURED)
        }
    };
    assert_eq!(body.len(), len);
    body.prepend(header(pool, i, len as u64, flags))
        .expect("prepend");
    body
}

fn cfg() -> ChannelConfig {
    ChannelConfig {
        ring_entries: 64,
        notice_entries: 2048,
        ..ChannelConfig::default()
    }
}

#[test]
fn messages_of_all_sizes_and_kinds_cross_processes_without_leaks() {
    let sock = SockPath::new("transfer");
    let listener = Listener::bind(sock.path(), cfg()).expect("bind");
    let mut kid = Kid::spawn(
        "child_receiver",
        "transfer-receiver",
        &[("SOCK", sock.arg())],
    );
    let ch = listener.accept_timeout(STEP).expect("accept");
    let pool = common::small_pool("transfer", 256 << 10, 32);
    let unc = Uncached::new("transfer-u", false);

    let (mut sum, mut slices, mut bytes) = (0u64, 0u64, 0u64);
    let sched = schedule();
    for (i, &(kind, len)) in sched.iter().enumerate() {
        let m = build(&pool, &unc, i as u64, kind, len);
        let mut expect = vec![0u8; len];
        common::fill(&mut expect, i as u64, 0);
        assert_eq!(
            &m.to_vec()[HDR..],
            &expect[..],
            "originator built message {i} wrong"
        );
        sum = common::fnv(sum, &expect);
        slices += m.slice_count() as u64;
        bytes += m.len() as u64;
        if let Err(e) = ch.send(m) {
            panic!("send {i} ({kind:?}, {len}): {e}");
        }
    }
    ch.send(header(&pool, END, 0, 0)).expect("send end");

    let reply = ch.recv_timeout(STEP).expect("receiver's report");
    let r = reply.to_vec();
    let field = |k: usize| u64::from_le_bytes(r[k * 8..k * 8 + 8].try_into().unwrap());
    assert_eq!(r.len(), 32);
    assert_eq!(
        field(0),
        sched.len() as u64,
        "messages verified by the receiver"
    );
    assert_eq!(field(1), sum, "checksum of payload bytes");
    assert_eq!(field(2), slices, "slices received");
    assert_eq!(field(3), bytes, "bytes received");
    drop(reply);

    // The receiver dropped everything before reporting; all notices arrive.
    common::settle(&ch, "originator reclaim", || {
        ch.stats().held_by_peer == 0 && pool.stats().buffers_in_use == 0
    });
    let st = ch.stats();
    assert!(
        ch.check_peer(),
        "buffers came back by notices, not by peer death"
    );
    assert_eq!(st.msgs_sent, sched.len() as u64 + 1);
    assert_eq!(st.notices_received, slices + 1, "one notice per slice sent");
    assert_eq!(st.bad_notices, 0);
    assert_eq!(st.malformed, 0);
    let ps = pool.stats();
    assert_eq!((ps.buffers_in_use, ps.bytes_in_use), (0, 0), "{ps:?}");
    assert!(ps.held_per_peer.iter().all(|(_, n)| *n == 0), "{ps:?}");
    kid.send("exit");
    kid.finish();
}

#[test]
#[ignore = "child process entry point"]
fn child_receiver() {
    if common::child_role("transfer-receiver").is_none() {
        return;
    }
    let ch = Channel::connect(common::arg("SOCK"), cfg()).expect("connect");
    let pool = common::small_pool("transfer-reply", 64 << 10, 1);
    let (mut n, mut sum, mut slices, mut bytes) = (0u64, 0u64, 0u64, 0u64);
    loop {
        let m = ch.recv_timeout(STEP).expect("recv");
        // Copy the header out once, then validate the copy.
        let h = m.slices()[0].view().to_vec();
        assert_eq!(h.len(), HDR, "header is its own slice");
        let word = |k: usize| u64::from_le_bytes(h[k * 8..k * 8 + 8].try_into().unwrap());
        let (i, len, flags) = (word(0), word(1), word(2));
        if i == END {
            break;
        }
        assert_eq!(i, n, "messages arrive in order");
        assert_eq!(m.len() as u64, HDR as u64 + len);
        let mut at = 0u64;
        for s in &m.slices()[1..] {
            let fb = s.fbuf();
            assert!(fb.is_foreign());
            assert!(!fb.region().is_writable());
            let secured = flags & F_SECURED != 0;
            assert_eq!(
                fb.is_secured(),
                secured,
                "message {i}: is_secured of a slice"
            );
            let view = fb.secure();
            assert_eq!(
                view.was_copied(),
                !secured,
                "message {i}: secure() copies only volatile buffers"
            );
            assert_eq!(&view[..], &fb.to_vec()[..]);
            assert_eq!(
                fb.view().as_slice().is_some(),
                secured,
                "message {i}: a plain slice only of sealed bytes"
            );
            let bytes = s.view().to_vec();
            if let Some(k) = common::first_mismatch(&bytes, i, at) {
                panic!("message {i}: byte {} differs", at + k as u64);
            }
            sum = common::fnv(sum, &bytes);
            at += s.len() as u64;
        }
        assert_eq!(at, len);
        assert!(!m.is_secured(), "the header slice is volatile");
        n += 1;
        slices += m.slice_count() as u64;
        bytes += m.len() as u64;
    }
    // Notices are batched; publish the last ones before going idle.
    ch.flush();
    let mut out = [0u8; 32];
    for (k, v) in [n, sum, slices, bytes].into_iter().enumerate() {
        out[k * 8..k * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    ch.send(common::msg_of(&pool, &out)).expect("send report");
    common::expect_command("exit");
}

/// The peer may hold no more slices than its notice ring has entries, so
/// every notice it owes always fits: a receiver that drops everything and
/// goes idle still returns every buffer.
#[test]
fn in_flight_is_capped_by_the_notice_ring_so_no_notice_is_stranded() {
    let (_sock, _l, mut kid, ch, pool) = hoard(8, 8);
    let other = common::small_pool("hoard-extra", 4096, 1);
    let (e, back) = ch
        .try_send(common::msg_of(&other, &[9u8; 100]))
        .unwrap_err()
        .into_parts();
    assert!(
        matches!(e, zcio::SendErrorKind::TooManyInFlight(8)),
        "{e:?}"
    );
    assert_eq!(back.len(), 100, "message handed back");
    drop(back);
    assert_eq!(kid.ask("drop flush"), "dropped 8");
    let ok = common::try_settle(&ch, STEP, || pool.stats().buffers_in_use == 0);
    assert!(
        ok,
        "{} of 8 buffers never came back",
        pool.stats().buffers_in_use
    );
    kid.send("exit");
    kid.finish();
}

/// A receiver drops a few buffers (fewer than a notice batch) and then
/// does something else: an originator waiting for buffers must get them.
#[test]
fn released_buffers_reach_an_originator_that_waits_later() {
    let (_sock, _l, mut kid, ch, pool) = hoard(3, 64);
    assert!(pool.try_alloc(4096).is_err(), "three buffers fill the pool");
    assert_eq!(kid.ask("drop"), "dropped 3");
    let got = pool.alloc_timeout(4096, std::time::Duration::from_secs(3));
    let st = ch.stats();
    kid.send("exit");
    kid.finish();
    assert!(
        got.is_ok(),
        "{got:?}; the receiver released 3 buffers; notices received: {}",
        st.notices_received
    );
}

/// Originator with a pool of exactly `n` pages; a receiver child holding
/// `n` one-page messages.
fn hoard(n: usize, notice_entries: u32) -> (SockPath, Listener, Kid, Channel, Pool) {
    let cfg = ChannelConfig {
        notice_entries,
        // Lent by reference, so the pool shows what the child holds.
        lane: zcio::LaneConfig::OFF,
        ..ChannelConfig::default()
    };
    let sock = SockPath::new("hoard");
    let listener = Listener::bind(sock.path(), cfg).expect("bind");
    // The connector's configuration decides the ring sizes.
    let args = [
        ("SOCK", sock.arg()),
        ("NOTICES", notice_entries.to_string()),
    ];
    let mut kid = Kid::spawn("child_hoarder", "transfer-hoarder", &args);
    let ch = listener.accept_timeout(STEP).expect("accept");
    let pool = common::small_pool("hoard", n * 4096, 1);
    for i in 0..n {
        ch.send(common::msg_of(&pool, &[i as u8; 100]))
            .expect("send");
    }
    assert_eq!(kid.ask(&format!("recv {n}")), format!("holding {n}"));
    assert_eq!(pool.stats().buffers_in_use, n);
    (sock, listener, kid, ch, pool)
}

#[test]
#[ignore = "child process entry point"]
fn child_hoarder() {
    if common::child_role("transfer-hoarder").is_none() {
        return;
    }
    let notice_entries = common::arg("NOTICES").parse().expect("notice entries");
    let cfg = ChannelConfig {
        notice_entries,
        ..ChannelConfig::default()
    };
    let ch = Channel::connect(common::arg("SOCK"), cfg).expect("connect");
    let mut held: Vec<Msg> = Vec::new();
    while let Some(cmd) = common::command() {
        match cmd.split_once(' ') {
            Some(("recv", n)) => {
                for i in 0..n.parse::<usize>().expect("count") {
                    let m = ch.recv_timeout(STEP).expect("recv");
                    assert_eq!(m.to_vec(), vec![i as u8; 100]);
                    held.push(m);
                }
                common::report(format_args!("holding {}", held.len()));
            }
            _ if cmd.starts_with("drop") => {
                let n = held.len();
                held.clear();
                if cmd == "drop flush" {
                    ch.flush(); // publish every batched notice that fits
                }
                common::report(format_args!("dropped {n}"));
            }
            _ if cmd == "exit" => return,
            _ => panic!("unknown command {cmd:?}"),
        }
    }
}

/// One message whose two slices come from one secured (single-use) buffer:
/// the region should cross once and be mapped once by the receiver.
#[test]
fn single_use_region_travels_once_per_message() {
    let sock = SockPath::new("single");
    let listener = Listener::bind(sock.path(), cfg()).expect("bind");
    let mut kid = Kid::spawn("child_probe", "transfer-probe", &[("SOCK", sock.arg())]);
    let ch = listener.accept_timeout(STEP).expect("accept");
    let unc = Uncached::new("single", false);
    let mut b = unc.alloc_secured(10_000).expect("secured");
    common::fill(b.as_mut_slice(), 5, 0);
    let (x, y) = Msg::from(b.freeze().expect("freeze"))
        .split_at(4000)
        .map_err(|e| e.into_parts().0)
        .expect("split");
    let mut m = x;
    m.join(y).expect("join");
    assert_eq!(m.slice_count(), 2);
    ch.send(m).expect("send");
    let got = kid.ask("recv");
    let sent = ch.stats().regions_sent;
    kid.send("exit");
    kid.finish();
    assert_eq!(got, "got slices=2 ok=true regions_received=1 mappings=1");
    assert_eq!(sent, 1, "one single-use region, passed once");
}

#[test]
#[ignore = "child process entry point"]
fn child_probe() {
    if common::child_role("transfer-probe").is_none() {
        return;
    }
    let ch = Channel::connect(common::arg("SOCK"), cfg()).expect("connect");
    common::expect_command("recv");
    let m = ch.recv_timeout(STEP).expect("recv");
    let ok =
        common::first_mismatch(&m.to_vec(), 5, 0).is_none() && m.len() == 10_000 && m.is_secured();
    let mut maps: Vec<usize> = m
        .slices()
        .iter()
        .map(|s| s.fbuf().region().base() as usize)
        .collect();
    maps.dedup();
    common::report(format_args!(
        "got slices={} ok={ok} regions_received={} mappings={}",
        m.slice_count(),
        ch.stats().regions_received,
        maps.len()
    ));
    common::expect_command("exit");
}
