//! The synchronous rendezvous endpoint across real processes: calls and
//! replies with the partner identified by the kernel, kill -9 of either
//! side while the other waits, and a hostile partner scribbling over the
//! shared slots.

mod common;

use std::time::Duration;

use common::{Kid, SockPath, STEP};
use zcio::rendezvous::{
    Envelope, Rendezvous, RendezvousCallError, RendezvousConfig, RendezvousListener,
    RendezvousRecvError, RendezvousSendError,
};

const CALLS: u64 = 1000;

/// Child: connect to `SOCK`, make `CALLS` calls (`[i, i]` → `[2i]`), report.
#[test]
#[ignore = "child process entry point"]
fn child_caller() {
    if common::child_role("rdv-caller").is_none() {
        return;
    }
    let c = Rendezvous::connect(common::arg("SOCK"))
        .expect("connect")
        .with_config(RendezvousConfig {
            send_timeout: STEP,
            recv_timeout: STEP,
            ..RendezvousConfig::default()
        });
    let mut sum = 0;
    for i in 0..CALLS {
        let r = c.call(&Envelope::new(1, &[i, i])).expect("call");
        assert_eq!(r.words, vec![2 * i]);
        sum += r.words[0];
    }
    common::report(format_args!("done sum={sum}"));
    // Stay connected until told, then call once more and block in the
    // receive for as long as it takes (the parent kills us).
    common::expect_command("block");
    let _ = c.call_timeout(&Envelope::new(9, &[0]), Duration::MAX);
}

/// Child: accept one connection on `SOCK`, take one call, never answer.
#[test]
#[ignore = "child process entry point"]
fn child_silent_server() {
    if common::child_role("rdv-silent").is_none() {
        return;
    }
    let l = RendezvousListener::bind(common::arg("SOCK")).expect("bind");
    common::report("listening");
    let s = l.accept().expect("accept");
    let m = s.recv_timeout(STEP).expect("receive");
    common::report(format_args!("took label={}", m.label));
    let _ = common::command(); // block until killed
}

/// Child: connect to `SOCK`, then scribble random words over the shared
/// page (found through /proc/self/maps) until told to stop.
#[test]
#[ignore = "child process entry point"]
fn child_scribbler() {
    if common::child_role("rdv-scribbler").is_none() {
        return;
    }
    let _c = Rendezvous::connect(common::arg("SOCK")).expect("connect");
    let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
    let line = maps
        .lines()
        .find(|l| l.contains("zcio-rendezvous"))
        .expect("segment mapping");
    let start = usize::from_str_radix(line.split('-').next().unwrap(), 16).unwrap();
    common::report("scribbling");
    let t = std::thread::spawn(move || {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2_000_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let off = (x as usize % 384) & !7;
            // `start` is our own mapping of the shared page (4096 bytes,
            // found above); `off` < 384 is 8-aligned and inside it. Writing
            // garbage there is the point of this hostile peer.
            // SAFETY: as argued just above.
            unsafe { ((start + off) as *mut u64).write_volatile(x) };
        }
    });
    t.join().unwrap();
    common::report("scribbled");
    let _ = common::command();
}

#[test]
fn calls_across_processes_with_kernel_identity() {
    let sock = SockPath::new("rdv-call");
    let l = RendezvousListener::bind(sock.path()).expect("bind");
    let mut kid = Kid::spawn("child_caller", "rdv-caller", &[("SOCK", sock.arg())]);
    let s = l.accept().expect("accept");
    assert_eq!(
        s.peer().pid,
        kid.pid() as i32,
        "identity comes from the kernel"
    );
    let (_, mut m) = Rendezvous::recv_any_timeout(&[&s], STEP).expect("first call");
    for _ in 1..CALLS {
        let reply = Envelope::new(2, &[m.words[0] + m.words[1]]);
        m = s
            .reply_and_recv_timeout(&reply, &[&s], STEP)
            .expect("serve")
            .1;
    }
    s.send_timeout(&Envelope::new(2, &[m.words[0] + m.words[1]]), STEP)
        .expect("last reply");
    assert_eq!(kid.expect("done sum="), (CALLS * (CALLS - 1)).to_string());
    // kill -9 the caller while it waits for our answer: our next receive
    // and send report Disconnected (bounded), not a hang.
    kid.send("block");
    let m = s.recv_timeout(STEP).expect("blocking call");
    assert_eq!(m.label, 9);
    kid.kill();
    let forever = Duration::MAX;
    assert_eq!(
        s.send_timeout(&Envelope::new(0, &[1]), forever),
        Err(RendezvousSendError::Disconnected)
    );
    assert_eq!(
        s.recv_timeout(forever).unwrap_err(),
        RendezvousRecvError::Disconnected
    );
    assert_eq!(s.try_recv().unwrap_err(), RendezvousRecvError::Disconnected);
}

