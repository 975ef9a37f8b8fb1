//! Typed messages across real processes (feature `typed`): a child sends
//! tagged frames (a `#[repr(C)]` header followed by pixels) and headers
//! over a real `Channel`, and the parent reads them with validation —
//! copied out, or borrowed in place only where the bytes cannot change (a
//! buffer of its own, a secured buffer). A hostile child sends invalid
//! `bool`s and enum discriminants, wrong and corrupt tags, truncated
//! messages, and rewrites a buffer while the parent reads it: the parent
//! gets typed errors, never a panic or an invalid value, and the channel
//! stays usable. The child runs under `Kid`'s watchdog.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{Kid, SockPath, STEP};
use zcio::typed::{Tag, TypedBuf, TypedError};
use zcio::{Channel, ChannelConfig, Listener, Msg, Pool};
use zerocopy::{FromZeros, Immutable, IntoBytes, KnownLayout};

#[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Debug, Clone, Copy, PartialEq)]
#[repr(u8)]
enum Format {
    Gray = 0,
    Rgba = 1,
}

#[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Debug, Clone, Copy, PartialEq)]
#[repr(C)]
struct FrameHeader {
    seq: u32,
    width: u16,
    height: u16,
    format: Format,
    keyframe: bool,
    reserved: [u8; 2],
}

/// Byte offsets of the two fields with forbidden values.
const FORMAT_AT: usize = 8;
const KEYFRAME_AT: usize = 9;

#[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Debug)]
#[repr(C)]
struct Frame {
    header: FrameHeader,
    pixels: [[u8; 4]],
}

fn frame_tag() -> Tag {
    Tag::new("test.Frame", 1)
}

fn header_tag() -> Tag {
    Tag::new("test.FrameHeader", 1)
}

const WIDTH: u16 = 16;
const HEIGHT: u16 = 8;

fn pixel(seq: u32, i: usize) -> [u8; 4] {
    let b = common::pattern(u64::from(seq), i as u64);
    [b, b.wrapping_add(1), b.wrapping_add(2), 0xff]
}

fn header(seq: u32) -> FrameHeader {
    FrameHeader {
        seq,
        width: WIDTH,
        height: HEIGHT,
        format: if seq.is_multiple_of(2) {
            Format::Rgba
        } else {
            Format::Gray
        },
        keyframe: seq.is_multiple_of(4),
        reserved: [0; 2],
    }
}

fn check_frame(f: &Frame, seq: u32) {
    assert_eq!(f.header, header(seq));
    assert_eq!(f.pixels.len(), usize::from(WIDTH) * usize::from(HEIGHT));
    for (i, p) in f.pixels.iter().enumerate() {
        assert_eq!(*p, pixel(seq, i), "frame {seq} pixel {i}");
    }
}

fn victim(name: &str) -> (SockPath, Listener, Kid, Channel) {
    let sock = SockPath::new(name);
    let listener = Listener::bind(sock.path(), ChannelConfig::default()).expect("bind");
    let kid = Kid::spawn("child_sender", "typed-sender", &[("SOCK", sock.arg())]);
    let ch = listener.accept_timeout(STEP).expect("accept");
    (sock, listener, kid, ch)
}

#[test]
fn typed_frames_cross_processes_and_are_validated() {
    let (_s, _l, mut kid, ch) = victim("typed-frames");
    let mine = common::small_pool("typed-copies", 1 << 20, 1);
    assert_eq!(kid.ask("frames 20"), "sent 20 frames");
    for seq in 0..20 {
        let msg = ch.recv_timeout(STEP).expect("frame");
        // The sender's pool buffer: volatile, so never borrowed in place.
        assert!(!msg.is_immutable());
        assert!(matches!(
            msg.borrow_typed_elems::<Frame>(Some(&frame_tag())),
            Err(TypedError::Volatile { .. })
        ));
        // Copied once into a buffer of our own, then borrowed there.
        let own = zcio::forward::copy_into(&mine, &msg, STEP).expect("copy");
        drop(msg);
        let f: &Frame = own.borrow_typed_elems(Some(&frame_tag())).expect("frame");
        check_frame(f, seq);
        // The wrong tag is named in the error.
        let e = own
            .borrow_typed_elems::<Frame>(Some(&header_tag()))
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("message carries type `test.Frame` v1 (size 12 + n × 4, align 4)"),
            "{e}"
        );
    }
    assert_eq!(kid.ask("headers 20"), "sent 20 headers");
    for seq in 0..20 {
        let msg = ch.recv_timeout(STEP).expect("header");
        let h: FrameHeader = msg.read_typed(Some(&header_tag())).expect("header");
        assert_eq!(h, header(seq));
    }
    // A secured buffer is sealed by the kernel: borrowed in place.
    assert_eq!(kid.ask("secured 7"), "sent secured");
    let msg = ch.recv_timeout(STEP).expect("secured frame");
    assert!(msg.is_secured() && msg.is_immutable());
    let f: &Frame = msg
        .borrow_typed_elems(Some(&frame_tag()))
        .expect("in place");
    check_frame(f, 7);
    kid.send("exit");
    kid.finish();
}

