//! In-process tests of the ring benchmark's sides (producer and consumer as
//! threads of the test process, real rings and pipes) and of its
//! arithmetic. The cross-process harness itself is exercised by
//! `zcio-bench ring --quick`.

use std::os::fd::IntoRawFd;
use std::time::Duration;

use zcio::ring::Layout;

use super::check::Imix;
use super::*;

const T: Duration = Duration::from_secs(20);

fn continuous(size: u64) -> RingGuard {
    RingGuard::create(
        zcio::ring::Options::new()
            .layout(Layout::Continuous)
            .size(size),
    )
    .unwrap()
}

#[test]
fn ring_stream_in_every_mode() {
    for mode in [ReadMode::Copy, ReadMode::Peek, ReadMode::PeekTouch] {
        let g = continuous(64 << 10);
        let (call, volume) = (4096, 4 << 20);
        let name = g.name().to_string();
        let w = std::thread::spawn(move || sides::ring_writer(&name, call, volume, 1, T));
        let r = sides::ring_reader(g.name(), call, volume, mode, T).unwrap();
        let p = w.join().unwrap().unwrap();
        assert_eq!((r.bytes, p.bytes), (volume, volume), "{mode:?}");
        assert_eq!(p.items, volume / call as u64);
        assert!(r.clean_end, "{mode:?}: the closed ring must end the stream");
        // Peek samples one word per 64 KiB; the others check every call.
        let want = match mode {
            ReadMode::Peek => volume / (64 << 10),
            _ => volume / call as u64,
        };
        assert_eq!(r.checked, want, "{mode:?}");
        assert!(r.last_ns >= r.first_ns);
    }
}

#[test]
fn ring_fanout_every_consumer_gets_everything() {
    let g = continuous(1 << 20);
    let (call, volume, n) = (64 << 10, 8 << 20, 3);
    let readers: Vec<_> = (0..n)
        .map(|_| {
            let name = g.name().to_string();
            std::thread::spawn(move || sides::ring_reader(&name, call, volume, ReadMode::Peek, T))
        })
        .collect();
    let p = sides::ring_writer(g.name(), call, volume, n, T).unwrap();
    let mut reports = vec![p];
    for r in readers {
        reports.push(r.join().unwrap().unwrap());
    }
    let row = Row::from_reports(Part::Fanout, "ring-peek", &reports).unwrap();
    assert_eq!(row.consumers, n as u32);
    assert_eq!(row.bytes_per_consumer, volume);
    assert!(row.clean_end);
}

#[test]
fn pipes_plain_and_tee() {
    for n in [1, 3] {
        let (call, volume) = (1000, 1_000_000);
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        for _ in 0..n {
            let (r, w, eff) = crate::fds::pipe_pair(Some(16 << 10)).unwrap();
            assert!(eff >= 4096);
            reads.push(r.into_raw_fd());
            writes.push(w.into_raw_fd());
        }
        let readers: Vec<_> = reads
            .into_iter()
            .map(|fd| std::thread::spawn(move || sides::pipe_reader(fd, call, volume)))
            .collect();
        let p = sides::pipe_writer(&writes, call, volume).unwrap();
        assert_eq!(p.bytes, volume);
        for r in readers {
            let r = r.join().unwrap().unwrap();
            assert_eq!(r.bytes, volume);
            assert_eq!(r.checked, volume / call as u64);
        }
    }
}

#[test]
fn packets_through_every_layout() {
    let opts = Options {
        layout_ring: 64 << 10,
        ..Options::quick()
    };
    let packets = 20_000;
    for layout in [
        Layout::Continuous,
        Layout::Slotted,
        Layout::Variable,
        Layout::Descriptors,
    ] {
        let g = RingGuard::create(
            zcio::ring::Options::new()
                .layout(layout)
                .size(opts.layout_ring as u64)
                .slot_size(opts.slot_size as u64)
                .entries(layouts::entries(&opts)),
        )
        .unwrap();
        let name = g.name().to_string();
        let w = std::thread::spawn(move || layouts::packet_writer(&name, packets, 9, T));
        let r = layouts::packet_reader(g.name(), packets, 9, T).unwrap();
        let p = w.join().unwrap().unwrap();
        assert_eq!(r.items, packets, "{layout:?}");
        assert_eq!(r.bytes, p.bytes, "{layout:?}");
        assert_eq!(r.checked, packets.div_ceil(layouts::PACKET_SAMPLE));
        assert!(r.clean_end, "{layout:?}");
        // The mean of the mix, give or take.
        let mean = r.bytes as f64 / packets as f64;
        assert!((mean / Imix::MEAN - 1.0).abs() < 0.05, "{mean}");
    }
}