#[test]
fn killed_server_ends_a_blocked_call() {
    let sock = SockPath::new("rdv-silent");
    let mut kid = Kid::spawn("child_silent_server", "rdv-silent", &[("SOCK", sock.arg())]);
    assert_eq!(kid.next_report(), "listening");
    let c = Rendezvous::connect(sock.path()).expect("connect");
    assert_eq!(c.peer().pid, kid.pid() as i32);
    let killer = std::thread::spawn(move || {
        assert_eq!(kid.next_report(), "took label=7");
        kid.kill();
    });
    // The server takes the call and dies without answering: the call's
    // receive (an unbounded wait) ends with Disconnected.
    let r = c.call_timeout(&Envelope::new(7, &[1]), Duration::MAX);
    assert!(
        matches!(
            r,
            Err(RendezvousCallError::Recv(RendezvousRecvError::Disconnected))
        ),
        "{r:?}"
    );
    killer.join().unwrap();
}

/// A partner that takes one message and then neither answers nor takes
/// another: every default wait (`recv`, `recv_any`, `send`, `call`) ends
/// with `TimedOut` at the endpoint's configured bound (200 ms here); a
/// listener nobody connects to ends `accept` at its `accept_timeout`.
#[test]
fn silent_partner_bounds_the_default_waits() {
    let short = Duration::from_millis(200);
    let quick = RendezvousConfig {
        send_timeout: short,
        recv_timeout: short,
        accept_timeout: short,
    };
    let sock = SockPath::new("rdv-bound");
    let mut kid = Kid::spawn("child_silent_server", "rdv-silent", &[("SOCK", sock.arg())]);
    assert_eq!(kid.next_report(), "listening");
    let c = Rendezvous::connect(sock.path())
        .expect("connect")
        .with_config(quick);
    c.send_timeout(&Envelope::new(7, &[1]), STEP)
        .expect("the partner takes one message");
    assert_eq!(kid.next_report(), "took label=7");
    assert_eq!(c.recv().unwrap_err(), RendezvousRecvError::TimedOut);
    assert_eq!(
        Rendezvous::recv_any(&[&c]).unwrap_err(),
        RendezvousRecvError::TimedOut
    );
    assert_eq!(
        c.send(&Envelope::new(8, &[2])),
        Err(RendezvousSendError::TimedOut)
    );
    assert!(
        matches!(
            c.call(&Envelope::new(9, &[3])),
            Err(RendezvousCallError::Send(RendezvousSendError::TimedOut))
        ),
        "the call's send ends at send_timeout"
    );
    kid.kill();

    let lonely = SockPath::new("rdv-lonely");
    let l = RendezvousListener::bind(lonely.path())
        .expect("bind")
        .with_config(quick);
    assert!(matches!(l.accept(), Err(zcio::ConnectError::TimedOut)));
}

#[test]
fn scribbling_partner_gets_typed_errors_not_hangs() {
    let sock = SockPath::new("rdv-scribble");
    let l = RendezvousListener::bind(sock.path()).expect("bind");
    let mut kid = Kid::spawn("child_scribbler", "rdv-scribbler", &[("SOCK", sock.arg())]);
    let s = l.accept().expect("accept");
    assert_eq!(kid.next_report(), "scribbling");
    let short = Duration::from_millis(5);
    let (mut ok, mut timed_out, mut protocol) = (0, 0, 0);
    for i in 0..400u64 {
        let r = if i % 2 == 0 {
            s.recv_timeout(short).map(|_| ()).map_err(zcio::Error::from)
        } else {
            s.send_timeout(&Envelope::new(i, &[i]), short)
                .map_err(zcio::Error::from)
        };
        match r {
            Ok(()) => ok += 1,
            Err(e) if e.kind() == zcio::ErrorKind::TimedOut => timed_out += 1,
            Err(e) if e.kind() == zcio::ErrorKind::Protocol => protocol += 1,
            Err(e) => panic!("unexpected error from a scribbled slot: {e}"),
        }
    }
    println!("scribbled slots: {ok} ok, {timed_out} timed out, {protocol} protocol errors");
    kid.send("stop");
    drop(kid);
}
