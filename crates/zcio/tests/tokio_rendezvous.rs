//! Async rendezvous endpoints (feature `tokio`) across real processes: an
//! async server answering a blocking caller, an async caller against a
//! blocking server, receives cancelled at random points with every message
//! accounted for, an unanswered async send retracted at its timeout, and
//! SIGKILL of the partner while a task awaits. Every wait is bounded; the
//! children run under `Kid`'s watchdog.

mod common;

use std::future::poll_fn;
use std::pin::Pin;
use std::time::Duration;

use common::cancel::ends_after_kill;
use common::ring::Rng;
use common::{Kid, SockPath, STEP};
use futures_core::Stream;
use zcio::rendezvous::{
    Envelope, Rendezvous, RendezvousConfig, RendezvousListener, RendezvousRecvError,
    RendezvousSendError,
};
use zcio::tokio::AsyncRendezvous;

const CALLS: u64 = 1000;

fn bounded_cfg() -> RendezvousConfig {
    RendezvousConfig {
        send_timeout: STEP,
        recv_timeout: STEP,
        ..RendezvousConfig::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The parent listens; the child connects and plays `role`.
fn serve(tag: &str, role: &str) -> (SockPath, Kid, Rendezvous) {
    let sock = SockPath::new(tag);
    let l = RendezvousListener::bind(sock.path())
        .expect("bind")
        .with_config(bounded_cfg());
    let kid = Kid::spawn("child", role, &[("SOCK", sock.arg())]);
    let ep = l.accept_timeout(STEP).expect("accept");
    (sock, kid, ep)
}

#[test]
fn an_async_server_answers_every_call_of_a_blocking_caller() {
    let (_s, mut kid, ep) = serve("ardv-server", "blocking-caller");
    runtime().block_on(async {
        let ep = AsyncRendezvous::new(ep).expect("async");
        for i in 0..CALLS {
            let m = ep.recv().await.expect("request");
            assert_eq!(m.words, [i, i]);
            ep.send(&Envelope::new(m.label, &[2 * i]))
                .await
                .expect("answer");
        }
    });
    assert_eq!(kid.expect("done"), format!("sum={}", CALLS * (CALLS - 1)));
    kid.send("exit");
    kid.finish();
}

#[test]
fn an_async_caller_gets_every_answer_of_a_blocking_server() {
    let (_s, mut kid, ep) = serve("ardv-caller", "async-caller");
    for i in 0..CALLS {
        let m = ep.recv_timeout(STEP).expect("request");
        assert_eq!(m.words, [i, i]);
        ep.send(&Envelope::new(m.label, &[2 * i])).expect("answer");
    }
    assert_eq!(kid.expect("done"), format!("sum={}", CALLS * (CALLS - 1)));
    kid.send("exit");
    kid.finish();
}

#[test]
fn receives_cancelled_at_random_points_lose_no_message() {
    let (_s, mut kid, ep) = serve("ardv-cancel", "blocking-sender");
    kid.send("send 2000");
    runtime().block_on(async {
        let ep = AsyncRendezvous::new(ep).expect("async");
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let (mut next, mut cancelled) = (0u64, 0u64);
        while next < 2000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let delay = Duration::from_micros(rng % 60);
            match tokio::time::timeout(delay, ep.recv()).await {
                Ok(m) => {
                    assert_eq!(m.expect("recv").words, [next], "lost or reordered");
                    next += 1;
                }
                Err(_) => cancelled += 1,
            }
        }
        eprintln!("2000 received, {cancelled} receives cancelled");
    });
    assert_eq!(kid.expect("sent"), "2000");
    kid.send("exit");
    kid.finish();
}

#[test]
fn an_unanswered_async_send_is_retracted_at_its_timeout() {
    let (_s, mut kid, ep) = serve("ardv-retract", "blocking-sender");
    runtime().block_on(async {
        let ep = AsyncRendezvous::new(ep).expect("async");
        let r = ep
            .send_timeout(&Envelope::new(5, &[1]), Duration::from_millis(30))
            .await;
        assert_eq!(r, Err(RendezvousSendError::TimedOut));
        // The partner never sees the retracted message, but the next one.
        kid.send("recv-one");
        ep.send(&Envelope::new(6, &[2])).await.expect("send");
    });
    assert_eq!(kid.expect("got"), "label=6 words=[2]");
    kid.send("exit");
    kid.finish();
}

#[test]
fn a_partner_killed_while_a_task_awaits_ends_it_with_disconnected() {
    let (_s, mut kid, ep) = serve("ardv-kill", "blocking-sender");
    runtime().block_on(async {
        let ep = AsyncRendezvous::new(ep).expect("async");
        let after = Duration::from_millis(20);
        let r = ends_after_kill(
            "receive after kill",
            after,
            || {
                kid.kill();
            },
            ep.recv(),
        )
        .await;
        assert_eq!(r.unwrap_err(), RendezvousRecvError::Disconnected);
        // And a send to the dead partner fails at once.
        assert_eq!(
            ep.send(&Envelope::new(1, &[1])).await,
            Err(RendezvousSendError::Disconnected)
        );
    });
}

/// Rounds of [`receives_cancelled_at_random_points_still_end_when_the_partner_is_killed`].
const KILL_ROUNDS: u64 = 60;

#[test]
fn receives_cancelled_at_random_points_still_end_when_the_partner_is_killed() {
    // Every receive is given up after at most 2 ms while the partner is
    // killed at a random point: the task must still end with
    // `Disconnected` (see the tokio doorbell's paced looks).
    let mut rng = Rng::new(0x6a09_e667_f3bc_c909);
    let mut cancelled = 0u64;
    for round in 0..KILL_ROUNDS {
        let (_s, mut kid, ep) = serve("ardv-kill-cancel", "blocking-sender");
        let kill_after = Duration::from_micros(rng.below(20_000));
        let spread = 1 + rng.below(2_000);
        runtime().block_on(async {
            let ep = AsyncRendezvous::new(ep).expect("async");
            let receiving = async {
                loop {
                    let delay = Duration::from_micros(rng.below(spread));
                    tokio::select! {
                        r = ep.recv() => return r,
                        _ = tokio::time::sleep(delay) => cancelled += 1,
                    }
                }
            };
            let what = format!("round {round}: receive after the kill");
            let r = ends_after_kill(
                &what,
                kill_after,
                || {
                    kid.kill();
                },
                receiving,
            )
            .await;
            assert_eq!(
                r.unwrap_err(),
                RendezvousRecvError::Disconnected,
                "round {round}"
            );
        });
    }
    eprintln!("{KILL_ROUNDS} kills, {cancelled} receives cancelled");
}

// ------------------------------------------------------------------ children

#[test]
#[ignore = "child process entry point"]
fn child() {
    for role in ["blocking-caller", "async-caller", "blocking-sender"] {
        if common::child_role(role).is_some() {
            run_child(role);
            return;
        }
    }
}

fn run_child(role: &str) {
    let ep = Rendezvous::connect(common::arg("SOCK"))
        .expect("connect")
        .with_config(bounded_cfg());
    match role {
        "blocking-caller" => {
            let mut sum = 0;
            for i in 0..CALLS {
                let r = ep.call(&Envelope::new(1, &[i, i])).expect("call");
                sum += r.words[0];
            }
            common::report(format_args!("done sum={sum}"));
        }
        "async-caller" => {
            let sum = runtime().block_on(async {
                let ep = AsyncRendezvous::new(ep).expect("async");
                let mut sum = 0;
                for i in 0..CALLS {
                    let r = ep.call(&Envelope::new(1, &[i, i])).await.expect("call");
                    sum += r.words[0];
                }
                sum
            });
            common::report(format_args!("done sum={sum}"));
            common::expect_command("exit");
            return;
        }
        _ => {}
    }
    while let Some(cmd) = common::command() {
        match cmd.split(' ').collect::<Vec<_>>().as_slice() {
            ["send", n] => {
                let n: u64 = n.parse().expect("count");
                for i in 0..n {
                    ep.send(&Envelope::new(1, &[i])).expect("send");
                }
                common::report(format_args!("sent {n}"));
            }
            ["recv-one"] => {
                let m = ep.recv().expect("recv");
                common::report(format_args!("got label={} words={:?}", m.label, m.words));
            }
            ["exit"] => break,
            other => panic!("unknown command {other:?}"),
        }
    }
}

#[test]
fn the_stream_yields_every_message_then_ends_when_the_partner_goes() {
    let (_s, mut kid, ep) = serve("ardv-stream", "blocking-sender");
    kid.send("send 300");
    kid.send("exit");
    runtime().block_on(async {
        let mut ep = AsyncRendezvous::new(ep).expect("async");
        let mut n = 0;
        while let Some(m) =
            tokio::time::timeout(STEP, poll_fn(|cx| Pin::new(&mut ep).poll_next(cx)))
                .await
                .expect("bounded")
        {
            assert_eq!(m.expect("recv").words, [n]);
            n += 1;
        }
        assert_eq!(n, 300);
    });
    assert_eq!(kid.expect("sent"), "300");
    kid.finish();
}