#[test]
fn a_hostile_sender_gets_errors_never_a_value() {
    let (_s, _l, mut kid, ch) = victim("typed-hostile");
    assert_eq!(kid.ask("hostile"), "sent 9 hostile");
    let next = || ch.recv_timeout(STEP).expect("message");
    let htag = header_tag();
    // keyframe = 2: not a bool.
    let e = next().read_typed::<FrameHeader>(None).unwrap_err();
    assert!(matches!(e, TypedError::Invalid { .. }), "{e}");
    assert_eq!(e.kind(), zcio::ErrorKind::Malformed);
    // format = 9: no such variant, tagged this time.
    let e = next().read_typed::<FrameHeader>(Some(&htag)).unwrap_err();
    assert!(matches!(e, TypedError::Invalid { .. }), "{e}");
    // Another type's tag.
    let e = next().read_typed::<FrameHeader>(Some(&htag)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "message carries type `test.Other` v1 (size 12, align 4), expected `test.FrameHeader` v1 \
         (size 12, align 4): the sender sent another type, or another version of it"
    );
    // Another version of the same type.
    let e = next().read_typed::<FrameHeader>(Some(&htag)).unwrap_err();
    assert!(e.to_string().contains("`test.FrameHeader` v2"), "{e}");
    // A name that does not match its hash.
    let e = next().read_typed::<FrameHeader>(Some(&htag)).unwrap_err();
    assert!(matches!(e, TypedError::CorruptTag { .. }), "{e}");
    // No tag where one is expected.
    let e = next().read_typed::<FrameHeader>(Some(&htag)).unwrap_err();
    assert!(matches!(e, TypedError::MissingTag { len: 12, .. }), "{e}");
    // Truncated.
    let e = next().read_typed::<FrameHeader>(None).unwrap_err();
    assert!(matches!(e, TypedError::Size { len: 10, .. }), "{e}");
    // A frame with a bad pixel format, copied in and borrowed: refused.
    let mine = common::small_pool("typed-hostile-copies", 1 << 20, 1);
    let m = next();
    assert!(matches!(
        m.read_typed_vec::<u8>(None).map(|v| v.len()),
        Ok(n) if n == 128 + 12 + 4 * 128
    ));
    let own = zcio::forward::copy_into(&mine, &m, STEP).expect("copy");
    assert!(matches!(
        own.borrow_typed_elems::<Frame>(Some(&frame_tag())),
        Err(TypedError::Invalid { .. })
    ));
    // And the channel goes on: a valid message after all that.
    let h: FrameHeader = next().read_typed(Some(&htag)).expect("valid");
    assert_eq!(h, header(3));
    kid.send("exit");
    kid.finish();
}

