//! Async ring ends (feature `tokio`) across real processes: an async
//! consumer reading every block of a blocking producer, then the end of the
//! stream; an async producer waiting (`Block`) for a slow blocking
//! consumer; reads cancelled at random points with every block accounted
//! for; a producer killed (SIGKILL) or failing while the task awaits. Every
//! wait is bounded; children run under `Kid`'s watchdog.

mod common;

use std::future::poll_fn;
use std::pin::Pin;
use std::time::Duration;

use common::cancel::ends_after_kill;
use common::ring::Rng;
use common::ring::{block, check_block, close, count, parse_end, reader, writer, RingDir};
use common::STEP;
use futures_core::Stream;
use zcio::ring::{Consumer, Layout, Options, Overflow, Producer, ReadError, RingMap, Start};
use zcio::tokio::{AsyncConsumer, AsyncProducer};

ring_child_entry_points!();

fn new_ring(tag: &str, size: u64) -> (RingDir, String) {
    let dir = RingDir::new(tag);
    let name = dir.name("r");
    drop(
        Options::new()
            .layout(Layout::Variable)
            .overflow(Overflow::Block)
            .size(size)
            .create(&name)
            .expect("create"),
    );
    (dir, name)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn consumer(name: &str) -> Consumer {
    Consumer::attach(RingMap::open(name, true).expect("open"), Start::Newest).expect("attach")
}

/// `fut`, failing the test if it takes longer than `STEP`.
async fn bounded<F: std::future::Future>(what: &str, fut: F) -> F::Output {
    tokio::time::timeout(STEP, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: no result within {STEP:?}"))
}

#[test]
fn an_async_consumer_reads_every_block_of_a_blocking_producer_then_the_end() {
    let (dir, name) = new_ring("aring-read", 64 << 10);
    let c = consumer(&name);
    let mut w = writer(&dir, &name, 4000, 1, &[]);
    runtime().block_on(async {
        let mut c = AsyncConsumer::new(c).expect("async");
        w.send("write 3000");
        let mut buf = vec![0u8; 1 << 16];
        for i in 0..3000 {
            let n = bounded("read", c.read(&mut buf)).await.expect("read");
            assert_eq!(check_block(&buf[..n]), Ok(i));
        }
        assert_eq!(w.next_report(), "wrote total=3000");
        close(w);
        assert_eq!(
            bounded("end", c.read(&mut buf)).await,
            Ok(0),
            "end of stream"
        );
    });
}

#[test]
fn an_async_producer_waits_for_a_slow_blocking_consumer() {
    let (dir, name) = new_ring("aring-write", 16 << 10);
    let p = Producer::attach(RingMap::open(&name, true).expect("open")).expect("producer");
    let (mut r, _slot) = reader(&dir, &name, &[("FIRST", "0")]);
    let rt = runtime();
    let p = rt.block_on(async {
        let mut p = AsyncProducer::new(p).expect("async");
        // 3000 blocks of up to 4000 bytes through a 16 KiB ring: the
        // producer waits for the reader most of the time.
        for i in 0..3000 {
            let b = block(i, 4000);
            bounded("write", p.write(&b)).await.expect("write");
        }
        p
    });
    // Everything arrived while the producer is still there (its close
    // would end the reader's stream).
    assert_eq!(count(&mut r, "until 3000"), 3000);
    drop(p);
    assert_eq!(r.next_report(), "end eof count=3000");
}

#[test]
fn reads_cancelled_at_random_points_lose_no_block() {
    let (dir, name) = new_ring("aring-cancel", 16 << 10);
    let c = consumer(&name);
    let mut w = writer(&dir, &name, 2000, 1, &[]);
    runtime().block_on(async {
        let mut c = AsyncConsumer::new(c).expect("async");
        w.send("write 2000");
        let mut rng = 0x853c_49e6_748f_ea9bu64;
        let mut buf = vec![0u8; 1 << 16];
        let (mut next, mut cancelled) = (0u64, 0u64);
        while next < 2000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let delay = Duration::from_micros(rng % 50);
            let got = if rng.is_multiple_of(2) {
                tokio::time::timeout(delay, c.read(&mut buf))
                    .await
                    .ok()
                    .map(|r| r.expect("read"))
            } else {
                match tokio::time::timeout(delay, c.peek(1 << 16)).await {
                    Ok(p) => {
                        let p = p.expect("peek").expect("not the end");
                        let n = p.len();
                        p.view().copy_to_slice(&mut buf[..n]);
                        p.release().expect("intact under Block");
                        Some(n)
                    }
                    Err(_) => None,
                }
            };
            match got {
                Some(n) => {
                    assert_eq!(check_block(&buf[..n]), Ok(next), "lost or reordered");
                    next += 1;
                }
                None => cancelled += 1,
            }
        }
        eprintln!("2000 blocks, {cancelled} reads cancelled");
    });
    assert_eq!(w.next_report(), "wrote total=2000");
    close(w);
}

#[test]
fn a_producer_killed_mid_stream_ends_the_awaited_read_with_disconnected() {
    let (dir, name) = new_ring("aring-kill", 64 << 10);
    let c = consumer(&name);
    let mut w = writer(&dir, &name, 1000, 1, &[]);
    runtime().block_on(async {
        let mut c = AsyncConsumer::new(c).expect("async");
        assert_eq!(w.ask("write 10"), "wrote total=10");
        let mut buf = vec![0u8; 1 << 16];
        for i in 0..10 {
            let n = bounded("read", c.read(&mut buf)).await.expect("read");
            assert_eq!(check_block(&buf[..n]), Ok(i));
        }
        w.kill();
        let r = bounded("read after the kill", c.read(&mut buf)).await;
        assert!(
            matches!(r, Err(ReadError::Disconnected { .. })),
            "a dead producer is not an end of stream: {r:?}"
        );
    });
}

#[test]
fn a_producer_failing_is_reported_to_the_awaiting_reader_after_the_data() {
    let (dir, name) = new_ring("aring-fail", 64 << 10);
    let c = consumer(&name);
    let mut w = writer(&dir, &name, 1000, 1, &[]);
    runtime().block_on(async {
        let mut c = AsyncConsumer::new(c).expect("async");
        let mut buf = vec![0u8; 1 << 16];
        let reading = async {
            let mut n = 0;
            loop {
                match c.read(&mut buf).await {
                    Ok(len) => {
                        assert_eq!(check_block(&buf[..len]), Ok(n));
                        n += 1;
                    }
                    Err(e) => return (n, e),
                }
            }
        };
        let failing = async {
            assert_eq!(w.ask("write 5"), "wrote total=5");
            w.send("fail 7");
        };
        let ((n, e), ()) = bounded("read to the failure", async {
            tokio::join!(reading, failing)
        })
        .await;
        assert_eq!(n, 5);
        assert!(
            matches!(e, ReadError::ProducerFailed { code: 7, .. }),
            "{e:?}"
        );
    });
    assert_eq!(w.next_report(), "closed");
    w.finish();
}

#[test]
fn a_consumer_killed_while_the_async_producer_waits_for_it_is_evicted() {
    let (dir, name) = new_ring("aring-evict", 16 << 10);
    let p = Producer::attach(RingMap::open(&name, true).expect("open")).expect("producer");
    // A reader that never reads: the ring fills up.
    let (mut r, _slot) = reader(&dir, &name, &[("FIRST", "0"), ("PAUSED", "1")]);
    runtime().block_on(async {
        let mut p = AsyncProducer::new(p).expect("async");
        let mut i = 0;
        while p.producer().try_write(&block(i, 4000)).is_ok() {
            i += 1;
        }
        let b = block(i, 4000);
        let write = p.write(&b);
        let after = Duration::from_millis(20);
        let done = ends_after_kill(
            "write after the kill",
            after,
            || {
                r.kill();
            },
            write,
        )
        .await;
        assert_eq!(done.expect("the dead reader was evicted"), b.len());
        assert_eq!(p.producer().consumers(), 0);
    });
}

/// Rounds of the two "cancelled at random points" kill tests.
const KILL_ROUNDS: u64 = 40;

#[test]
fn reads_cancelled_at_random_points_still_end_when_the_producer_is_killed() {
    // Every wait for the next block is given up after at most 2 ms, far
    // less than the 50 ms after which a waiter looks at a producer that
    // rings no bell: the look must come anyway (it used to restart with
    // each new wait, so a dead producer was never found).
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut cancelled = 0u64;
    for round in 0..KILL_ROUNDS {
        let (dir, name) = new_ring("aring-kill-cancel", 64 << 10);
        let c = consumer(&name);
        let mut w = writer(&dir, &name, 1000, 1, &[]);
        assert_eq!(w.ask("write 3"), "wrote total=3");
        let kill_after = Duration::from_micros(rng.below(100_000));
        let spread = 1 + rng.below(2_000);
        runtime().block_on(async {
            let mut c = AsyncConsumer::new(c).expect("async");
            let mut buf = vec![0u8; 1 << 16];
            let mut read = 0u64;
            let reading = async {
                loop {
                    let delay = Duration::from_micros(rng.below(spread));
                    tokio::select! {
                        r = c.read(&mut buf) => match r {
                            Ok(n) => {
                                assert_eq!(check_block(&buf[..n]), Ok(read), "round {round}");
                                read += 1;
                            }
                            Err(e) => return e,
                        },
                        _ = tokio::time::sleep(delay) => cancelled += 1,
                    }
                }
            };
            let what = format!("round {round}: read after the kill");
            let e = ends_after_kill(
                &what,
                kill_after,
                || {
                    w.kill();
                },
                reading,
            )
            .await;
            assert!(
                matches!(e, ReadError::Disconnected { .. }),
                "round {round}: a dead producer is not an end of stream: {e:?}"
            );
            assert_eq!(read, 3, "round {round}: every block before the kill");
        });
    }
    eprintln!("{KILL_ROUNDS} kills, {cancelled} reads cancelled");
}

#[test]
fn writes_cancelled_at_random_points_still_end_when_the_reader_is_killed() {
    let mut rng = Rng::new(0x2545_f491_4f6c_dd1d);
    let mut cancelled = 0u64;
    for round in 0..KILL_ROUNDS {
        let (dir, name) = new_ring("aring-evict-cancel", 16 << 10);
        let p = Producer::attach(RingMap::open(&name, true).expect("open")).expect("producer");
        let (mut r, _slot) = reader(&dir, &name, &[("FIRST", "0"), ("PAUSED", "1")]);
        let kill_after = Duration::from_micros(rng.below(100_000));
        let spread = 1 + rng.below(2_000);
        runtime().block_on(async {
            let mut p = AsyncProducer::new(p).expect("async");
            let mut i = 0;
            while p.producer().try_write(&block(i, 4000)).is_ok() {
                i += 1;
            }
            let b = block(i, 4000);
            let writing = async {
                loop {
                    let delay = Duration::from_micros(rng.below(spread));
                    tokio::select! {
                        w = p.write(&b) => return w,
                        _ = tokio::time::sleep(delay) => cancelled += 1,
                    }
                }
            };
            let what = format!("round {round}: write after the kill");
            let done = ends_after_kill(
                &what,
                kill_after,
                || {
                    r.kill();
                },
                writing,
            )
            .await;
            assert_eq!(done.expect("the dead reader was evicted"), b.len());
        });
    }
    eprintln!("{KILL_ROUNDS} kills, {cancelled} writes cancelled");
}

#[test]
fn the_consumer_stream_yields_every_block_then_ends() {
    let (dir, name) = new_ring("aring-stream", 16 << 10);
    let c = consumer(&name);
    let mut w = writer(&dir, &name, 3000, 1, &[]);
    w.send("write 500");
    w.send("close");
    runtime().block_on(async {
        let mut c = AsyncConsumer::new(c).expect("async");
        let mut n = 0;
        while let Some(b) = bounded("stream", poll_fn(|cx| Pin::new(&mut c).poll_next(cx))).await {
            assert_eq!(check_block(&b.expect("block")), Ok(n));
            n += 1;
        }
        assert_eq!(n, 500, "every block, then the end");
    });
    assert_eq!(w.next_report(), "wrote total=500");
    assert_eq!(w.next_report(), "closed");
    w.finish();
}

/// Silent peers in other processes: the async waits end with `TimedOut`
/// at the end's configured wait bound (200 ms here), and the stream yields
/// a `TimedOut` item, then goes on to the blocks written later.
#[test]
fn silent_peers_bound_the_async_default_waits() {
    let short = Duration::from_millis(200);
    let (dir, name) = new_ring("aring-silent", 16 << 10);
    let mut c = consumer(&name);
    c.set_wait_bound(short);
    let mut w = writer(&dir, &name, 3000, 1, &[]);
    runtime().block_on(async {
        let mut c = AsyncConsumer::new(c).expect("async");
        let mut buf = vec![0u8; 4096];
        assert_eq!(
            bounded("read", c.read(&mut buf)).await,
            Err(ReadError::TimedOut)
        );
        assert!(matches!(
            bounded("peek", c.peek(4096)).await,
            Err(ReadError::TimedOut)
        ));
        let item = bounded("stream", poll_fn(|cx| Pin::new(&mut c).poll_next(cx))).await;
        assert!(matches!(item, Some(Err(ReadError::TimedOut))), "{item:?}");
        w.send("write 1");
        let item = bounded("stream", poll_fn(|cx| Pin::new(&mut c).poll_next(cx))).await;
        assert_eq!(
            check_block(&item.expect("an item").expect("a block")),
            Ok(0)
        );
    });
    assert_eq!(w.next_report(), "wrote total=1");
    close(w);

    let p = Producer::attach(RingMap::open(&name, true).expect("open")).expect("producer");
    let (mut r, _) = reader(&dir, &name, &[("FIRST", "0"), ("PAUSED", "1")]);
    let n = runtime().block_on(async {
        let mut p = AsyncProducer::new(p).expect("async");
        p.producer().set_wait_bound(short);
        let mut n = 0u64;
        let e = loop {
            match bounded("write", p.write(&block(n, 3000))).await {
                Ok(_) => n += 1,
                Err(e) => break e,
            }
            assert!(n < 10_000, "the ring never filled");
        };
        assert_eq!(e, zcio::ring::WriteError::TimedOut);
        assert_eq!(
            bounded("writable", p.writable(3000)).await,
            Err(zcio::ring::WriteError::TimedOut)
        );
        n
    });
    // The producer is gone (closed): the reader gets every block, then the end.
    r.send("go");
    assert_eq!(parse_end(&r.next_report()), ("eof".into(), n));
    r.finish();
}
