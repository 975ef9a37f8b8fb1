//! Part (c): the four data layouts with a realistic packet mix (simple
//! IMIX: 40/576/1500 bytes, 7:4:1) against allocating a `Vec` per packet
//! (Figure 5). Ring sides are two processes (producer `write`s each packet,
//! consumer `peek`s it); the `vec` baseline is two threads of one process
//! passing each packet's `Vec` over a bounded channel.

use std::sync::mpsc::sync_channel;
use std::time::Duration;

use zcio::ring::{Consumer, Layout, Producer};

use super::check::{end_of_stream, pattern, stamp, word, Cpu, Imix, Report, Side, Who};
use super::{collect, spawn, spec, Options, Part, RingGuard, Row, Task};
use crate::affinity::{cpu_for, pin};
use crate::child::Group;
use crate::clock::mono_ns;

/// Consumers compare the sequence word of every this-many-th packet (and
/// the length of every packet).
pub const PACKET_SAMPLE: u64 = 16;

/// A way of passing packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// A ring with this layout.
    Ring(Layout),
    /// `Vec` per packet over `sync_channel`, in one process.
    Vec,
}

impl Variant {
    /// All, in table order.
    pub const ALL: [Variant; 5] = [
        Variant::Ring(Layout::Continuous),
        Variant::Ring(Layout::Slotted),
        Variant::Ring(Layout::Variable),
        Variant::Ring(Layout::Descriptors),
        Variant::Vec,
    ];

    /// Name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Ring(Layout::Continuous) => "ring-continuous",
            Variant::Ring(Layout::Slotted) => "ring-slotted",
            Variant::Ring(Layout::Variable) => "ring-variable",
            Variant::Ring(Layout::Descriptors) => "ring-descriptors",
            Variant::Ring(Layout::Index) => "ring-index",
            Variant::Vec => "vec",
        }
    }
}

/// Packets per point.
pub fn packets(opts: &Options) -> u64 {
    ((opts.layout_volume as f64 / Imix::MEAN) as u64).max(16)
}

/// Descriptor entries: one per smallest packet that fits the data area, so
/// the data area and not the descriptor ring limits what is in flight.
pub fn entries(opts: &Options) -> u64 {
    (opts.layout_ring / Imix::MIN).next_power_of_two().max(2) as u64
}

/// Channel bound of the `vec` baseline: as many packets as the ring holds
/// on average.
pub fn vec_bound(opts: &Options) -> usize {
    ((opts.layout_ring as f64 / Imix::MEAN) as usize).max(1)
}

/// How (c) is run, for the notes.
pub fn note(opts: &Options) -> String {
    use crate::fmt::size;
    format!(
        "(c) simple IMIX (40/576/1500 B in the ratio 7:4:1, mean {:.0} B) from a seeded xorshift, \
         {} packets; rings of {} (slotted: {} slots; descriptors: {} entries); the consumer peeks \
         each packet and checks its length and every {}th sequence word; the vec baseline is \
         in-process (two threads pinned like the processes; a Vec allocated and filled per packet, \
         sent over a sync_channel of {} packets, dropped by the consumer)",
        Imix::MEAN,
        packets(opts),
        size(opts.layout_ring),
        size(opts.slot_size),
        entries(opts),
        PACKET_SAMPLE,
        vec_bound(opts)
    )
}

/// Measure once.
pub fn measure(v: Variant, opts: &Options) -> Result<Row, String> {
    let (packets, seed) = (packets(opts), opts.seed);
    let reports = match v {
        Variant::Vec => {
            let mut group = Group::new();
            let task = Task::VecPackets {
                packets,
                seed,
                bound: vec_bound(opts),
                cpus: [Some(cpu_for(0)), Some(cpu_for(1))],
            };
            group.push(spawn(&spec(task, None, opts))?, "vec baseline");
            collect(group, opts)?
        }
        Variant::Ring(layout) => {
            let guard = RingGuard::create(
                zcio::ring::Options::new()
                    .layout(layout)
                    .size(opts.layout_ring as u64)
                    .slot_size(opts.slot_size as u64)
                    .entries(entries(opts)),
            )?;
            let mut group = Group::new();
            let reader = Task::PacketReader {
                ring: guard.name().to_string(),
                packets,
                seed,
            };
            group.push(
                spawn(&spec(reader, Some(cpu_for(1)), opts))?,
                "packet reader",
            );
            let writer = Task::PacketWriter {
                ring: guard.name().to_string(),
                packets,
                seed,
            };
            group.push(
                spawn(&spec(writer, Some(cpu_for(0)), opts))?,
                "packet writer",
            );
            let reports = collect(group, opts)?;
            drop(guard);
            reports
        }
    };
    let mut row = Row::from_reports(Part::Layouts, v.name(), &reports)?;
    if let Variant::Ring(l) = v {
        row.ring_size = Some(opts.layout_ring as u64);
        row.layout = Some(l.name().to_string());
    }
    row.in_process = v == Variant::Vec;
    row.mpkt_per_sec = Some(if row.elapsed_s > 0.0 {
        (row.items_per_consumer.saturating_sub(1)) as f64 / row.elapsed_s / 1e6
    } else {
        0.0
    });
    Ok(row)
}

