//! Peer death (SIGKILL) and access control:
//! (a) a receiver killed while holding buffers: the originator notices
//!     (through `alloc_timeout`'s reclaim, `check_peer`, `recv`, `send`) and
//!     gets every buffer back;
//! (b) an originator killed while the receiver holds its buffers: the
//!     receiver still reads every byte — including messages still queued —
//!     then gets `Disconnected`;
//! (c) the listener's access policy refuses other uids.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;

use common::{Kid, SockPath, STEP};
use zcio::{AccessPolicy, ConnectError, RecvError, SendErrorKind};
use zcio::{Channel, ChannelConfig, Listener, Msg, Pool, Uncached};

const BUF: usize = 8192;

fn filled(pool: &Pool, i: u64, len: usize) -> Msg {
    let mut b = pool.alloc_timeout(len, STEP).expect("alloc");
    common::fill(b.as_mut_slice(), i, 0);
    Msg::from(b.freeze().expect("freeze"))
}

/// Fill a 4-chunk pool completely and give everything to a holder child.
fn exhausted_by_holder(tag: &str) -> (SockPath, Listener, Kid, Channel, Pool) {
    let sock = SockPath::new(tag);
    let listener = Listener::bind(sock.path(), ChannelConfig::default()).expect("bind");
    let mut kid = Kid::spawn("child_holder", "death-holder", &[("SOCK", sock.arg())]);
    let ch = listener.accept_timeout(STEP).expect("accept");
    let pool = common::small_pool(tag, 32 << 10, 4);
    let mut n = 0;
    while let Ok(mut b) = pool.try_alloc(BUF) {
        common::fill(b.as_mut_slice(), n, 0);
        ch.send(Msg::from(b.freeze().expect("freeze")))
            .expect("send");
        n += 1;
    }
    assert_eq!(n, 16, "4 chunks of 4 buffers");
    assert_eq!(kid.ask("hold 16"), "holding 16 ok=true");
    let st = pool.stats();
    assert_eq!(st.buffers_in_use, 16, "{st:?}");
    assert_eq!(ch.stats().held_by_peer, 16);
    (sock, listener, kid, ch, pool)
}

#[test]
fn killed_receiver_is_reclaimed_by_alloc_timeout() {
    let (_s, _l, mut kid, ch, pool) = exhausted_by_holder("death-alloc");
    assert!(
        pool.try_alloc(BUF).is_err(),
        "pool exhausted while the holder lives"
    );
    assert!(kid.kill().code().is_none(), "killed by a signal");
    // No explicit check_peer: the bounded allocation wait notices the death.
    let b = pool
        .alloc_timeout(BUF, STEP)
        .expect("buffers of the dead holder come back");
    drop(b);
    assert!(ch.is_disconnected());
    assert_eq!(pool.stats().buffers_in_use, 0);
    assert_eq!(ch.stats().held_by_peer, 0);
}

#[test]
fn killed_receiver_is_detected_by_check_peer_recv_and_send() {
    let (_s, _l, mut kid, ch, pool) = exhausted_by_holder("death-check");
    assert!(ch.check_peer(), "alive before the kill");
    kid.kill();
    common::eventually("check_peer sees the death", || !ch.check_peer());
    let st = pool.stats();
    assert_eq!((st.buffers_in_use, st.bytes_in_use), (0, 0), "{st:?}");
    assert_eq!(ch.stats().held_by_peer, 0);
    assert_eq!(ch.recv_timeout(STEP).unwrap_err(), RecvError::Disconnected);
    let (e, back) = ch.try_send(filled(&pool, 99, 10)).unwrap_err().into_parts();
    assert_eq!(e, SendErrorKind::Disconnected);
    assert_eq!(back.len(), 10);
}

