//! Copy baselines: the same messages through a Linux pipe or a Unix stream
//! socket (two copies per hop: user → kernel → user), and in-process memcpy.

use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::time::Instant;

use super::Measured;
use crate::cpu::Window;
use crate::fds::take_fd;
use crate::pages::{read_pages, write_pages};

/// Originator: a private message buffer, a word per page, one write; its
/// CPU time over the messages after `warmup`.
pub fn send(fd: RawFd, size: usize, warmup: u64, count: u64) -> Result<Measured, String> {
    let mut out = take_fd(fd)?;
    let mut buf = vec![0u8; size];
    let mut cpu = Window::default();
    for seq in 0..warmup + count {
        if seq == warmup {
            cpu.start();
        }
        write_pages(&mut buf, seq);
        out.write_all(&buf).map_err(|e| format!("write: {e}"))?;
    }
    Ok(Measured::cpu_only(count, cpu.elapsed_ns()))
}

/// Receiver: read a whole message, a word per page.
pub fn recv(fd: RawFd, size: usize, warmup: u64, count: u64) -> Result<Measured, String> {
    let mut input = take_fd(fd)?;
    let mut buf = vec![0u8; size];
    let mut start = Instant::now();
    let mut cpu = Window::default();
    for seq in 0..warmup + count {
        if seq == warmup {
            start = Instant::now();
            cpu.start();
        }
        input
            .read_exact(&mut buf)
            .map_err(|e| format!("read #{seq}: {e}"))?;
        let (first, _) = read_pages(&buf);
        if first != seq {
            return Err(format!("message {seq}: first word {first}"));
        }
    }
    Ok(Measured {
        elapsed_ns: start.elapsed().as_nanos() as u64,
        msgs: count,
        wakes: 0,
        cpu_ns: cpu.elapsed_ns(),
        latency: None,
    })
}

/// Forwarder: read each message into a private buffer and write it on;
/// its CPU time over the messages after `warmup`.
pub fn forward(
    input: RawFd,
    output: RawFd,
    size: usize,
    warmup: u64,
    count: u64,
) -> Result<Measured, String> {
    let mut i = take_fd(input)?;
    let mut o = take_fd(output)?;
    let mut buf = vec![0u8; size];
    let mut cpu = Window::default();
    for seq in 0..warmup + count {
        if seq == warmup {
            cpu.start();
        }
        i.read_exact(&mut buf)
            .map_err(|e| format!("read #{seq}: {e}"))?;
        o.write_all(&buf)
            .map_err(|e| format!("write #{seq}: {e}"))?;
    }
    Ok(Measured::cpu_only(count, cpu.elapsed_ns()))
}

/// In-process reference: write a word per page, one memcpy, read a word
/// per page.
pub fn memcpy(size: usize, warmup: u64, count: u64) -> Measured {
    let mut src = vec![0u8; size];
    let mut dst = vec![0u8; size];
    let mut start = Instant::now();
    for seq in 0..warmup + count {
        if seq == warmup {
            start = Instant::now();
        }
        write_pages(&mut src, seq);
        dst.copy_from_slice(std::hint::black_box(&src));
        let (first, _) = read_pages(std::hint::black_box(&dst));
        std::hint::black_box(first);
    }
    Measured {
        elapsed_ns: start.elapsed().as_nanos() as u64,
        msgs: count,
        wakes: 0,
        cpu_ns: 0,
        latency: None,
    }
}
