//! Peer-to-peer I/O: a file sent to another process through an
//! association, first by the kernel's `sendfile`, then — after pushing a
//! checksum and a compressor — through zcio buffers, and back to the fast
//! path after popping them.
//!
//! ```sh
//! cargo run --release -p zcio --example splice        # spawns its own receiver
//! ```
//!
//! The receiver is this program re-executed: it connects to the sender's
//! TCP port on loopback and counts what arrives until the sender closes.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::process::{Command, ExitCode, Stdio};

use zcio::splice::module::Registry;
use zcio::splice::{splice, Increment, IoObject};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const MIB: u64 = 1 << 20;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [] => send(),
        [role, addr] if role == "receive" => receive(addr),
        _ => {
            eprintln!("usage: splice [receive ADDR]");
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

fn send() -> Result<()> {
    // 48 MiB of text-like data in a temporary file.
    let path = std::env::temp_dir().join(format!("zcio-splice-example-{}", std::process::id()));
    let line = b"an association moves data between I/O objects on the process's behalf\n";
    let data: Vec<u8> = line
        .iter()
        .copied()
        .cycle()
        .take((48 * MIB) as usize)
        .collect();
    std::fs::write(&path, &data)?;
    let file = std::fs::File::open(&path)?;
    std::fs::remove_file(&path)?;

    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    let mut receiver = Command::new(std::env::current_exe()?)
        .args(["receive", &addr])
        .stdout(Stdio::inherit())
        .spawn()?;
    let (sock, _) = listener.accept()?;

    let mut a = splice(
        IoObject::new(OwnedFd::from(file), "example file")?,
        IoObject::new(OwnedFd::from(sock), format!("tcp:{addr}"))?,
    )?;
    let c = a.run(Increment::Bytes(16 * MIB))?;
    println!("sender: {} MiB with {}", c.moved / MIB, a.status().mover);

    let reg = Registry::builtin();
    a.push(reg.open("crc32c")?)?;
    a.push(reg.open("zstd:level=1")?)?;
    let c = a.run(Increment::Bytes(16 * MIB))?;
    let st = a.status();
    println!(
        "sender: {} MiB with the {} through {} ({} bytes copied between modules), crc32c {}",
        c.moved / MIB,
        st.mover,
        st.modules.join(" → "),
        st.copied,
        a.control("crc32c", "value", None)?
    );

    a.pop()?; // flushes the zstd frame end to the socket
    a.pop()?;
    let c = a.run(Increment::Infinite)?;
    println!(
        "sender: {} MiB with {} (end of file: {})",
        c.moved / MIB,
        a.status().mover,
        c.eof
    );
    let st = a.close(); // closes the socket: the receiver sees the end
    println!("sender: {} MiB in all", st.moved / MIB);
    if !receiver.wait()?.success() {
        return Err("the receiver failed".into());
    }
    Ok(())
}

fn receive(addr: &str) -> Result<()> {
    let mut s = TcpStream::connect(addr)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = s.read(&mut buf)?;
        if k == 0 {
            break;
        }
        n += k as u64;
    }
    // 32 MiB plain + the middle 16 MiB compressed.
    println!("receiver: {n} bytes (the middle 16 MiB arrived compressed)");
    Ok(())
}
