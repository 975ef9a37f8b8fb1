//! Transfer by reference over a zcio channel, between two processes.
//!
//! ```sh
//! cargo run --release -p zcio --example transfer            # spawns its own receiver
//! cargo run --release -p zcio --example transfer -- recv /tmp/t.sock &   # or run the two halves
//! cargo run --release -p zcio --example transfer -- send /tmp/t.sock
//! ```
//!
//! The originator allocates buffers from a pool (reserve), fills them (fill),
//! freezes and sends them (commit + send). The receiver reads every message
//! in place through `zcio::View` — the originator keeps a writable mapping
//! of these volatile buffers, so the receiver never holds a `&[u8]` over
//! them — copies out and validates the one field it acts on, and drops the
//! message, which sends the deallocation notice back.

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use zcio::{Channel, ChannelConfig, Listener, Msg, Pool, PoolConfig};

const MESSAGES: u64 = 64;
const SIZE: usize = 1 << 20;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [] => both(),
        [role, path] if role == "send" => send(path),
        [role, path] if role == "recv" => recv(path),
        _ => {
            eprintln!("usage: transfer [send PATH | recv PATH]");
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
    let path = std::env::temp_dir().join(format!("zcio-example-{}.sock", std::process::id()));
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
    let start = Instant::now();
    let mut bytes = 0usize;
    for i in 0..MESSAGES {
        let msg = chan.recv()?;
        // Copy out the sequence number, then validate the copy.
        let seq = msg.chunks().next().and_then(|v| v.read_u64_le(0));
        if seq != Some(i) {
            return Err(format!("message {i}: sequence field says {seq:?}").into());
        }
        // Read the rest in place: a checksum over little-endian words.
        let sum = msg.chunks().fold(0u64, |acc, part| {
            part.fold_words_le(acc, |a, w| a.wrapping_add(w))
        });
        bytes += msg.len();
        if i == 0 {
            println!("first message: {} bytes, checksum {sum:#018x}", msg.len());
        }
        // Dropping `msg` sends the deallocation notice to the originator.
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "received {MESSAGES} messages, {:.1} MiB in {:.1} ms ({:.1} GiB/s), by reference",
        bytes as f64 / (1 << 20) as f64,
        secs * 1e3,
        bytes as f64 / secs / (1u64 << 30) as f64
    );
    Ok(())
}

fn send(path: &str) -> Result<()> {
    let chan = connect_retry(path)?;
    let pool = Pool::new(PoolConfig::named("example"));
    for i in 0..MESSAGES {
        let mut buf = pool.alloc(SIZE)?; // reserve
        let bytes = buf.as_mut_slice(); // fill (our own memory: a plain &mut [u8])
        bytes[..8].copy_from_slice(&i.to_le_bytes());
        bytes[8..].fill(i as u8 + 1);
        let msg = Msg::from(buf.freeze()?); // commit: immutable from now on
        chan.send(msg)?; // a 32-byte descriptor; waits while the ring is full
    }
    chan.flush();
    // Wait until the receiver has released everything, so the pool can be
    // dropped with nothing outstanding.
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
