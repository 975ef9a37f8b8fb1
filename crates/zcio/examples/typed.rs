//! Typed messages between two processes: a `#[repr(C)]` frame header
//! followed by its pixels, filled in place in a pool buffer, sent over a
//! zcio channel, and read back with validation (docs/typed-messages.md).
//!
//! ```sh
//! cargo run --release -p zcio --example typed            # spawns its own sender
//! cargo run --release -p zcio --example typed -- recv /tmp/t.sock &   # or run the two halves
//! cargo run --release -p zcio --example typed -- send /tmp/t.sock
//! ```
//!
//! The sender reserves a zeroed `Frame` with room for the pixels
//! (`Pool::alloc_typed_elems`), fills it through `&mut Frame` — its own
//! buffer, nobody else can write it — and sends it with a type tag. The
//! receiver cannot borrow a `&Frame` over the sender's pool buffer (the
//! sender keeps a writable mapping of it), so it copies each frame once
//! into a buffer of its own and borrows from that, which validates the
//! header (an unknown pixel format or a `keyframe` byte other than 0 or 1
//! is an error, never a value). The last frame comes in a secured buffer,
//! sealed by the kernel, which the receiver borrows in place.

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use zcio::typed::{Tag, TypedBuf, TypedError};
use zcio::{Channel, ChannelConfig, Listener, Pool, PoolConfig};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// How the pixels are laid out. `FromZeros` needs a variant for 0; any
/// other byte than 0 or 1 is refused by the receiver.
#[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, PartialEq)]
#[repr(u8)]
enum PixelFormat {
    Rgba8 = 0,
    Bgra8 = 1,
}

/// The frame's header: 16 bytes, aligned to 4, no padding (`IntoBytes`
/// checks that at compile time).
#[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug)]
#[repr(C)]
struct FrameHeader {
    seq: u32,
    width: u32,
    height: u32,
    format: PixelFormat,
    keyframe: bool,
    reserved: [u8; 2],
}

/// One pixel: 4 bytes, so a frame of any size has no padding at its end.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Rgba {
    r: u8,
    g: u8,
    b: u8,
    a: u8,
}

/// A header followed by `width × height` pixels: a zerocopy slice DST, one
/// message, one buffer.
#[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Debug)]
#[repr(C)]
struct Frame {
    header: FrameHeader,
    pixels: [Rgba],
}

/// What both sides call the type: a name of our own and its version.
fn frame_tag() -> Tag {
    Tag::new("example.Frame", 1)
}

const FRAMES: u32 = 32;
const WIDTH: u32 = 320;
const HEIGHT: u32 = 240;

