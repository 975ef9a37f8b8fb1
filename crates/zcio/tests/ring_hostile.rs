//! Hostile peers of a named ring (anyone who may write the file can write
//! any byte of it). Victims run in child processes and report what they
//! saw; each must exit normally (not by a signal, not by the watchdog):
//! (a) a peer scribbling over the consumer slots and the control line while
//!     an honest producer and consumer run: nobody hangs or crashes, and
//!     the consumer never returns a block the producer did not write;
//! (b) a hostile producer (attached normally) scribbling over the data area
//!     and descriptor ring and setting absurd head values: the consumer
//!     gets typed errors (or skips, under FRP), never out-of-bounds bytes,
//!     and every timed call returns;
//! (c) a peer truncating the ring file under a reader and the producer:
//!     errors instead of death by SIGBUS;
//! (d) index rings whose entries name missing, replaced or bogus rings:
//!     `ReadError::Source`, not a crash;
//! (e) silent peers (a producer that never writes, a consumer that never
//!     reads): the default waits end at the configured bound.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::ring::{
    block, block_len, check_block, close, count, num_after, parse_end, pump, reader, writer,
    RawRing, RingDir, Rng, CONTROL, HEAD_WORD, SLOTS, SLOTS_LEN, WRITE_END,
};
use common::{arg, report, Kid, STEP};
use zcio::ring::{
    self, Consumer, Geometry, Layout, Options, Overflow, Peek, Producer, ReadError, RichPtr,
    RingMap, SeekTo, Start, Wait,
};

const MAX: usize = 900;

fn opts(layout: Layout, overflow: Overflow) -> Options {
    Options::new()
        .layout(layout)
        .overflow(overflow)
        .size(64 << 10)
        .slot_size(1024)
        .entries(128)
}

fn spawn(dir: &RingDir, entry: &str, role: &str, args: &[(&str, String)]) -> Kid {
    dir.spawn(entry, role, args)
}

fn s(v: impl ToString) -> String {
    v.to_string()
}

// ------------------------------------------------- (a) scribbled slots

#[test]
fn scribbled_slots_and_control_line_neither_hang_nor_fool_anyone() {
    let dir = RingDir::new("hostile-slots");
    for (i, layout) in [Layout::Variable, Layout::Descriptors]
        .into_iter()
        .enumerate()
    {
        let name = dir.name(layout.name());
        drop(opts(layout, Overflow::Block).create(&name).expect("create"));
        let (mut honest, _) = reader(&dir, &name, &[("FIRST", "any"), ("KEEP", "1")]);
        let mut w = writer(&dir, &name, MAX, 1, &[]);
        // Writes wait at most 100 ms for room, so the writer keeps going
        // (and can be stopped) whatever the slots say.
        w.send("stream 100");
        assert!(count(&mut honest, "until 200") >= 200);
        let mut h = spawn(
            &dir,
            "child_scribbler",
            "ring-scribbler",
            &[
                ("RING", s(&name)),
                ("SEED", s(0x51075 + i)),
                ("ROUNDS", s(4000)),
            ],
        );
        assert_eq!(h.next_report(), "scribbled rounds=4000");
        h.finish();
        // Everyone is still responsive.
        honest.ask("count");
        w.send("stop");
        let r = w.expect("stopped total=");
        w.send("close");
        assert_eq!(w.next_report(), "closed", "writer after {r}");
        w.finish();
        honest.send("stop");
        let errors = honest.expect("errors");
        let (outcome, n) = parse_end(&honest.next_report());
        assert_eq!(
            outcome, "stopped",
            "{layout:?}: honest reader after {n} blocks; errors {errors}"
        );
        honest.finish();
        println!("{layout:?}: writer {r}; reader got {n} intact blocks, errors {errors}");
    }
}