#[test]
fn a_sender_rewriting_its_buffer_gets_values_or_errors_never_ub() {
    let (_s, _l, mut kid, ch) = victim("typed-rewrite");
    assert_eq!(kid.ask("rewrite"), "rewriting");
    let msg = ch.recv_timeout(STEP).expect("message");
    let (mut ok, mut invalid) = (0u32, 0u32);
    for _ in 0..20_000 {
        // Each read copies the bytes once and validates only that copy.
        match msg.read_typed::<FrameHeader>(None) {
            Ok(h) => {
                assert_eq!((h.seq, h.width, h.height), (5, WIDTH, HEIGHT));
                ok += 1;
            }
            Err(TypedError::Invalid { .. }) => invalid += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(kid.ask("stop"), "stopped");
    assert_eq!(ok + invalid, 20_000);
    println!("rewritten while read: {ok} valid copies, {invalid} invalid");
    kid.send("exit");
    kid.finish();
}

/// A message holding exactly `bytes` (a pool buffer of the child's).
fn raw(pool: &Pool, bytes: &[u8]) -> Msg {
    common::msg_of(pool, bytes)
}

/// The bytes of a typed message, to tamper with.
fn tagged_bytes(pool: &Pool, h: FrameHeader, tag: &Tag) -> Vec<u8> {
    let mut b = pool.alloc_typed::<FrameHeader>(Some(tag)).expect("alloc");
    *b = h;
    b.into_msg().expect("freeze").to_vec()
}

fn send_frame(ch: &Channel, pool: &Pool, seq: u32, secured: bool) {
    let n = usize::from(WIDTH) * usize::from(HEIGHT);
    let tag = frame_tag();
    let mut f = if secured {
        TypedBuf::<Frame>::alloc_elems(n, Some(&tag), |len| pool.alloc_secured(len))
    } else {
        pool.alloc_typed_elems::<Frame>(n, Some(&tag))
    }
    .expect("alloc");
    f.header = header(seq);
    for (i, p) in f.pixels.iter_mut().enumerate() {
        *p = pixel(seq, i);
    }
    ch.send_timeout(f.into_msg().expect("freeze"), STEP)
        .expect("send");
}

#[test]
#[ignore = "child process entry point"]
fn child_sender() {
    if common::child_role("typed-sender").is_none() {
        return;
    }
    let ch = Channel::connect(common::arg("SOCK"), ChannelConfig::default()).expect("connect");
    let pool = common::small_pool("typed-sender", 1 << 20, 4);
    let mut rewriter: Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)> = None;
    while let Some(cmd) = common::command() {
        let words: Vec<&str> = cmd.split(' ').collect();
        match words.as_slice() {
            ["frames", n] => {
                let n: u32 = n.parse().expect("count");
                for seq in 0..n {
                    send_frame(&ch, &pool, seq, false);
                }
                common::report(format_args!("sent {n} frames"));
            }
            ["headers", n] => {
                let n: u32 = n.parse().expect("count");
                for seq in 0..n {
                    let mut h = pool
                        .alloc_typed::<FrameHeader>(Some(&header_tag()))
                        .expect("alloc");
                    *h = header(seq);
                    ch.send_timeout(h.into_msg().expect("freeze"), STEP)
                        .expect("send");
                }
                common::report(format_args!("sent {n} headers"));
            }
            ["secured", seq] => {
                send_frame(&ch, &pool, seq.parse().expect("seq"), true);
                common::report("sent secured");
            }
            ["hostile"] => {
                let htag = header_tag();
                let good = header(3);
                let mut msgs = Vec::new();
                let mut plain = good.as_bytes().to_vec();
                plain[KEYFRAME_AT] = 2;
                msgs.push(raw(&pool, &plain));
                let mut bad_format = tagged_bytes(&pool, good, &htag);
                bad_format[128 + FORMAT_AT] = 9;
                msgs.push(raw(&pool, &bad_format));
                let other = tagged_bytes(&pool, good, &Tag::new("test.Other", 1));
                msgs.push(raw(&pool, &other));
                let v2 = tagged_bytes(&pool, good, &Tag::new("test.FrameHeader", 2));
                msgs.push(raw(&pool, &v2));
                let mut bad_name = tagged_bytes(&pool, good, &htag);
                bad_name[56] = b'T'; // "Test.FrameHeader": the hash says otherwise
                msgs.push(raw(&pool, &bad_name));
                msgs.push(raw(&pool, good.as_bytes()));
                msgs.push(raw(&pool, &good.as_bytes()[..10]));
                let n = usize::from(WIDTH) * usize::from(HEIGHT);
                let mut f = pool
                    .alloc_typed_elems::<Frame>(n, Some(&frame_tag()))
                    .expect("alloc");
                f.header = good;
                let mut frame = f.into_msg().expect("freeze").to_vec();
                frame[128 + FORMAT_AT] = 200;
                msgs.push(raw(&pool, &frame));
                msgs.push(raw(&pool, &tagged_bytes(&pool, good, &htag)));
                let count = msgs.len();
                for m in msgs {
                    ch.send_timeout(m, STEP).expect("send");
                }
                common::report(format_args!("sent {count} hostile"));
            }
            ["rewrite"] => {
                let mut h = pool.alloc_typed::<FrameHeader>(None).expect("alloc");
                *h = header(5);
                let msg = h.into_msg().expect("freeze");
                // This process's writable mapping of the buffer it sent.
                let at = msg.slices()[0].fbuf().as_ptr() as usize + KEYFRAME_AT;
                ch.send_timeout(msg, STEP).expect("send");
                let stop = Arc::new(AtomicBool::new(false));
                let flag = stop.clone();
                let t = std::thread::spawn(move || {
                    let mut i = 0u8;
                    while !flag.load(Ordering::Relaxed) {
                        // SAFETY: one byte inside our own pool chunk, which
                        // stays mapped writable while `pool` lives (the
                        // thread is joined before it is dropped); nothing in
                        // this process holds a reference to it. Rewriting a
                        // sent buffer is the hostile originator on purpose.
                        unsafe { (at as *mut u8).write_volatile(i % 3) };
                        i = i.wrapping_add(1);
                    }
                });
                rewriter = Some((stop, t));
                common::report("rewriting");
            }
            ["stop"] => {
                if let Some((stop, t)) = rewriter.take() {
                    stop.store(true, Ordering::Relaxed);
                    t.join().expect("rewriter");
                }
                common::report("stopped");
            }
            ["exit"] => break,
            _ => panic!("unknown command {cmd:?}"),
        }
    }
    if let Some((stop, t)) = rewriter.take() {
        stop.store(true, Ordering::Relaxed);
        t.join().expect("rewriter");
    }
}