/// At the `max_in_flight` cap, a receiver's death is `Disconnected`, not
/// the cap: for a send that was waiting at the cap when it died, and for
/// one after `check_peer` saw it.
#[test]
fn killed_receiver_at_the_in_flight_cap_is_disconnected_not_the_cap() {
    const CAP: usize = 4;
    let sock = SockPath::new("death-cap");
    let cfg = ChannelConfig {
        max_in_flight: CAP,
        ..ChannelConfig::default()
    };
    let listener = Listener::bind(sock.path(), cfg).expect("bind");
    let mut kid = Kid::spawn("child_holder", "death-holder", &[("SOCK", sock.arg())]);
    let ch = listener.accept_timeout(STEP).expect("accept");
    let pool = common::small_pool("death-cap", 32 << 10, 4);
    for i in 0..CAP as u64 {
        ch.send(filled(&pool, i, BUF)).expect("send");
    }
    assert_eq!(kid.ask("hold 4"), "holding 4 ok=true");
    let (e, back) = ch.try_send(filled(&pool, 4, BUF)).unwrap_err().into_parts();
    assert_eq!(e, SendErrorKind::TooManyInFlight(CAP), "at the cap");
    // A send waits at the cap; the holder dies meanwhile (killed from
    // another thread once the send is under way: whichever comes first,
    // the send must end with `Disconnected`).
    let killer = std::thread::spawn(move || {
        kid.kill();
        kid
    });
    let (e, back) = ch.send_timeout(back, STEP).unwrap_err().into_parts();
    assert_eq!(e, SendErrorKind::Disconnected, "the wait saw the death");
    assert_eq!(back.len(), BUF, "the message comes back");
    let _kid = killer.join().expect("killer");
    assert!(!ch.check_peer());
    let (e, _) = ch.try_send(back).unwrap_err().into_parts();
    assert_eq!(e, SendErrorKind::Disconnected, "and every send after it");
    assert_eq!(ch.stats().held_by_peer, 0);
    assert_eq!(
        pool.stats().buffers_in_use,
        0,
        "the holder's buffers are back"
    );
}

#[test]
fn killed_originator_leaves_receiver_with_readable_buffers() {
    let sock = SockPath::new("death-orig");
    let listener = Listener::bind(sock.path(), ChannelConfig::default()).expect("bind");
    let mut kid = Kid::spawn(
        "child_originator",
        "death-originator",
        &[("SOCK", sock.arg())],
    );
    let ch = listener.accept_timeout(STEP).expect("accept");
    assert_eq!(kid.ask("send 0 6"), "sent 6");
    let mut held: Vec<(u64, Msg)> = (0..6)
        .map(|i| (i, ch.recv_timeout(STEP).expect("recv")))
        .collect();
    // Six more stay queued in the ring (regions not yet attached by us).
    assert_eq!(kid.ask("send 6 6"), "sent 6");
    kid.kill();
    for i in 6..12 {
        held.push((
            i,
            ch.recv_timeout(STEP)
                .expect("queued before the death: still delivered"),
        ));
    }
    assert_eq!(ch.recv_timeout(STEP).unwrap_err(), RecvError::Disconnected);
    assert!(ch.is_disconnected());
    let mut slices = 0;
    for (i, m) in &held {
        assert_eq!(m.len(), len_of(*i));
        assert!(
            common::first_mismatch(&m.to_vec(), *i, 0).is_none(),
            "message {i} intact after its owner died"
        );
        assert_eq!(m.is_secured(), i % 3 == 2, "message {i}");
        slices += m.slice_count() as u64;
    }
    drop(held);
    let st = ch.stats();
    assert_eq!((st.notices_dropped, st.notices_sent), (slices, 0), "{st:?}");
}

fn len_of(i: u64) -> usize {
    [1, 70_000, 5000, 300_000][i as usize % 4]
}

#[test]
fn access_policy_refuses_uids_not_listed() {
    let (sock, listener) = refusing_listener("death-acl");
    let mut kid = Kid::spawn(
        "child_connector",
        "death-connector",
        &[("SOCK", sock.arg())],
    );
    assert!(matches!(
        listener.accept_timeout(STEP),
        Err(ConnectError::Refused)
    ));
    assert_refused(kid.next_report());
    kid.finish();
}

/// A listener whose access policy admits only a uid that is not ours.
fn refusing_listener(tag: &str) -> (SockPath, Listener) {
    let me = rustix::process::geteuid().as_raw();
    let cfg = ChannelConfig {
        access: AccessPolicy::uids([me.wrapping_add(4242)]),
        ..ChannelConfig::default()
    };
    let sock = SockPath::new(tag);
    let listener = Listener::bind(sock.path(), cfg).expect("bind");
    (sock, listener)
}

/// The connector must not get a channel, and must be told why.
fn assert_refused(report: String) {
    assert_eq!(report, "connect Refused");
}

