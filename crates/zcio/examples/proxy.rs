//! Asynchronous IPC on a synchronous rendezvous, between two processes.
//!
//! ```sh
//! cargo run --release -p zcio --example proxy        # spawns its own server
//! ```
//!
//! The server is a plain synchronous loop (`recv`, then `send` a reply for
//! calls). The client queues one-way notes and RPCs with `ProxyEndpoint`:
//! every call returns at once with a ticket or a handle, proxy threads do the
//! synchronous sends and receives, and the server cannot tell the difference.

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use zcio::proxy::{Proxies, ProxyEndpoint};
use zcio::rendezvous::{Envelope, Rendezvous, RendezvousListener, RendezvousRecvError};

const NOTE: u64 = 1;
const CALL: u64 = 2;
const REPLY: u64 = 3;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [] => client(),
        [role, path] if role == "serve" => serve(path),
        _ => {
            eprintln!("usage: proxy [serve PATH]");
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

/// A synchronous server: sums the notes, doubles the argument of a call.
fn serve(path: &str) -> Result<()> {
    let listener = RendezvousListener::bind(path)?;
    println!("server: listening on {path}");
    let ep = listener.accept_timeout(Duration::from_secs(10))?;
    let mut sum = 0u64;
    loop {
        let m = match ep.recv() {
            Ok(m) => m,
            Err(RendezvousRecvError::Disconnected) => break, // the client is gone: done
            Err(e) => return Err(e.into()),
        };
        match m.label {
            NOTE => sum += m.words.first().copied().unwrap_or(0),
            CALL => {
                let x = m.words.first().copied().unwrap_or(0);
                ep.send(&Envelope::new(REPLY, &[x.wrapping_mul(2), sum]))?;
            }
            other => eprintln!("server: ignoring a message with label {other}"),
        }
    }
    println!("server: the client hung up; notes summed to {sum}");
    Ok(())
}

fn client() -> Result<()> {
    let path = std::env::temp_dir().join(format!("zcio-proxy-example-{}.sock", std::process::id()));
    let mut server = Command::new(std::env::current_exe()?)
        .arg("serve")
        .arg(&path)
        .spawn()?;
    let ep = connect_retry(&path)?;
    let proxies = Proxies::default(); // shared, capped pool of proxy threads
    let peer = ProxyEndpoint::new(ep, &proxies);

    let start = Instant::now();
    // 100 one-way notes: each `send` queues the message and returns at once.
    let tickets = (1..=100)
        .map(|i| {
            peer.send(Envelope::new(NOTE, &[i]))
                .map_err(|e| e.into_parts().0)
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    // An RPC, also queued behind the notes (FIFO per partner).
    let reply = peer
        .call(Envelope::new(CALL, &[21]))
        .map_err(|e| e.into_parts().0)?;
    let queued = start.elapsed();
    // Meanwhile the client could do other work; now wait for the answers.
    let answer = reply.wait_timeout(Duration::from_secs(10))?;
    for t in &tickets {
        t.wait()?; // each note was taken by the server
    }
    println!(
        "client: queued 101 messages in {queued:?}; reply {:?} (21 × 2, and the sum of the notes so far)",
        answer.words
    );
    if answer.words.first() != Some(&42) || answer.words.get(1) != Some(&5050) {
        return Err(format!("unexpected reply {:?}", answer.words).into());
    }
    drop((reply, peer)); // hang up: the server's recv sees Disconnected
    let status = server.wait()?;
    if !status.success() {
        return Err(format!("server exited with {status}").into());
    }
    Ok(())
}

fn connect_retry(path: &std::path::Path) -> Result<Rendezvous> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Rendezvous::connect(path) {
            Ok(ep) => return Ok(ep),
            // The server may not have bound the socket yet.
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.into()),
        }
    }
}
