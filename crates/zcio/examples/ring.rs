//! A Beltway ring between two processes: one producer writes a stream of
//! records once into a named ring; a consumer reads them in place.
//!
//! ```sh
//! cargo run --release -p zcio --example ring             # spawns its own consumer
//! ```
//!
//! The ring is a file under `/dev/shm` (`$ZCIO_RING_DIR` overrides), so its
//! file mode decides who may attach; any number of consumers could join, each
//! with a private cursor. `peek` hands out the block in place as a
//! `zcio::View` (any attached process could write the ring, so there is no
//! `&[u8]`); `release` moves the cursor on. Closing the producer ends the
//! stream: the consumer's `peek` returns `Ok(None)`.

use std::process::{Command, ExitCode};
use std::time::Duration;

use zcio::ring::{Consumer, Layout, Options, Producer};

const RECORDS: u64 = 10_000;
const RECORD: usize = 4096;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [] => produce(&format!("example-{}", std::process::id())),
        [role, name] if role == "consume" => consume(name),
        _ => {
            eprintln!("usage: ring [consume NAME]");
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

fn produce(name: &str) -> Result<()> {
    // A ring of variable-size records (in-band headers), 4 MiB of data;
    // the default overflow policy blocks the producer while a consumer lags.
    let map = Options::new()
        .layout(Layout::Variable)
        .size(4 << 20)
        .mode(0o600)
        .create(name)?;
    let mut producer = Producer::attach(map)?;
    let mut consumer = Command::new(std::env::current_exe()?)
        .arg("consume")
        .arg(name)
        .spawn()?;
    // Data written before a consumer joins is not replayed to it (it starts
    // at the head); wait for it so it sees the whole stream.
    if producer.wait_for_consumers(1, Duration::from_secs(10)) == 0 {
        let _ = consumer.kill();
        zcio::ring::unlink(name)?;
        return Err("the consumer did not attach within 10 s".into());
    }
    let mut record = vec![0u8; RECORD];
    for i in 0..RECORDS {
        record[..8].copy_from_slice(&i.to_le_bytes());
        record[8..].fill(i as u8);
        producer.write(&record)?; // one copy into the ring; waits while full (up to 10 s)
    }
    producer.close(); // end of stream
    let status = consumer.wait()?;
    zcio::ring::unlink(name)?;
    if !status.success() {
        return Err(format!("consumer exited with {status}").into());
    }
    Ok(())
}

fn consume(name: &str) -> Result<()> {
    let mut consumer = Consumer::open(name)?; // starts at the head (Start::Newest)
    let mut next = 0u64;
    let mut bytes = 0usize;
    while let Some(block) = consumer.peek_timeout(RECORD, Duration::from_secs(10))? {
        let view = block.view();
        // Copy out the field we act on, then validate the copy.
        let seq = view.read_u64_le(0);
        if seq != Some(next) || view.len() != RECORD {
            return Err(format!("record {next}: got {seq:?}, {} bytes", view.len()).into());
        }
        bytes += view.len();
        block.release()?; // the producer may now reuse the space
        next += 1;
    }
    println!(
        "consumer: {next} records, {:.1} MiB read in place from ring '{name}'",
        bytes as f64 / (1 << 20) as f64
    );
    if next != RECORDS {
        return Err(format!("expected {RECORDS} records, got {next}").into());
    }
    Ok(())
}
