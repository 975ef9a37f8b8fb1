//! Buffering semantics: an application that wants plain copy semantics
//! (it reuses its buffer at once, and what the peer got cannot change)
//! gets them without the copies — emulated copy — and the same transfer
//! under copy semantics for comparison.
//!
//! ```sh
//! cargo run --release -p zcio --example semantics     # spawns its own receiver
//! ```
//!
//! The receiver is this program re-executed. It declares the sender
//! trusted (the sender is this program, running zcio's TCOW), so whole
//! pages may be swapped into its buffer where the cost model says that
//! is cheaper than copying them out.

use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use zcio::semantics::{SemanticConfig, SemanticEndpoint, Semantics};
use zcio::{Channel, ChannelConfig, Listener};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const SIZE: usize = 4 << 20;
const ROUNDS: usize = 50;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [] => send(),
        [role, path, sem] if role == "receive" => receive(path, sem),
        _ => {
            eprintln!("usage: semantics [receive PATH SEMANTICS]");
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

fn config(sem: Semantics) -> SemanticConfig {
    SemanticConfig {
        output: sem,
        input: sem,
        arena_capacity: 64 << 20,
        ..SemanticConfig::default()
    }
}

fn send() -> Result<()> {
    for sem in [Semantics::Copy, Semantics::EmulatedCopy] {
        let path =
            std::env::temp_dir().join(format!("zcio-sem-example-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = Listener::bind(&path, ChannelConfig::default())?;
        let mut child = Command::new(std::env::current_exe()?)
            .args(["receive", &path.to_string_lossy(), sem.name()])
            .stdout(Stdio::inherit())
            .spawn()?;
        let ep = SemanticEndpoint::new(listener.accept()?, config(sem))?;
        // The application's buffer lives in the endpoint's arena.
        let mut buf = ep.arena().alloc(SIZE)?;
        let t0 = Instant::now();
        for r in 0..ROUNDS {
            buf.fill(r as u8);
            ep.output(&buf)?;
            // Reuse at once: under emulated copy the pages still in flight
            // are write-protected, and this write gets private copies.
            buf[..8].copy_from_slice(b"scribble");
        }
        ep.channel().flush();
        let status = child.wait()?;
        let secs = t0.elapsed().as_secs_f64();
        let _ = std::fs::remove_file(&path);
        if !status.success() {
            return Err(format!("receiver failed: {status}").into());
        }
        println!(
            "{:>14}: {ROUNDS} × {} MiB in {:.1} ms ({:.2} GB/s); sender stats {:?}",
            sem.name(),
            SIZE >> 20,
            secs * 1e3,
            (ROUNDS * SIZE) as f64 / secs / 1e9,
            ep.stats()
        );
    }
    Ok(())
}

fn receive(path: &str, sem: &str) -> Result<()> {
    let sem: Semantics = sem.parse()?;
    let ch = Channel::connect(path, ChannelConfig::default())?;
    // The sender is this very program, which runs zcio's TCOW: its lent
    // pages do not change while we hold them.
    // SAFETY: as argued just above.
    unsafe { ch.trust_peer() };
    let ep = SemanticEndpoint::new(ch, config(sem))?;
    let mut buf = ep.arena().alloc(SIZE)?;
    for r in 0..ROUNDS {
        ep.input(&mut buf)?;
        // Copy semantics: exactly what was output, never the scribble.
        if buf.iter().any(|&b| b != r as u8) {
            return Err(format!("round {r}: the data changed after output").into());
        }
    }
    println!("{:>14}: receiver stats {:?}", sem.name(), ep.stats());
    Ok(())
}
