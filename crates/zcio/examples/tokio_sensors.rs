//! Async zcio on tokio with typed messages, between two processes.
//!
//! ```sh
//! cargo run --release -p zcio --features tokio --example tokio_sensors
//! ```
//!
//! The parent listens; it starts itself again as three blocking "sensor"
//! connections in one child process, each sending `Reading`s (a
//! `#[repr(C)]` struct with a `bool` and an enum, so a hostile sender's
//! bytes could be invalid) over its own channel. One tokio task in the
//! parent waits on all three channels with `tokio::select!` — no thread
//! per channel, no CPU while they are idle — reads each reading back with
//! validation and the type tag, and shuts down on Ctrl-C or when every
//! sensor has hung up. A timer branch in the same `select!` shows that a
//! cancelled receive loses nothing.

use std::process::{Command, ExitCode};
use std::time::Duration;

use zcio::tokio::AsyncChannel;
use zcio::typed::Tag;
use zcio::{Channel, ChannelConfig, Listener, Pool, PoolConfig, RecvError};
use zerocopy::{FromZeros, Immutable, IntoBytes, KnownLayout};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// What a sensor reports. Only 0 and 1 are `bool`s and only the listed
/// discriminants are `Unit`s: anything else is refused on receipt.
#[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug)]
#[repr(u8)]
enum Unit {
    Celsius = 0,
    Pascal = 1,
    Percent = 2,
}

#[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug)]
#[repr(C)]
struct Reading {
    sensor: u32,
    seq: u32,
    value: f64,
    unit: Unit,
    alarm: bool,
    reserved: [u8; 6],
}

fn tag() -> Tag {
    Tag::new("example.Reading", 1)
}

const SENSORS: u32 = 3;
const READINGS: u32 = 1000;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [] => collector(),
        [role, path] if role == "sensors" => sensors(path),
        _ => Err("usage: tokio_sensors [sensors PATH]".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tokio_sensors: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The child: three blocking senders, one channel each.
fn sensors(path: &str) -> Result<()> {
    let pool = Pool::new(PoolConfig::named("sensors"));
    let chans: Vec<Channel> = (0..SENSORS)
        .map(|_| Channel::connect(path, ChannelConfig::default()))
        .collect::<std::result::Result<_, _>>()?;
    for seq in 0..READINGS {
        for (sensor, ch) in chans.iter().enumerate() {
            let mut r = pool.alloc_typed::<Reading>(Some(&tag()))?; // zeroed
            *r = Reading {
                sensor: sensor as u32,
                seq,
                value: f64::from(seq) * 0.5,
                unit: [Unit::Celsius, Unit::Pascal, Unit::Percent][sensor % 3],
                alarm: seq % 100 == 99,
                reserved: [0; 6],
            };
            ch.send(r.into_msg()?)?;
        }
    }
    Ok(())
}

/// The parent: one task, three channels.
fn collector() -> Result<()> {
    let path = std::env::temp_dir().join(format!("zcio-sensors-{}.sock", std::process::id()));
    let listener = Listener::bind(&path, ChannelConfig::default())?;
    let mut child = Command::new(std::env::current_exe()?)
        .arg("sensors")
        .arg(&path)
        .spawn()?;
    let chans: Vec<Channel> = (0..SENSORS)
        .map(|_| listener.accept_timeout(Duration::from_secs(10)))
        .collect::<std::result::Result<_, _>>()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (got, ticks, alarms) = rt.block_on(collect(chans))?;
    let status = child.wait()?;
    println!(
        "{got} readings from {SENSORS} sensors ({alarms} alarms), validated and in order; \
         the timer branch fired {ticks} times meanwhile; sensors exited with {status}"
    );
    if got != SENSORS * READINGS || !status.success() {
        return Err("readings missing".into());
    }
    Ok(())
}

async fn collect(chans: Vec<Channel>) -> Result<(u32, u32, u32)> {
    let c: Vec<AsyncChannel> = chans
        .into_iter()
        .map(AsyncChannel::new)
        .collect::<std::io::Result<_>>()?;
    let (mut next, mut open) = ([0u32; SENSORS as usize], [true; SENSORS as usize]);
    let (mut got, mut ticks, mut alarms) = (0, 0, 0);
    let tag = tag();
    let mut ctrl_c = std::pin::pin!(tokio::signal::ctrl_c());
    while open.iter().any(|o| *o) {
        // Every branch is a receive (cancel-safe) or a timer: whichever
        // loses the race is dropped without losing a message.
        let (i, m) = tokio::select! {
            m = c[0].recv(), if open[0] => (0, m),
            m = c[1].recv(), if open[1] => (1, m),
            m = c[2].recv(), if open[2] => (2, m),
            _ = tokio::time::sleep(Duration::from_micros(200)) => {
                ticks += 1;
                continue;
            }
            _ = &mut ctrl_c => break,
        };
        let msg = match m {
            Ok(msg) => msg,
            Err(RecvError::Disconnected) => {
                open[i] = false;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        // Copied out of the sender's buffer, then validated: a bad bool,
        // a bad Unit or a wrong tag is an error, never undefined behaviour.
        let r: Reading = msg.read_typed(Some(&tag))?;
        if r.sensor as usize != i || r.seq != next[i] {
            return Err(format!("sensor {i}: got {r:?}, expected seq {}", next[i]).into());
        }
        next[i] += 1;
        got += 1;
        alarms += u32::from(r.alarm);
    }
    Ok((got, ticks, alarms))
}