fn check_seq(got: u64, k: u64) -> Result<(), String> {
    if got != k {
        return Err(format!(
            "packet {k}: corrupt sequence word {got:#x} (expected {k:#x})"
        ));
    }
    Ok(())
}

/// Timing and CPU of a packet consumer.
struct Clock {
    who: Who,
    first: (u64, u64),
    last_ns: u64,
    cpu0: Cpu,
    cpu: (u64, u64),
}

impl Clock {
    fn new(who: Who) -> Self {
        Self {
            who,
            first: (0, 0),
            last_ns: 0,
            cpu0: Cpu::default(),
            cpu: (0, 0),
        }
    }

    /// Packet `k` of `n` (`len` bytes) received.
    fn tick(&mut self, k: u64, n: u64, len: usize) {
        if k == 0 {
            self.first = (mono_ns(), len as u64);
            self.cpu0 = Cpu::now(self.who);
        }
        if k + 1 == n {
            self.last_ns = mono_ns();
            self.cpu = Cpu::now(self.who).since(self.cpu0);
        }
    }

    fn report(&self, side: Side, bytes: u64, items: u64, checked: u64) -> Report {
        Report {
            side,
            bytes,
            items,
            first_bytes: self.first.1,
            first_ns: self.first.0,
            last_ns: self.last_ns,
            user_ns: self.cpu.0,
            sys_ns: self.cpu.1,
            checked,
            clean_end: true,
        }
    }
}

/// Producer: wait for the consumer, write `packets` IMIX packets, close.
pub fn packet_writer(
    ring: &str,
    packets: u64,
    seed: u64,
    timeout: Duration,
) -> Result<Report, String> {
    let mut p = Producer::open(ring).map_err(|e| format!("open ring {ring} as producer: {e}"))?;
    if p.wait_for_consumers(1, timeout) < 1 {
        return Err(format!("no consumer attached within {timeout:?}"));
    }
    let mut sizes = Imix::new(seed);
    let mut src = pattern(Imix::MAX);
    let mut bytes = 0u64;
    let cpu0 = Cpu::now(Who::Process);
    let first_ns = mono_ns();
    for k in 0..packets {
        let len = sizes.next_len();
        stamp(&mut src, k);
        match p.write(&src[..len]) {
            Ok(n) if n == len => {}
            Ok(n) => return Err(format!("packet {k}: wrote {n} of {len} bytes")),
            Err(e) => return Err(format!("packet {k} ({len} bytes): {e}")),
        }
        bytes += len as u64;
    }
    let last_ns = mono_ns();
    let (user_ns, sys_ns) = Cpu::now(Who::Process).since(cpu0);
    drop(p);
    Ok(Report::producer(
        bytes,
        packets,
        0,
        (first_ns, last_ns),
        (user_ns, sys_ns),
    ))
}

