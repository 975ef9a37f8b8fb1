//! The sides of a measurement as child tasks and their dispatch.

use std::os::fd::RawFd;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{burst, chain, cksum, latency, Sample};

/// A side of one measurement, run in a child process.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub enum Task {
    /// (a) rendezvous server.
    RdvServer {
        /// Listener path.
        path: String,
        /// Which variant it serves.
        variant: latency::Variant,
    },
    /// (a) rendezvous client (measures).
    RdvClient {
        /// Listener path.
        path: String,
        /// Variant.
        variant: latency::Variant,
        /// Unmeasured iterations.
        warmup: u64,
        /// Measured iterations.
        iters: u64,
    },
    /// (a) pipe ping-pong side.
    PipePing {
        /// Read end.
        rfd: RawFd,
        /// Write end.
        wfd: RawFd,
        /// Unmeasured iterations.
        warmup: u64,
        /// Measured iterations.
        iters: u64,
        /// Client (measures) or echo server.
        client: bool,
    },
    /// (a) futex ping-pong side.
    FutexPing {
        /// The shared memfd.
        fd: RawFd,
        /// Unmeasured iterations.
        warmup: u64,
        /// Measured iterations.
        iters: u64,
        /// Client (measures) or server.
        client: bool,
    },
    /// (b), (e) chain source.
    ChainSource {
        /// Listener path.
        path: String,
        /// Read end of the sink's acknowledgements.
        ack_fd: RawFd,
        /// Unmeasured one-at-a-time messages.
        warmup: u64,
        /// Measured one-at-a-time messages.
        latency_msgs: u64,
        /// Streamed messages.
        stream_msgs: u64,
        /// Message size.
        size: usize,
    },
    /// (b) relay process.
    ChainRelay {
        /// Upstream listener to connect to.
        up: String,
        /// Own listener for the downstream.
        down: String,
        /// Copy per hop.
        copy: bool,
    },
    /// (b), (e) chain sink (measures).
    ChainSink {
        /// Listener to connect to.
        path: String,
        /// Write end of the acknowledgements.
        ack_fd: RawFd,
        /// Unmeasured one-at-a-time messages.
        warmup: u64,
        /// Measured one-at-a-time messages.
        latency_msgs: u64,
        /// Streamed messages.
        stream_msgs: u64,
    },
    /// (c) sender.
    BurstSend {
        /// Transport.
        kind: burst::Kind,
        /// Message size.
        size: usize,
        /// Unmeasured rounds (included in `rounds`).
        warmup: u64,
        /// Rounds in all.
        rounds: u64,
        /// Write end of the stamp pipe.
        ctl_fd: RawFd,
        /// Read end of the acknowledgement pipe.
        ack_fd: RawFd,
    },
    /// (c) receiver (measures).
    BurstRecv {
        /// Transport.
        kind: burst::Kind,
        /// Message size.
        size: usize,
        /// Unmeasured rounds (included in `rounds`).
        warmup: u64,
        /// Rounds in all.
        rounds: u64,
        /// Read end of the stamp pipe.
        ctl_fd: RawFd,
        /// Write end of the acknowledgement pipe.
        ack_fd: RawFd,
    },
    /// (d) producer.
    CksumProducer {
        /// Listener path.
        path: String,
        /// Message size.
        size: usize,
        /// Bytes in all.
        volume: u64,
    },
    /// (d) consumer (measures).
    CksumConsumer {
        /// Listener path (binds).
        path: String,
        /// Message size.
        size: usize,
        /// Bytes in all.
        volume: u64,
    },
    /// (d) in-process checksum (measures).
    CksumLocal {
        /// Message size.
        size: usize,
        /// Bytes in all.
        volume: u64,
    },
}

/// Run a task (in the child process).
pub fn run(task: &Task, deadline: Instant) -> Result<Option<Sample>, String> {
    match task {
        Task::RdvServer { path, variant } => {
            latency::rdv_server(path, *variant, deadline).map(|()| None)
        }
        Task::RdvClient {
            path,
            variant,
            warmup,
            iters,
        } => latency::rdv_client(path, *variant, *warmup, *iters, deadline).map(Some),
        Task::PipePing {
            rfd,
            wfd,
            warmup,
            iters,
            client,
        } => latency::pipe_ping(*rfd, *wfd, *warmup, *iters, *client),
        Task::FutexPing {
            fd,
            warmup,
            iters,
            client,
        } => latency::futex_ping(*fd, *warmup, *iters, *client, deadline),
        Task::ChainSource {
            path,
            ack_fd,
            warmup,
            latency_msgs,
            stream_msgs,
            size,
        } => chain::source(
            path,
            *ack_fd,
            *warmup,
            *latency_msgs,
            *stream_msgs,
            *size,
            deadline,
        )
        .map(Some),
        Task::ChainRelay { up, down, copy } => {
            chain::relay_side(up, down, *copy, deadline).map(Some)
        }
        Task::ChainSink {
            path,
            ack_fd,
            warmup,
            latency_msgs,
            stream_msgs,
        } => chain::sink(
            path,
            *ack_fd,
            *warmup,
            *latency_msgs,
            *stream_msgs,
            deadline,
        )
        .map(Some),
        Task::BurstSend {
            kind,
            size,
            rounds,
            ctl_fd,
            ack_fd,
            ..
        } => burst::sender(kind, *size, *rounds, *ctl_fd, *ack_fd, deadline).map(|()| None),
        Task::BurstRecv {
            kind,
            size,
            warmup,
            rounds,
            ctl_fd,
            ack_fd,
        } => burst::receiver(kind, *size, *warmup, *rounds, *ctl_fd, *ack_fd, deadline).map(Some),
        Task::CksumProducer { path, size, volume } => {
            cksum::producer(path, *size, *volume, deadline).map(|()| None)
        }
        Task::CksumConsumer { path, size, volume } => {
            cksum::consumer(path, *size, *volume, deadline).map(Some)
        }
        Task::CksumLocal { size, volume } => cksum::local(*size, *volume).map(Some),
    }
}