/// The connector side of a refusal must be `ConnectError::Refused`.
#[test]
fn refused_connector_is_told_refused() {
    let (sock, listener) = refusing_listener("death-acl2");
    for _ in 0..3 {
        let mut kid = Kid::spawn(
            "child_connector",
            "death-connector",
            &[("SOCK", sock.arg())],
        );
        assert!(matches!(
            listener.accept_timeout(STEP),
            Err(ConnectError::Refused)
        ));
        assert_eq!(kid.next_report(), "connect Refused");
        kid.finish();
    }
}

#[test]
fn default_policy_refuses_another_uid() {
    let nobody = 65534;
    if let Some(why) = common::exec_as_blocker(nobody) {
        println!("skipped: {why}");
        return;
    }
    let sock = SockPath::new("death-uid");
    let listener = Listener::bind(sock.path(), ChannelConfig::default()).expect("bind");
    // Let the filesystem admit anyone, so the refusal is the policy's.
    std::fs::set_permissions(sock.path(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod socket");
    let mut kid = Kid::spawn_with(
        "child_connector",
        "death-connector",
        &[("SOCK", sock.arg())],
        |c| {
            c.uid(nobody).gid(nobody);
        },
    );
    assert!(matches!(
        listener.accept_timeout(STEP),
        Err(ConnectError::Refused)
    ));
    assert_refused(kid.next_report());
    kid.finish();
    // Control: the same listener still accepts our own uid.
    let mut kid = Kid::spawn(
        "child_connector",
        "death-connector",
        &[("SOCK", sock.arg())],
    );
    let ch = listener.accept_timeout(STEP).expect("same uid accepted");
    assert_eq!(kid.next_report(), "connect ok");
    assert_eq!(ch.peer().uid, 0);
    kid.send("exit");
    kid.finish();
}

#[test]
#[ignore = "child process entry point"]
fn child_holder() {
    if common::child_role("death-holder").is_none() {
        return;
    }
    let ch = Channel::connect(common::arg("SOCK"), ChannelConfig::default()).expect("connect");
    let mut held = Vec::new();
    while let Some(cmd) = common::command() {
        let n: usize = cmd
            .strip_prefix("hold ")
            .and_then(|n| n.parse().ok())
            .expect("hold N");
        let mut ok = true;
        for _ in 0..n {
            let m = ch.recv_timeout(STEP).expect("recv");
            ok &= m.len() == BUF;
            held.push(m);
        }
        common::report(format_args!("holding {} ok={ok}", held.len()));
    }
}

#[test]
#[ignore = "child process entry point"]
fn child_originator() {
    if common::child_role("death-originator").is_none() {
        return;
    }
    let ch = Channel::connect(common::arg("SOCK"), ChannelConfig::default()).expect("connect");
    let pool = common::small_pool("death-orig", 64 << 10, 16);
    let unc = Uncached::new("death-orig-u", false);
    let mut sent = Vec::new();
    while let Some(cmd) = common::command() {
        let mut it = cmd
            .split(' ')
            .skip(1)
            .map(|v| v.parse::<u64>().expect("number"));
        let (from, n) = (it.next().expect("from"), it.next().expect("n"));
        for i in from..from + n {
            let len = len_of(i);
            let m = match i % 3 {
                2 => {
                    let mut b = unc.alloc_secured(len).expect("secured");
                    common::fill(b.as_mut_slice(), i, 0);
                    Msg::from(b.freeze().expect("seal"))
                }
                1 if len > 1 => {
                    let (mut a, b) = filled(&pool, i, len)
                        .split_at(len / 3)
                        .map_err(|e| e.into_parts().0)
                        .expect("split");
                    a.join(b).expect("join");
                    a
                }
                _ => filled(&pool, i, len),
            };
            sent.push(m.clone());
            ch.send(m).expect("send");
        }
        common::report(format_args!("sent {n}"));
    }
}

#[test]
#[ignore = "child process entry point"]
fn child_connector() {
    if common::child_role("death-connector").is_none() {
        return;
    }
    match Channel::connect(common::arg("SOCK"), ChannelConfig::default()) {
        Ok(_ch) => {
            common::report("connect ok");
            common::expect_command("exit");
        }
        Err(e) => common::report(format_args!("connect {e:?}")),
    }
}