fn pixel(seq: u32, i: usize) -> Rgba {
    let (x, y) = (i as u32 % WIDTH, i as u32 / WIDTH);
    Rgba {
        r: (x + seq) as u8,
        g: (y + seq) as u8,
        b: seq as u8,
        a: 0xff,
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [] => both(),
        [role, path] if role == "send" => send(path),
        [role, path] if role == "recv" => recv(path),
        _ => {
            eprintln!("usage: typed [send PATH | recv PATH]");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Bind, start this program again as the sender, receive.
fn both() -> Result<()> {
    let path = std::env::temp_dir().join(format!("zcio-typed-{}.sock", std::process::id()));
    let listener = Listener::bind(&path, ChannelConfig::default())?;
    let mut child = Command::new(std::env::current_exe()?)
        .arg("send")
        .arg(&path)
        .spawn()?;
    let got = recv_on(&listener);
    let status = child.wait()?;
    got?;
    if !status.success() {
        return Err(format!("sender exited with {status}").into());
    }
    Ok(())
}

fn recv(path: &str) -> Result<()> {
    let listener = Listener::bind(path, ChannelConfig::default())?;
    recv_on(&listener)
}

fn recv_on(listener: &Listener) -> Result<()> {
    let chan = listener.accept_timeout(Duration::from_secs(10))?;
    let tag = frame_tag();
    // Buffers of our own for the copies: the receiver's bytes, immutable.
    let mine = Pool::new(PoolConfig::named("typed-example-copies"));
    let start = Instant::now();
    for seq in 0..FRAMES {
        let msg = chan.recv()?;
        // The sender's pool buffer: it could still write it, so no
        // reference is made over it.
        match msg.borrow_typed_elems::<Frame>(Some(&tag)) {
            Err(e @ TypedError::Volatile { .. }) if seq == 0 => println!("as expected: {e}"),
            Err(TypedError::Volatile { .. }) => {}
            other => return Err(format!("frame {seq}: volatile bytes borrowed? {other:?}").into()),
        }
        // One copy into our own buffer, then borrow and validate there.
        let own = zcio::forward::copy_into(&mine, &msg, Duration::from_secs(10))
            .ok_or("no buffer for the copy")?;
        drop(msg); // the sender's buffer goes back now
        let frame: &Frame = own.borrow_typed_elems(Some(&tag))?;
        check(frame, seq)?;
        if seq == 0 {
            // Asking for another type is refused with both types named.
            let wrong = own.borrow_typed_elems::<[Rgba]>(Some(&Tag::new("example.Image", 1)));
            if let Err(e) = wrong {
                println!("another type: {e}");
            }
        }
    }
    let copied = start.elapsed();
    // The last frame is secured (sealed by the kernel): borrowed in place.
    let msg = chan.recv()?;
    let frame: &Frame = msg.borrow_typed_elems(Some(&tag))?;
    check(frame, FRAMES)?;
    println!(
        "received {FRAMES} frames of {WIDTH}×{HEIGHT} in {:.1} ms (copied once each, then \
         borrowed), and frame {FRAMES} in place from a sealed buffer (secured: {})",
        copied.as_secs_f64() * 1e3,
        msg.is_secured()
    );
    Ok(())
}

fn check(frame: &Frame, seq: u32) -> Result<()> {
    let h = &frame.header;
    if (h.seq, h.width, h.height) != (seq, WIDTH, HEIGHT) {
        return Err(format!("frame {seq}: header {h:?}").into());
    }
    if frame.pixels.len() != (WIDTH * HEIGHT) as usize {
        return Err(format!("frame {seq}: {} pixels", frame.pixels.len()).into());
    }
    if let Some(i) = (0..frame.pixels.len()).find(|&i| frame.pixels[i] != pixel(seq, i)) {
        return Err(format!("frame {seq}: pixel {i} is {:?}", frame.pixels[i]).into());
    }
    Ok(())
}

fn send(path: &str) -> Result<()> {
    let chan = connect_retry(path)?;
    let pool = Pool::new(PoolConfig::named("typed-example"));
    let tag = frame_tag();
    let pixels = (WIDTH * HEIGHT) as usize;
    for seq in 0..=FRAMES {
        // Reserve: a zeroed Frame with room for the pixels (the last one in
        // a secured buffer, sealed when it is frozen).
        let mut frame = if seq < FRAMES {
            pool.alloc_typed_elems::<Frame>(pixels, Some(&tag))?
        } else {
            TypedBuf::<Frame>::alloc_elems(pixels, Some(&tag), |len| pool.alloc_secured(len))?
        };
        // Fill, in place: our own buffer, a plain &mut Frame.
        frame.header = FrameHeader {
            seq,
            width: WIDTH,
            height: HEIGHT,
            format: if seq.is_multiple_of(2) {
                PixelFormat::Rgba8
            } else {
                PixelFormat::Bgra8
            },
            keyframe: seq.is_multiple_of(8),
            reserved: [0; 2],
        };
        for (i, p) in frame.pixels.iter_mut().enumerate() {
            *p = pixel(seq, i);
        }
        // Send: frozen (immutable from now on), one slice, by reference.
        chan.send(frame.into_msg()?)?;
    }
    chan.flush();
    // Wait until the receiver has released everything.
    let deadline = Instant::now() + Duration::from_secs(10);
    while pool.stats().buffers_in_use > 0 && Instant::now() < deadline {
        chan.reclaim();
        std::thread::sleep(Duration::from_millis(1));
    }
    let left = pool.stats().buffers_in_use;
    if left > 0 {
        return Err(format!("{left} buffers still held by the receiver after 10 s").into());
    }
    Ok(())
}

fn connect_retry(path: &str) -> Result<Channel> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Channel::connect(path, ChannelConfig::default()) {
            Ok(c) => return Ok(c),
            // The receiver may not have bound the socket yet.
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.into()),
        }
    }
}
