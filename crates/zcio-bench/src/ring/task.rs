//! The sides of a measurement as child tasks (a [`super::Spec`] given to
//! [`super::CHILD_ARG`]) and their dispatch in the child.

use std::os::fd::RawFd;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{layouts, sides, ReadMode, Report};

/// A side of one measurement, run in a child process.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub enum Task {
    /// Continuous ring producer: wait for `consumers`, write `volume` bytes
    /// in `call`-byte writes, close.
    RingWriter {
        /// Ring name.
        ring: String,
        /// Bytes per write.
        call: usize,
        /// Bytes in all.
        volume: u64,
        /// Consumers to wait for.
        consumers: usize,
    },
    /// Continuous ring consumer.
    RingReader {
        /// Ring name.
        ring: String,
        /// Bytes per read / peek.
        call: usize,
        /// Bytes expected.
        volume: u64,
        /// Copy, peek or peek + touch.
        mode: ReadMode,
    },
    /// Pipe producer; several fds: the same call to each (tee).
    PipeWriter {
        /// Inherited write ends.
        fds: Vec<RawFd>,
        /// Bytes per write.
        call: usize,
        /// Bytes in all (per pipe).
        volume: u64,
    },
    /// Pipe consumer.
    PipeReader {
        /// Inherited read end.
        fd: RawFd,
        /// Read buffer size.
        call: usize,
        /// Bytes expected.
        volume: u64,
    },
    /// Packet producer (IMIX sizes) into a ring of any data layout.
    PacketWriter {
        /// Ring name.
        ring: String,
        /// Packets to write.
        packets: u64,
        /// Seed of the size sequence.
        seed: u64,
    },
    /// Packet consumer (peek) of a ring of any data layout.
    PacketReader {
        /// Ring name.
        ring: String,
        /// Packets expected.
        packets: u64,
        /// Seed of the size sequence.
        seed: u64,
    },
    /// In-process baseline: a producer thread allocates a `Vec` per packet
    /// and sends it over a bounded channel to a consumer thread that drops
    /// it.
    VecPackets {
        /// Packets.
        packets: u64,
        /// Seed of the size sequence.
        seed: u64,
        /// Channel bound (packets in flight).
        bound: usize,
        /// CPUs for the producer and consumer threads.
        cpus: [Option<usize>; 2],
    },
}

/// Run a task (in the child process).
pub fn run_task(task: &Task, timeout: Duration) -> Result<Vec<Report>, String> {
    match task {
        Task::RingWriter {
            ring,
            call,
            volume,
            consumers,
        } => sides::ring_writer(ring, *call, *volume, *consumers, timeout).map(|r| vec![r]),
        Task::RingReader {
            ring,
            call,
            volume,
            mode,
        } => sides::ring_reader(ring, *call, *volume, *mode, timeout).map(|r| vec![r]),
        Task::PipeWriter { fds, call, volume } => {
            sides::pipe_writer(fds, *call, *volume).map(|r| vec![r])
        }
        Task::PipeReader { fd, call, volume } => {
            sides::pipe_reader(*fd, *call, *volume).map(|r| vec![r])
        }
        Task::PacketWriter {
            ring,
            packets,
            seed,
        } => layouts::packet_writer(ring, *packets, *seed, timeout).map(|r| vec![r]),
        Task::PacketReader {
            ring,
            packets,
            seed,
        } => layouts::packet_reader(ring, *packets, *seed, timeout).map(|r| vec![r]),
        Task::VecPackets {
            packets,
            seed,
            bound,
            cpus,
        } => layouts::vec_packets(*packets, *seed, *bound, *cpus),
    }
}