#[test]
fn vec_baseline_reports_both_threads() {
    let rs = layouts::vec_packets(10_000, 3, 100, [None, None]).unwrap();
    assert_eq!(rs.len(), 2);
    assert_eq!(rs[0].side, Side::Producer);
    assert_eq!(rs[1].side, Side::Consumer);
    assert_eq!(rs[0].bytes, rs[1].bytes);
    assert_eq!(rs[1].items, 10_000);
}

fn report(side: Side, bytes: u64, first: u64, t: (u64, u64), cpu_ms: u64) -> Report {
    Report {
        side,
        bytes,
        items: 0,
        first_bytes: first,
        first_ns: t.0,
        last_ns: t.1,
        user_ns: cpu_ms * 1_000_000,
        sys_ns: 0,
        checked: 0,
        clean_end: true,
    }
}

#[test]
fn row_arithmetic() {
    const G: u64 = 1 << 30;
    // Two consumers of 1 GiB each, 1 ms of the first item excluded.
    let rs = [
        report(Side::Producer, G, 0, (0, 0), 500),
        report(Side::Consumer, G, 1 << 20, (1_000_000, 1_001_000_000), 250),
        report(Side::Consumer, G, 1 << 20, (2_000_000, 2_001_000_000), 250),
    ];
    let r = Row::from_reports(Part::Fanout, "x", &rs).unwrap();
    assert_eq!(r.consumers, 2);
    assert!((r.elapsed_s - 2.0).abs() < 1e-9);
    let after = 2.0 * (G - (1 << 20)) as f64;
    assert!((r.gb_per_sec - after / 2e9).abs() < 1e-9);
    assert!((r.producer_cpu_s_per_gib - 0.5).abs() < 1e-9);
    // Consumers' 0.5 s cover 2 GiB minus the first items: scaled up.
    let cons = 0.5 * (2 * G) as f64 / after / 2.0;
    assert!((r.consumer_cpu_s_per_gib - cons).abs() < 1e-9);
    assert!((r.cpu_s_per_gib - (0.25 + cons)).abs() < 1e-9);
    assert!(Row::from_reports(Part::Fanout, "x", &rs[..1]).is_err());
}

#[test]
fn medians_and_plans() {
    let rs = [
        report(Side::Producer, 1 << 30, 0, (0, 0), 1),
        report(Side::Consumer, 1 << 30, 0, (0, 1_000_000_000), 1),
    ];
    let mut rows = Vec::new();
    for gb in [3.0, 1.0, 2.0] {
        let mut r = Row::from_reports(Part::Copy, "pipe", &rs).unwrap();
        r.gb_per_sec = gb;
        rows.push(r);
    }
    let mut other = rows[0].clone();
    other.variant = "ring-copy".into();
    rows.push(other);
    let m = median_rows(rows);
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].gb_per_sec, 2.0);

    // Quick: 5 (ring, call) points × 4, 4 consumer counts × 2, 5 layouts.
    let q = Options::quick();
    assert_eq!(plan(&q).len(), 5 * 4 + 4 * 2 + 5);
    validate(&q).unwrap();
    let full = Options::full();
    assert_eq!(
        plan(&full)
            .iter()
            .filter(|j| matches!(j, Job::Copy { .. }))
            .count(),
        46 * 4
    );
    assert!(validate(&Options {
        ring_sizes: vec![3000],
        ..Options::quick()
    })
    .is_err());
    // Volumes: whole calls, ≥ 16 ring-fulls unless the call cap binds.
    assert_eq!(copy_pipe::volume(&full, 64 << 20, 1 << 20), 1 << 30);
    assert_eq!(copy_pipe::volume(&full, 64 << 20, 64), 64 * (4 << 20));
    assert_eq!(copy_pipe::volume(&q, 64 << 10, 4096), 256 << 20);
}