/// Child: scribble over the control line and the consumer slots of `RING`.
#[test]
#[ignore = "child process entry point"]
fn child_scribbler() {
    if common::child_role("ring-scribbler").is_none() {
        return;
    }
    common::ring::child_ring_dir();
    let raw = RawRing::open(&arg("RING"));
    let mut rng = Rng::new(arg("SEED").parse().unwrap());
    let rounds: u64 = arg("ROUNDS").parse().unwrap();
    let regions = [(CONTROL, 128u64), (SLOTS, SLOTS_LEN)];
    for r in 0..rounds {
        let (base, len) = regions[rng.below(2) as usize];
        match rng.below(8) {
            // Random bytes over a random stretch.
            0 | 1 => {
                let off = rng.below(len);
                let n = (rng.below(64) + 1).min(len - off) as usize;
                raw.write_at(base + off, &rng.bytes(n));
            }
            // A random word.
            2 | 3 => raw.write_u64(base + rng.below(len / 8) * 8, rng.next_u64()),
            // A small word: plausible cursors, bitmaps, pids, states.
            4 | 5 => raw.write_u64(base + rng.below(len / 8) * 8, rng.below(1 << 16)),
            // A plausible owner word: a state and a random pid.
            6 => raw.write_u64(
                base + rng.below(len / 8) * 8,
                (rng.below(4) << 32) | rng.below(1 << 22),
            ),
            // The whole region.
            _ if r % 64 == 0 => raw.write_at(base, &rng.bytes(len as usize)),
            _ => {}
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    report(format_args!("scribbled rounds={rounds}"));
}

// ------------------------------------------- (b) hostile producer

/// What a victim consumer saw, summarised per kind.
#[derive(Default)]
struct Seen {
    kinds: BTreeMap<String, u64>,
    violations: Vec<String>,
}

impl Seen {
    fn note(&mut self, k: impl Into<String>) {
        *self.kinds.entry(k.into()).or_default() += 1;
    }

    fn error(&mut self, e: &ReadError) {
        let k = match e {
            ReadError::Corrupt(m) => format!("Corrupt({m})"),
            ReadError::BufferTooSmall { .. } => "BufferTooSmall".into(),
            ReadError::Disconnected { .. } => "Disconnected".into(),
            ReadError::Source(_) => "Source".into(),
            e => format!("{e:?}"),
        };
        self.note(k);
    }
}

/// Check a block handed out by `peek`: it must lie inside the data area's
/// double mapping and be no longer than a block can be.
fn check_peek(p: &Peek<'_>, base: usize, data_len: usize, max_block: u64, seen: &mut Seen) {
    let a = p.view().as_ptr() as usize;
    if a < base || a + p.len() > base + 2 * data_len || p.len() as u64 > max_block {
        seen.violations.push(format!(
            "peek of {} bytes at data offset {} (data area {data_len}, max block {max_block})",
            p.len(),
            a.wrapping_sub(base)
        ));
    }
    seen.note(if check_block(&p.to_vec()).is_ok() {
        "peek-valid"
    } else {
        "peek-garbage"
    });
}

/// Child: a consumer of `RING` facing a hostile producer. Alternates timed
/// reads and peeks until `stop`, then reports `done violations=N {kinds}`.
#[test]
#[ignore = "child process entry point"]
fn child_victim() {
    if common::child_role("ring-victim").is_none() {
        return;
    }
    common::ring::child_ring_dir();
    let mut c = Consumer::open(&arg("RING")).expect("attach");
    report(format_args!("attached slot={}", c.slot()));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let (st, d) = (stop.clone(), done.clone());
    let _rx = pump(move |cmd| {
        if cmd == "stop" {
            st.store(true, Ordering::SeqCst);
            common::ring::hang_guard(d.clone(), Duration::from_secs(10), "in read after stop");
            return true;
        }
        false
    });
    let g = *c.geometry();
    let base = c.ring().data(0) as usize;
    let mut buf = vec![0u8; 4096];
    let mut seen = Seen::default();
    let t = Duration::from_millis(20);
    let mut i = 0u64;
    while !stop.load(Ordering::SeqCst) {
        i += 1;
        if i.is_multiple_of(2) {
            match c.read_timeout(&mut buf, t) {
                Ok(0) => seen.note("eof"),
                Ok(n) if n > buf.len() => seen.violations.push(format!("read returned {n}")),
                Ok(n) => seen.note(if check_block(&buf[..n]).is_ok() {
                    "read-valid"
                } else {
                    "read-garbage"
                }),
                Err(e) => seen.error(&e),
            }
        } else {
            match c.peek_timeout(1 << 20, t) {
                Ok(None) => seen.note("eof"),
                Ok(Some(p)) => {
                    check_peek(&p, base, g.data_len as usize, g.max_block(), &mut seen);
                    if let Err(e) = p.release() {
                        seen.error(&e);
                    }
                }
                Err(e) => seen.error(&e),
            }
        }
        // Persistent errors come back at once: do not spin on them.
        std::thread::sleep(Duration::from_micros(100));
    }
    done.store(true, Ordering::SeqCst);
    report(format_args!(
        "done violations={} {:?} {:?}",
        seen.violations.len(),
        seen.violations.first(),
        seen.kinds
    ));
}

/// Child: the producer of `RING`, attached normally, that also writes
/// whatever it likes into the file. Commands: `valid N` (N honest blocks,
/// never waiting long), `chaos ROUNDS`, `forge` (a garbage block at the
/// head, published), `close`.
#[test]
#[ignore = "child process entry point"]
fn child_evil_writer() {
    if common::child_role("ring-evil-writer").is_none() {
        return;
    }
    common::ring::child_ring_dir();
    let name = arg("RING");
    let mut p = Producer::open(&name).expect("producer");
    let g = *p.geometry();
    let raw = RawRing::open(&name);
    let mut rng = Rng::new(arg("SEED").parse().unwrap());
    report(format_args!(
        "ready consumers={}",
        p.wait_for_consumers(1, STEP)
    ));
    let cap = g.cap();
    let unit = match g.layout {
        Layout::Slotted => g.slot_size,
        Layout::Variable => 16,
        _ => 1,
    };
    let mut seq = 0;
    let head = |raw: &RawRing| raw.read_u64(HEAD_WORD) >> 1;
    while let Some(cmd) = common::command() {
        let (verb, rest) = cmd.split_once(' ').unwrap_or((cmd.as_str(), ""));
        match verb {
            "valid" => {
                let n: u64 = rest.parse().unwrap();
                let mut ok = 0;
                for _ in 0..n {
                    if p.write_timeout(&block(seq, MAX), Duration::from_millis(200))
                        .is_ok()
                    {
                        ok += 1;
                    }
                    seq += 1;
                }
                report(format_args!("valid ok={ok}"));
            }
            "chaos" => {
                let rounds: u64 = rest.parse().unwrap();
                for _ in 0..rounds {
                    match rng.below(7) {
                        // Random bytes somewhere in the data area.
                        0 if g.data_len > 0 => {
                            let off = rng.below(g.data_len);
                            let n = (rng.below(512) + 1).min(g.data_len - off) as usize;
                            raw.write_at(g.head_len + off, &rng.bytes(n));
                        }
                        // A random or half-plausible descriptor.
                        1 if g.desc_len > 0 => {
                            let e = RichPtr {
                                ring_id: if rng.below(2) == 0 {
                                    g.ring_id
                                } else {
                                    rng.next_u64()
                                },
                                pos: rng.next_u64() >> rng.below(64),
                                offset: rng.next_u64() as u32 >> rng.below(32),
                                len: rng.next_u64() as u32 >> rng.below(32),
                                tag: 0,
                                _reserved: 0,
                            };
                            raw.write_desc(rng.below(g.desc_len), &e);
                        }
                        // A plausible in-band header with a bad length at the head.
                        2 if matches!(g.layout, Layout::Slotted | Layout::Variable) => {
                            let h = head(&raw);
                            let mut b = [0u8; 16];
                            b[..8].copy_from_slice(&h.to_le_bytes());
                            b[8..12].copy_from_slice(&(rng.next_u64() as u32).to_le_bytes());
                            raw.write_at(g.head_len + (h & (g.data_len - 1)), &b);
                            raw.write_u64(HEAD_WORD, (h + unit) << 1);
                        }
                        // An absurd head.
                        3 | 4 => {
                            let h = head(&raw);
                            let v = match rng.below(9) {
                                0 => u64::MAX,
                                1 => 0,
                                2 => 1,
                                3 => (h + unit) << 1,
                                4 => (h + cap * 1000) << 1,
                                5 => h.saturating_sub(unit) << 1,
                                6 => 1 << 63,
                                7 => (h + cap) << 1,
                                _ => rng.next_u64(),
                            };
                            raw.write_u64(HEAD_WORD, v);
                        }
                        // An absurd write_end.
                        5 => raw.write_u64(
                            WRITE_END,
                            match rng.below(3) {
                                0 => u64::MAX,
                                1 => 0,
                                _ => rng.next_u64() >> rng.below(64),
                            },
                        ),
                        // Now and then an honest block (it republishes our head).
                        _ => {
                            let _ = p.write_timeout(&block(seq, MAX), Duration::from_millis(5));
                            seq += 1;
                        }
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                // Leave the head at 0: every reader that moved is now ahead
                // of it, which must give a prompt error (this also ends any
                // skip loop the chaos caused; such loops have their own
                // tests, `garbage_block_*`).
                raw.write_u64(HEAD_WORD, 0);
                report(format_args!("chaos rounds={rounds}"));
            }
            "forge" => {
                // Garbage where the next block's header or descriptor goes,
                // published one block ahead.
                let h = head(&raw);
                match g.layout {
                    Layout::Slotted | Layout::Variable => {
                        let mut b = [0xA5u8; 16];
                        b[8..12].copy_from_slice(&10u32.to_le_bytes());
                        raw.write_at(g.head_len + (h & (g.data_len - 1)), &b);
                    }
                    _ => raw.write_desc(
                        h,
                        &RichPtr {
                            ring_id: g.ring_id ^ 0xBAD,
                            len: 10,
                            ..RichPtr::default()
                        },
                    ),
                }
                let step = if g.layout == Layout::Variable {
                    32
                } else {
                    unit
                };
                raw.write_u64(HEAD_WORD, (h + step) << 1);
                report(format_args!("forged at={h}"));
            }
            "close" => break,
            other => panic!("unknown command {other:?}"),
        }
    }
    drop(p);
    report("closed");
}

const BLOCK_LAYOUTS: [Layout; 4] = [
    Layout::Continuous,
    Layout::Slotted,
    Layout::Variable,
    Layout::Descriptors,
];

#[test]
fn hostile_producer_gets_typed_errors_not_crashes_or_hangs() {
    let dir = RingDir::new("hostile-prod");
    for (i, layout) in BLOCK_LAYOUTS.into_iter().enumerate() {
        for policy in [Overflow::Block, Overflow::Frp] {
            let name = dir.name(&format!("{}-{}", layout.name(), policy.name()));
            drop(opts(layout, policy).create(&name).expect("create"));
            let mut v = spawn(&dir, "child_victim", "ring-victim", &[("RING", s(&name))]);
            v.expect("attached slot=");
            let seed = 0xE71 + i as u64 * 2 + policy as u64;
            let mut e = spawn(
                &dir,
                "child_evil_writer",
                "ring-evil-writer",
                &[("RING", s(&name)), ("SEED", s(seed))],
            );
            assert_eq!(e.expect("ready consumers="), "1");
            assert!(e.ask("valid 20").starts_with("valid ok="));
            assert_eq!(e.ask("chaos 3000"), "chaos rounds=3000");
            // The hostile producer stays attached (alive, idle), its last
            // act a head of 0 behind the victim: the victim must still
            // return from every timed call and be able to stop.
            v.send("stop");
            let r = v.next_report();
            assert!(
                r.starts_with("done violations=0 "),
                "{layout:?}/{policy:?} (seed {seed:#x}): {r}"
            );
            println!("{layout:?}/{policy:?}: {r}");
            v.finish();
            close(e);
        }
    }
}

/// A lapped-reader skip must make progress: a hostile producer that
/// publishes one garbage block right after the reader's position (in a ring
/// that has wrapped) must not trap an FRP reader in `read_timeout`.
fn garbage_block_at_the_reader(layout: Layout, policy: Overflow) -> String {
    let dir = RingDir::new(&format!(
        "hostile-forge-{}-{}",
        layout.name(),
        policy.name()
    ));
    let name = dir.name("r");
    drop(opts(layout, policy).create(&name).expect("create"));
    let (mut r, slot) = reader(&dir, &name, &[("FIRST", "0"), ("WAIT", "poll")]);
    let mut e = spawn(
        &dir,
        "child_evil_writer",
        "ring-evil-writer",
        &[("RING", s(&name)), ("SEED", s(1))],
    );
    assert_eq!(e.expect("ready consumers="), "1");
    // Several laps of honest blocks, written in steps the reader keeps up
    // with (so nothing is skipped and the reader ends at the head).
    let mut total = 0;
    for _ in 0..10 {
        assert_eq!(e.ask("valid 30"), "valid ok=30");
        total += 30;
        assert_eq!(count(&mut r, &format!("until {total}")), total);
    }
    let st = ring::stat(&name).unwrap();
    let me = st.consumers.iter().find(|c| c.slot == slot).unwrap();
    assert!(st.head > st.geometry.cap() && me.lag == 0, "{st:?}");
    assert!(e.ask("forge").starts_with("forged at="));
    let end = if policy == Overflow::Block {
        // The reader stops at the garbage block by itself.
        r.next_report()
    } else {
        // The reader must step over the garbage block to the head (its
        // published cursor says when), and still answer `stop`.
        common::eventually("the reader skips the garbage block", || {
            let st = ring::stat(&name).unwrap();
            st.consumers.iter().any(|c| c.slot == slot && c.lag == 0)
        });
        r.send("stop");
        r.next_report()
    };
    assert!(!end.starts_with("hung"), "{layout:?}/{policy:?}: {end}");
    r.finish();
    close(e);
    parse_end(&end).0
}

#[test]
fn garbage_block_gives_corrupt_under_block_policy() {
    for layout in [Layout::Slotted, Layout::Variable, Layout::Descriptors] {
        assert_eq!(
            garbage_block_at_the_reader(layout, Overflow::Block),
            "err Corrupt(\"invalid block header\")",
            "{layout:?}"
        );
    }
}

#[test]
fn garbage_block_is_skipped_under_frp_variable() {
    assert_eq!(
        garbage_block_at_the_reader(Layout::Variable, Overflow::Frp),
        "stopped"
    );
}

#[test]
fn garbage_block_is_skipped_under_frp_slotted() {
    assert_eq!(
        garbage_block_at_the_reader(Layout::Slotted, Overflow::Frp),
        "stopped"
    );
}

#[test]
fn garbage_block_is_skipped_under_frp_descriptors() {
    assert_eq!(
        garbage_block_at_the_reader(Layout::Descriptors, Overflow::Frp),
        "stopped"
    );
}

// ------------------------------------------------------ (c) truncation

/// Child: truncate `RING`'s file to `LEN` bytes.
#[test]
#[ignore = "child process entry point"]
fn child_truncator() {
    if common::child_role("ring-truncator").is_none() {
        return;
    }
    common::ring::child_ring_dir();
    let len: u64 = arg("LEN").parse().unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(zcio::internals::sys::shm::path_of(&arg("RING")))
        .expect("open ring file");
    f.set_len(len).expect("ftruncate");
    report(format_args!("truncated len={len}"));
}

fn truncate(dir: &RingDir, name: &str, len: u64) {
    let mut t = spawn(
        dir,
        "child_truncator",
        "ring-truncator",
        &[("RING", s(name)), ("LEN", s(len))],
    );
    assert_eq!(t.next_report(), format!("truncated len={len}"));
    t.finish();
}

/// The writer's results for `try N`.
fn tried(w: &mut Kid, n: u32) -> Vec<String> {
    let r = w.ask(&format!("try {n}"));
    r.strip_prefix("tried ")
        .unwrap_or_else(|| panic!("{r}"))
        .split(';')
        .map(str::to_string)
        .collect()
}

fn is_truncated_error(r: &str) -> bool {
    r == "Err(Corrupt(\"ring file truncated\"))"
}

/// A fresh ring directory for test `tag` holding a slotted `Block` ring
/// `r`; returns the directory, the ring's name and its geometry.
fn slotted_ring(tag: &str) -> (RingDir, String, Geometry) {
    let dir = RingDir::new(tag);
    let name = dir.name("r");
    let map = opts(Layout::Slotted, Overflow::Block)
        .create(&name)
        .expect("create");
    let g = *map.geometry();
    drop(map);
    (dir, name, g)
}

/// A reader of ring `name` expecting every block from 0 (with the `extra`
/// arguments), and a writer that saw it attach.
fn reader_and_writer(dir: &RingDir, name: &str, extra: &[(&str, &str)]) -> (Kid, Kid) {
    let mut args = vec![("FIRST", "0")];
    args.extend_from_slice(extra);
    let (r, _) = reader(dir, name, &args);
    (r, writer(dir, name, MAX, 1, &[]))
}

/// Truncate ring `name` (of geometry `g`) to half its length, page
/// aligned; returns how many slots are still wholly in the file.
fn truncate_to_half(dir: &RingDir, name: &str, g: &Geometry) -> u64 {
    let half = g.file_len() / 2 / 4096 * 4096;
    truncate(dir, name, half);
    (half - g.head_len) / g.slot_size
}

#[test]
fn truncation_to_zero_under_a_blocked_reader_and_the_producer() {
    let (dir, name, _) = slotted_ring("hostile-trunc0");
    let (mut r, mut w) = reader_and_writer(&dir, &name, &[]);
    assert_eq!(w.ask("write 10"), "wrote total=10");
    assert_eq!(count(&mut r, "until 10"), 10);
    // The reader now sleeps in a blocking read.
    truncate(&dir, &name, 0);
    assert_eq!(
        parse_end(&r.next_report()),
        ("err Corrupt(\"ring file truncated\")".into(), 10)
    );
    r.finish();
    // The producer: an error, not SIGBUS (the first write after the
    // truncation may still land in the zero pages that replaced the file).
    let res = tried(&mut w, 3);
    assert!(
        res[1..].iter().all(|r| is_truncated_error(r)),
        "writes after truncation: {res:?}"
    );
    close(w);
}

/// A write whose bytes went into the zero pages that replaced a truncated
/// file was never published: it must not report success.
#[test]
fn first_write_after_truncation_is_not_reported_as_written() {
    let (dir, name, _) = slotted_ring("hostile-trunc-w");
    let mut w = writer(&dir, &name, MAX, 0, &[]);
    assert_eq!(w.ask("write 3"), "wrote total=3");
    truncate(&dir, &name, 0);
    let res = tried(&mut w, 2);
    assert!(
        res.iter().all(|r| is_truncated_error(r)),
        "writes after truncation: {res:?}"
    );
    close(w);
}

/// Truncation to half (page aligned) under a reader that still has a full
/// ring to read: it reads the blocks that are still in the file, then gets
/// an error where the file ends.
#[test]
fn truncation_to_half_under_a_lagging_reader_and_the_producer() {
    let (dir, name, g) = slotted_ring("hostile-trunc-half");
    let (mut r, mut w) = reader_and_writer(&dir, &name, &[("PAUSED", "1")]);
    let slots = g.data_len / g.slot_size;
    assert_eq!(
        w.ask("fill"),
        format!("full n={slots} stopped-by=WouldBlock")
    );
    let intact = truncate_to_half(&dir, &name, &g);
    r.send("go");
    let (outcome, n) = parse_end(&r.next_report());
    assert_eq!(n, intact, "blocks still in the file are read: {outcome}");
    assert!(outcome.starts_with("err Corrupt("), "{outcome}");
    r.finish();
    // The producer's next blocks go where the file was cut: an error, not
    // SIGBUS (the room freed by the reader starts at data offset 0, which
    // is still in the file, so the first `intact` writes succeed for real).
    let res = tried(&mut w, intact as u32 + 3);
    assert!(res[..intact as usize].iter().all(|r| r == "Ok"), "{res:?}");
    assert!(res.last().is_some_and(|r| is_truncated_error(r)), "{res:?}");
    close(w);
}

/// A reader at the exact spot where the file was cut, in a `Block` ring:
/// the error must name the truncation, not a corrupt header.
#[test]
fn truncation_is_reported_as_truncation() {
    let (dir, name, g) = slotted_ring("hostile-trunc-msg");
    let (mut r, mut w) = reader_and_writer(&dir, &name, &[("PAUSED", "1")]);
    assert!(w.ask("fill").starts_with("full n="));
    truncate_to_half(&dir, &name, &g);
    r.send("go");
    let (outcome, _) = parse_end(&r.next_report());
    assert_eq!(outcome, "err Corrupt(\"ring file truncated\")");
    r.finish();
    close(w);
}

/// Truncation to half under a reader sleeping in a blocking read: the
/// reader's next touch of the missing part, or the end of the producer,
/// must end its read with an error, never a signal.
#[test]
fn truncation_to_half_under_a_blocked_reader() {
    let (dir, name, g) = slotted_ring("hostile-trunc-blocked");
    let (mut r, mut w) = reader_and_writer(&dir, &name, &[]);
    assert_eq!(w.ask("write 4"), "wrote total=4");
    assert_eq!(count(&mut r, "until 4"), 4);
    let intact = truncate_to_half(&dir, &name, &g);
    // Writes into the part still in the file are delivered; the first one
    // past the cut trips the producer's guard.
    let res = tried(&mut w, (intact - 4) as u32 + 3);
    assert!(res.last().is_some_and(|r| is_truncated_error(r)), "{res:?}");
    // The reader gets every intact block; it may already have touched the
    // cut (the producer published a block into its own zero page) and
    // ended with the truncation error.
    let rep = r.ask(&format!("until {intact}"));
    let end = if rep.starts_with("end ") {
        Some(rep)
    } else {
        assert_eq!(num_after(&rep, "count "), intact);
        None
    };
    close(w);
    let (outcome, n) = parse_end(&end.unwrap_or_else(|| r.next_report()));
    assert_eq!(n, intact);
    println!("blocked reader after truncation to half: {outcome}");
    // Either it touched the cut (truncation error) or it saw the producer's
    // close, which reaches the surviving header pages (end of stream).
    assert!(
        outcome.contains("truncated") || outcome.starts_with("eof"),
        "{outcome}"
    );
    r.finish();
}

/// After a truncation that keeps the header pages, the producer's close
/// must still reach the file (readers then see the end of the stream, not
/// a dead producer).
#[test]
fn producer_close_after_truncation_to_half_reaches_the_file() {
    let (dir, name, g) = slotted_ring("hostile-trunc-close");
    let mut w = writer(&dir, &name, MAX, 0, &[]);
    let intact = truncate_to_half(&dir, &name, &g);
    let res = tried(&mut w, intact as u32 + 2);
    assert!(res.last().is_some_and(|r| is_truncated_error(r)), "{res:?}");
    w.send("close");
    assert_eq!(w.next_report(), "closed");
    // The writer process is still alive; the owner word (in the part of
    // the file that is left) must say it closed.
    let owner = RawRing::open(&name).read_u64(common::ring::CONTROL_OWNER);
    let (_, state, pid) = zcio::internals::ring_layout::owner_parts(owner);
    assert_eq!(pid, w.pid());
    assert_eq!(
        state,
        zcio::internals::ring_layout::OWNER_CLOSED,
        "owner state after close (1 = active, 2 = closed)"
    );
    w.finish();
}

// ---------------------------------------------------- (d) index rings

/// Child: a consumer of index ring `RING` from its oldest entry. Command
/// `next`: read one entry; on an error, step over it.
#[test]
#[ignore = "child process entry point"]
fn child_index_reader() {
    if common::child_role("ring-index-reader").is_none() {
        return;
    }
    common::ring::child_ring_dir();
    let map = RingMap::open(&arg("RING"), true).expect("open");
    let mut c = Consumer::attach(map, Start::Oldest).expect("attach");
    report(format_args!("attached at={}", c.position()));
    let mut buf = vec![0u8; 1 << 16];
    while let Some(cmd) = common::command() {
        assert_eq!(cmd, "next");
        match c.read_timeout(&mut buf, Duration::from_secs(2)) {
            Ok(n) => match check_block(&buf[..n]) {
                Ok(seq) => report(format_args!("ok seq={seq}")),
                Err(_) => report(format_args!("ok garbage len={n}")),
            },
            Err(e) => {
                report(format_args!("err {e:?}"));
                if c.seek(SeekTo::Forward(1)).is_err() {
                    report("seek failed");
                }
            }
        }
    }
}

fn index_reader(dir: &RingDir, index: &str) -> Kid {
    let mut k = spawn(
        dir,
        "child_index_reader",
        "ring-index-reader",
        &[("RING", s(index))],
    );
    k.expect("attached at=");
    k
}

#[test]
fn index_entries_into_missing_or_replaced_rings_give_source_errors() {
    let dir = RingDir::new("hostile-index");
    let src = dir.name("src");
    let idx = dir.name("idx");
    let sm = opts(Layout::Slotted, Overflow::Block)
        .create(&src)
        .expect("create source");
    let im = opts(Layout::Index, Overflow::Block)
        .create(&idx)
        .expect("create index");
    let mut ps = Producer::attach(sm.clone()).unwrap();
    let mut cs = Consumer::attach(sm, Start::Newest).unwrap();
    let mut pi = Producer::attach(im).unwrap();
    for i in 0..4 {
        ps.write(&block(i, MAX)).unwrap();
        let pk = cs.peek(1 << 16).unwrap().expect("block");
        pi.splice(&pk, Wait::Forever).expect("splice");
    }
    drop((ps, cs));

    let mut r1 = index_reader(&dir, &idx);
    assert_eq!(r1.ask("next"), "ok seq=0");
    // The source disappears: a reader that already mapped it keeps reading,
    // a new one cannot reach it.
    ring::unlink(&src).unwrap();
    assert_eq!(r1.ask("next"), "ok seq=1");
    let mut r2 = index_reader(&dir, &idx);
    let e = r2.ask("next");
    assert!(
        e.starts_with("err Source(Open {") && e.contains("NotFound("),
        "{e}"
    );
    // Another ring takes the name: it is not the ring the entries point into.
    drop(
        opts(Layout::Slotted, Overflow::Block)
            .create(&src)
            .expect("re-create"),
    );
    let mut r3 = index_reader(&dir, &idx);
    let e = r3.ask("next");
    assert!(e.starts_with("err Source(Replaced("), "{e}");
    let e = r2.ask("next");
    assert!(e.starts_with("err Source(Replaced("), "{e}");
    assert_eq!(r1.ask("next"), "ok seq=2");
    for k in [r1, r2, r3] {
        k.finish();
    }
    drop(pi);
}

/// Child: write entries and source-table rows of index ring `RING` by hand
/// (no producer attached), pointing into ring `SRC` and elsewhere.
#[test]
#[ignore = "child process entry point"]
fn child_index_forger() {
    if common::child_role("ring-index-forger").is_none() {
        return;
    }
    common::ring::child_ring_dir();
    let (idx, src) = (arg("RING"), arg("SRC"));
    let raw = RawRing::open(&idx);
    let s_id = RawRing::open(&src).ring_id;
    let l0 = block_len(0, MAX) as u32;
    let ptr = |ring_id: u64, pos: u64, offset: u32, len: u32| RichPtr {
        ring_id,
        pos,
        offset,
        len,
        tag: 0,
        _reserved: 0,
    };
    raw.write_source(0, s_id, src.len() as u32, src.as_bytes());
    raw.write_source(1, 0x2222, 19, b"../../../etc/passwd");
    raw.write_source(2, 0x3333, 12, b"no-such-ring");
    raw.write_source(3, 0x4444, src.len() as u32, src.as_bytes());
    raw.write_source(4, raw.ring_id, idx.len() as u32, idx.as_bytes());
    raw.write_source(5, 0x5555, 1000, b"x");
    raw.write_source(6, 0x6666, 2, &[0xff, 0xfe]);
    let entries = [
        ptr(s_id, 0, 16, l0),             // 0: a real block
        ptr(0x1111, 0, 16, l0),           // 1: id in no table row
        ptr(0x2222, 0, 16, l0),           // 2: row with an invalid name
        ptr(0x3333, 0, 16, l0),           // 3: row naming no ring
        ptr(0x4444, 0, 16, l0),           // 4: row naming a ring with another id
        ptr(raw.ring_id, 0, 0, 8),        // 5: into an index ring
        ptr(s_id, 0, 65536, 1),           // 6: past the end of the data
        ptr(0x5555, 0, 16, l0),           // 7: row with an overlong name length
        ptr(0x6666, 0, 16, l0),           // 8: row with a non-UTF-8 name
        ptr(s_id, u64::MAX - 5, 16, l0),  // 9: wrapping position
        ptr(s_id, 0, u32::MAX, u32::MAX), // 10: offset + len overflow u32
        ptr(s_id, 0, 16, l0),             // 11: a real block again
    ];
    for (i, e) in entries.iter().enumerate() {
        raw.write_desc(i as u64, e);
    }
    raw.write_u64(HEAD_WORD, (entries.len() as u64) << 1);
    report(format_args!("forged entries={}", entries.len()));
}

#[test]
fn forged_index_entries_give_typed_errors() {
    let dir = RingDir::new("hostile-index-forged");
    let src = dir.name("src");
    let idx = dir.name("idx");
    drop(
        opts(Layout::Slotted, Overflow::Block)
            .create(&src)
            .expect("create source"),
    );
    drop(
        opts(Layout::Index, Overflow::Block)
            .create(&idx)
            .expect("create index"),
    );
    let mut ps = Producer::open(&src).unwrap();
    ps.write(&block(0, MAX)).unwrap();
    let mut f = spawn(
        &dir,
        "child_index_forger",
        "ring-index-forger",
        &[("RING", s(&idx)), ("SRC", s(&src))],
    );
    assert_eq!(f.next_report(), "forged entries=12");
    f.finish();
    let mut r = index_reader(&dir, &idx);
    let got: Vec<String> = (0..12).map(|_| r.ask("next")).collect();
    let unknown = |id: u32| format!("err Source(UnknownId({id}))");
    assert_eq!(got[0], "ok seq=0");
    assert_eq!(got[1], unknown(0x1111));
    assert_eq!(got[2], unknown(0x2222));
    assert!(
        got[3].starts_with("err Source(Open { name: \"no-such-ring\", error: NotFound("),
        "{}",
        got[3]
    );
    assert_eq!(got[4], format!("err Source(Replaced({src:?}))"));
    assert_eq!(got[5], "err Corrupt(\"invalid block header\")");
    assert_eq!(got[6], "err Corrupt(\"invalid block header\")");
    assert_eq!(got[7], unknown(0x5555));
    assert_eq!(got[8], unknown(0x6666));
    assert!(
        got[9].starts_with("ok "),
        "in-bounds bytes of the source: {}",
        got[9]
    );
    assert_eq!(got[10], "err Corrupt(\"invalid block header\")");
    assert_eq!(got[11], "ok seq=0");
    // Then nothing more (no producer: end of stream once seen).
    let last = r.ask("next");
    assert!(
        last == "ok garbage len=0" || last.starts_with("err "),
        "{last}"
    );
    r.finish();
    drop(ps);
}

// ------------------------------------------------ (e) silent peers

/// A peer that never answers holds nobody past the configured bound: a
/// producer (in another process) that never writes ends the consumer's
/// default `read` and `peek` with `TimedOut` at the consumer's
/// `wait_bound`; a consumer that never reads ends the producer's default
/// `write` (and `Wait::Default`) with `TimedOut` at the producer's, once the
/// ring is full — and the consumer still gets every block written.
#[test]
fn silent_peers_bound_the_default_waits() {
    let dir = RingDir::new("hostile-silent");
    let name = dir.name("r");
    let map = opts(Layout::Variable, Overflow::Block)
        .create(&name)
        .expect("create");
    let short = Duration::from_millis(200);

    let w = writer(&dir, &name, MAX, 0, &[]);
    let mut c = Consumer::attach(map.clone(), Start::Newest).expect("consumer");
    assert_eq!(c.wait_bound(), ring::Consumer::DEFAULT_WAIT_BOUND);
    c.set_wait_bound(short);
    let mut buf = vec![0u8; MAX];
    assert_eq!(c.read(&mut buf), Err(ReadError::TimedOut));
    assert!(matches!(c.peek(MAX), Err(ReadError::TimedOut)));
    drop(c);
    close(w);

    let (mut r, _) = reader(&dir, &name, &[("FIRST", "0"), ("PAUSED", "1")]);
    let mut p = Producer::attach(map).expect("producer");
    assert_eq!(p.wait_bound(), ring::Producer::DEFAULT_WAIT_BOUND);
    p.set_wait_bound(short);
    let mut n = 0u64;
    let e = loop {
        match p.write(&block(n, MAX)) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 100_000, "the ring never filled");
    };
    assert_eq!(e, ring::WriteError::TimedOut);
    assert_eq!(
        p.write_tagged(&block(n, MAX), 0, Wait::Default),
        Err(ring::WriteError::TimedOut)
    );
    drop(p);
    r.send("go");
    assert_eq!(parse_end(&r.next_report()), ("eof".into(), n));
    r.finish();
}

ring_child_entry_points!();