/// Consumer: peek every packet, check its length (and sampled sequence
/// words), release; then expect end of stream.
pub fn packet_reader(
    ring: &str,
    packets: u64,
    seed: u64,
    timeout: Duration,
) -> Result<Report, String> {
    let mut c = Consumer::open(ring).map_err(|e| format!("open ring {ring} as consumer: {e}"))?;
    let continuous = c.geometry().layout == Layout::Continuous;
    let mut sizes = Imix::new(seed);
    let mut clock = Clock::new(Who::Process);
    let (mut bytes, mut checked) = (0u64, 0u64);
    let early = |k: u64| format!("end of stream after {k} of {packets} packets");
    for k in 0..packets {
        let len = sizes.next_len();
        let sample = k % PACKET_SAMPLE == 0;
        if continuous {
            // A byte stream: take the packet's bytes, however they come.
            let mut got = 0;
            while got < len {
                let p = c
                    .peek(len - got)
                    .map_err(|e| format!("peek packet {k}: {e}"))?
                    .ok_or_else(|| early(k))?;
                if got == 0 && sample && p.len() >= 8 {
                    check_seq(crate::touch::peek_word(&p), k)?;
                    checked += 1;
                }
                got += p.len();
                p.release()
                    .map_err(|e| format!("release packet {k}: {e}"))?;
            }
        } else {
            let p = c
                .peek(Imix::MAX)
                .map_err(|e| format!("peek packet {k}: {e}"))?
                .ok_or_else(|| early(k))?;
            if p.len() != len {
                return Err(format!("packet {k}: {} bytes, expected {len}", p.len()));
            }
            if sample {
                check_seq(crate::touch::peek_word(&p), k)?;
                checked += 1;
            }
            p.release()
                .map_err(|e| format!("release packet {k}: {e}"))?;
        }
        bytes += len as u64;
        clock.tick(k, packets, len);
    }
    let mut r = clock.report(Side::Consumer, bytes, packets, checked);
    r.clean_end = end_of_stream(&mut c, timeout)?;
    Ok(r)
}

fn pin_thread(cpu: Option<usize>) {
    if let Some(c) = cpu {
        if let Err(e) = pin(c) {
            eprintln!("warning: {e}");
        }
    }
}

/// The in-process baseline: returns the producer thread's and the consumer
/// thread's reports (CPU time per thread).
pub fn vec_packets(
    packets: u64,
    seed: u64,
    bound: usize,
    cpus: [Option<usize>; 2],
) -> Result<Vec<Report>, String> {
    let (tx, rx) = sync_channel::<Vec<u8>>(bound);
    let producer = std::thread::Builder::new()
        .name("vec-producer".into())
        .spawn(move || -> Result<Report, String> {
            pin_thread(cpus[0]);
            let mut sizes = Imix::new(seed);
            let mut src = pattern(Imix::MAX);
            let mut bytes = 0u64;
            let cpu0 = Cpu::now(Who::Thread);
            let first_ns = mono_ns();
            for k in 0..packets {
                let len = sizes.next_len();
                stamp(&mut src, k);
                let mut v = Vec::with_capacity(len);
                v.extend_from_slice(&src[..len]);
                tx.send(v)
                    .map_err(|_| format!("packet {k}: consumer thread gone"))?;
                bytes += len as u64;
            }
            let last_ns = mono_ns();
            let (user_ns, sys_ns) = Cpu::now(Who::Thread).since(cpu0);
            Ok(Report::producer(
                bytes,
                packets,
                0,
                (first_ns, last_ns),
                (user_ns, sys_ns),
            ))
        })
        .map_err(|e| format!("spawn producer thread: {e}"))?;
    pin_thread(cpus[1]);
    let consumed = (|| -> Result<Report, String> {
        let mut sizes = Imix::new(seed);
        let mut clock = Clock::new(Who::Thread);
        let (mut bytes, mut checked) = (0u64, 0u64);
        for k in 0..packets {
            let len = sizes.next_len();
            let v = rx
                .recv()
                .map_err(|_| format!("producer thread stopped after {k} packets"))?;
            if v.len() != len {
                return Err(format!("packet {k}: {} bytes, expected {len}", v.len()));
            }
            if k % PACKET_SAMPLE == 0 {
                check_seq(word(zcio::View::from_slice(&v)), k)?;
                checked += 1;
            }
            drop(v);
            bytes += len as u64;
            clock.tick(k, packets, len);
        }
        Ok(clock.report(Side::Consumer, bytes, packets, checked))
    })();
    drop(rx); // a producer still sending fails instead of blocking
    let produced = producer
        .join()
        .map_err(|_| "producer thread panicked".to_string())?;
    // The consumer's error is the cause when both failed.
    let consumed = consumed?;
    Ok(vec![produced?, consumed])
}
