//! A hostile peer speaking the wire protocol by hand (see
//! `zcio_testkit::hostile`) against a victim `Listener` in a child process. The
//! victim must answer every kind of garbage with a typed error — never
//! panic, hang or die of SIGBUS/SIGSEGV (it must exit 0 at the end) — and
//! stay usable after malformed-but-framed input. Forged notices must
//! release nothing.

mod common;

use std::os::fd::AsFd;

use common::hostile::*;
use zcio::internals::segment::Handshake;
use zcio::internals::sys::fdpass::{self, RecvOutcome};
use zcio::internals::sys::mmap::{Access, Mapping};
use zcio::internals::wire::{self, Ctl, Desc, Notice, CTL_LEN, LAYOUT_VERSION};

#[test]
fn malformed_input_gets_typed_errors_and_channel_stays_usable() {
    let (sock, mut kid) = start_victim("hostile-rx");
    kid.send("accept");
    let mut h = Hostile::connect(sock.path());
    assert_eq!(kid.next_report(), "accept ok");
    let ok1 = "recv Ok(\"valid-1\")";

    // Unknown region slot; the rejected descriptor's token comes back.
    h.push(&[desc(7, 1, 0, 10, 1001)]);
    assert_eq!(kid.ask("recv"), "recv Err(Malformed(UnknownRegion(7)))");
    assert_eq!(h.notices(), [1001]);

    // A properly sealed region: a valid message gets through.
    let r0 = sealed_region("hostile-r0", 16384, b"valid-1");
    h.region(0, 16384, &r0);
    h.push(&[desc(0, 1, 0, 7, 2001)]);
    assert_eq!(kid.ask("recv"), ok1);
    assert_eq!(h.notices(), [2001]);

    // Out of bounds (incl. u64 overflow) and empty slices.
    let big = u64::MAX - 1;
    h.push(&[
        desc(0, 1, 16380, 10, 3001),
        desc(0, 1, big, 10, 3002),
        desc(0, 1, 0, u64::MAX, 3003),
    ]);
    h.push(&[
        desc(0, 1, 16384, 1, 3004),
        desc(0, 1, 0, 0, 3005),
        desc(0, 1, 0, 7, 3006),
    ]);
    let oob = |o: u64, l: u64| {
        format!("Err(Malformed(OutOfBounds {{ offset: {o}, len: {l}, region_len: 16384 }}))")
    };
    let want = [
        oob(16380, 10),
        oob(big, 10),
        oob(0, u64::MAX),
        oob(16384, 1),
        "Err(Malformed(EmptySlice))".into(),
    ];
    assert_eq!(
        kid.ask("drain"),
        format!(
            "drained {}; Ok(\"valid-1\"); Err(WouldBlock)",
            want.join("; ")
        )
    );
    assert_eq!(h.notices(), (3001..=3006).collect::<Vec<_>>());

    // Framing: bad counts, a bad count inside a message, unknown second slice.
    h.push(&[
        desc(0, 0, 0, 7, 4001),
        desc(0, 1000, 0, 7, 4002),
        desc(0, 65, 0, 7, 4003),
    ]);
    h.push(&[desc(0, 2, 0, 4, 4004), desc(0, 5, 4, 3, 4005)]);
    h.push(&[desc(0, 2, 0, 4, 4006), desc(9, 0, 0, 1, 4007)]);
    h.push(&[desc(0, 2, 0, 5, 4008), desc(0, 0, 5, 2, 4009)]);
    assert_eq!(
        kid.ask("drain"),
        "drained Err(Malformed(BadCount(0))); Err(Malformed(BadCount(1000))); Err(Malformed(BadCount(65))); \
         Err(Malformed(BadCount(5))); Err(Malformed(UnknownRegion(9))); Ok(\"valid-1\"); Err(WouldBlock)"
    );
    let mut n = h.notices();
    n.sort_unstable();
    assert_eq!(n, (4001..=4009).collect::<Vec<_>>());
    h.push(&[desc(0, 3, 0, 7, 4010)]); // claims 3 slices, only 1 published
    assert_eq!(
        kid.ask("drain"),
        "drained Err(Malformed(BadCount(3))); Err(WouldBlock)"
    );
    h.push(&[desc(0, 1, 0, 7, 4011)]);
    assert_eq!(kid.ask("recv"), ok1);
    assert_eq!(h.notices(), [4010, 4011]);

    // Random bytes as descriptors: every entry is rejected and returned.
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let junk: Vec<Desc> = (0..16)
        .map(|_| desc(rnd() as u32, rnd() as u32 % 80, rnd(), rnd(), rnd()))
        .collect();
    h.push(&junk);
    let got = kid.ask("drain");
    let parts: Vec<&str> = got.trim_start_matches("drained ").split("; ").collect();
    assert_eq!(parts.last(), Some(&"Err(WouldBlock)"), "{got}");
    assert!(
        parts[..parts.len() - 1]
            .iter()
            .all(|p| p.starts_with("Err(Malformed(")),
        "{got}"
    );
    let mut n = h.notices();
    let mut tokens: Vec<u64> = junk.iter().map(|d| d.token).collect();
    n.sort_unstable();
    tokens.sort_unstable();
    assert_eq!(
        n, tokens,
        "every garbage descriptor's token is returned exactly once"
    );

    // Garbage control records; each counted, no fd leaked, then a valid region.
    let before = kid.ask("stats");
    let fds_before = open_fds(kid.pid());
    let mut kind99 = [0u8; CTL_LEN];
    kind99[0] = 99;
    let r = sealed_region("hostile-junk", 4096, b"");
    let bad_slot = Ctl::Region {
        slot: wire::MAX_REGION_SLOTS,
        len: 4096,
    }
    .encode();
    h.ctl(&kind99, &[r.as_fd()]);
    h.ctl(&[1, 2, 3, 4, 5], &[]);
    h.ctl(&[7u8; 100], &[r.as_fd()]);
    h.ctl(&bad_slot, &[r.as_fd()]);
    h.ctl(
        &Ctl::Region { slot: 1, len: 4096 }.encode(),
        &[r.as_fd(), r.as_fd()],
    );
    h.ctl(
        &Handshake::Welcome {
            magic: wire::SEGMENT_MAGIC.to_le_bytes(),
            version: LAYOUT_VERSION,
        }
        .encode(),
        &[],
    );
    h.ctl(&Ctl::SingleUse { len: 4096 }.encode(), &[]);
    h.ctl(&hello(4096), &[r.as_fd()]);
    let r1 = sealed_region("hostile-r1", 4096, b"valid-2");
    h.region(1, 4096, &r1);
    h.push(&[desc(1, 1, 0, 7, 5001)]);
    assert_eq!(kid.ask("recv"), "recv Ok(\"valid-2\")");
    let after = kid.ask("stats");
    let field = |s: &str, k: &str| -> u64 {
        s.split(' ')
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    assert_eq!(
        field(&after, "malformed=") - field(&before, "malformed="),
        8,
        "{before} / {after}"
    );
    assert_eq!(
        field(&after, "regions_received=") - field(&before, "regions_received="),
        1
    );
    assert_eq!(
        open_fds(kid.pid()),
        fds_before + 1,
        "only the valid region's fd is kept"
    );

    // Regions the victim must refuse to map: unsealed, shorter than
    // claimed, bad lengths. Then truncate the unsealed one (the SIGBUS
    // attack): the victim never mapped it.
    let unsealed = unsealed_region("hostile-unsealed", 16384);
    h.region(2, 16384, &unsealed);
    h.region(3, 1 << 20, sealed_region("hostile-short", 4096, b""));
    h.region(4, 100, sealed_region("hostile-odd", 4096, b""));
    h.region(5, 0, sealed_region("hostile-zero", 4096, b""));
    h.region(6, !4095, sealed_region("hostile-huge", 4096, b""));
    h.region(8, 4096, sealed_region("hostile-larger", 8192, b"")); // maps only the claimed 4096
    for s in [2, 3, 4, 5, 6] {
        h.push(&[desc(s, 1, 0, 1, 6000 + u64::from(s))]);
        assert_eq!(
            kid.ask("recv"),
            format!("recv Err(Malformed(UnknownRegion({s})))")
        );
    }
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", kid.pid())).unwrap();
    assert!(
        !maps.contains("hostile-unsealed") && !maps.contains("hostile-short"),
        "victim mapped a refused region"
    );
    rustix::fs::ftruncate(&unsealed, 0).unwrap();
    h.push(&[desc(8, 1, 4096, 1, 6008)]);
    assert_eq!(
        kid.ask("recv"),
        "recv Err(Malformed(OutOfBounds { offset: 4096, len: 1, region_len: 4096 }))"
    );

    // Single-use descriptors without (valid) regions, then a valid one.
    h.push(&[desc(wire::SINGLE_USE_SLOT, 1, 0, 5, 7001)]);
    assert_eq!(kid.ask("recv"), "recv Err(Malformed(NoSingleUseRegion))");
    h.ctl(
        &Ctl::SingleUse { len: 4096 }.encode(),
        &[unsealed_region("hostile-su-bad", 4096).as_fd()],
    );
    h.push(&[desc(wire::SINGLE_USE_SLOT, 1, 0, 5, 7002)]);
    assert_eq!(kid.ask("recv"), "recv Err(Malformed(NoSingleUseRegion))");
    h.ctl(
        &Ctl::SingleUse { len: 4096 }.encode(),
        &[sealed_region("hostile-su", 4096, b"single").as_fd()],
    );
    h.push(&[desc(wire::SINGLE_USE_SLOT, 1, 0, 6, 7003)]);
    assert_eq!(kid.ask("recv"), "recv Ok(\"single\")");
    h.push(&[desc(0, 1, 0, 7, 7004)]);
    assert_eq!(kid.ask("recv"), ok1, "still usable after all of the above");

    // A corrupt counter: the producer's tail far ahead of the head.
    let t = h
        .hdr(wire::C2L_MSGS)
        .prod
        .tail
        .load(std::sync::atomic::Ordering::Relaxed);
    h.hdr(wire::C2L_MSGS)
        .prod
        .tail
        .store(t + 1_000_000, std::sync::atomic::Ordering::Release);
    assert_eq!(kid.ask("recv"), "recv Err(Corrupt)");
    let again = kid.ask("recv");
    assert!(
        again == "recv Err(Corrupt)" || again == "recv Err(Disconnected)",
        "{again}"
    );
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
}

/// Read the victim's first region announcement and its one 7-byte
/// message ("hello-1") like a receiver: the descriptor, and the region's
/// fd and length.
fn take_hello_1(h: &mut Hostile) -> (Desc, (std::os::fd::OwnedFd, u64)) {
    let mut buf = [0u8; CTL_LEN];
    let Ok(RecvOutcome::Record(mut rec)) = fdpass::recv(&h.sock, &mut buf, false) else {
        panic!("no region")
    };
    let Some(Ctl::Region { slot: 0, len }) = Ctl::decode(&buf[..rec.len]) else {
        panic!("not a region record")
    };
    assert_eq!(h.msgs_in.available().unwrap(), 1);
    let d = h.msgs_in.peek(0);
    h.msgs_in.release(1);
    assert_eq!((d.region, d.count, d.len), (0, 1, 7));
    let fd = rec.fds.remove(0);
    let m = Mapping::map(&fd, len as usize, Access::ReadOnly, false).unwrap();
    assert!(d.offset + d.len <= len);
    // SAFETY: the descriptor is in bounds of the `len`-byte mapping (checked).
    let bytes = unsafe { std::slice::from_raw_parts(m.as_ptr().add(d.offset as usize), 7) };
    assert_eq!(bytes, b"hello-1");
    (d, (fd, len))
}

#[test]
fn forged_notices_release_nothing() {
    let (sock, mut kid) = start_victim("hostile-tx");
    kid.send("accept");
    let mut h = Hostile::connect(sock.path());
    assert_eq!(kid.next_report(), "accept ok");
    assert_eq!(kid.ask("send hello-1"), "sent ok in_use=1 held=1");
    let (d, _) = take_hello_1(&mut h);

    let t = d.token;
    h.forge(&[t ^ (1 << 32), t + 1, u64::MAX, 0xDEAD_BEEF]);
    assert_eq!(
        kid.ask("reclaim"),
        "reclaim released=0 held=1 in_use=1 bad_notices=4"
    );
    // Unknown kinds and escapes of slots never announced are bad notices
    // too, and release nothing.
    h.forge_notices(&[
        Notice {
            token: t,
            kind: 7,
            reserved: 0,
        },
        Notice {
            token: 99,
            kind: wire::NOTICE_ESCAPED,
            reserved: 0,
        },
    ]);
    assert_eq!(
        kid.ask("reclaim"),
        "reclaim released=0 held=1 in_use=1 bad_notices=6"
    );
    h.forge(&[t]);
    assert_eq!(
        kid.ask("reclaim"),
        "reclaim released=1 held=0 in_use=0 bad_notices=6"
    );
    h.forge(&[t]); // replay
    assert_eq!(
        kid.ask("reclaim"),
        "reclaim released=0 held=0 in_use=0 bad_notices=7"
    );

    // A corrupt notice ring: the peer can no longer return buffers, so the
    // victim treats it as gone — it retires what the peer held (the peer is
    // alive and may still read it, so it is never reused) — and sending
    // fails with a typed error from then on.
    assert_eq!(kid.ask("send hello-2"), "sent ok in_use=1 held=1");
    h.hdr(wire::C2L_NOTICES)
        .prod
        .tail
        .store(u64::MAX / 2, std::sync::atomic::Ordering::Release);
    assert_eq!(
        kid.ask("reclaim"),
        "reclaim released=0 held=0 in_use=0 bad_notices=7"
    );
    let r = kid.ask("flood 100");
    assert!(
        r.starts_with("flood sent=0") && r.ends_with(" err=Disconnected in_use=0 held=0"),
        "{r}"
    );
    drop(h);
    assert_eq!(kid.ask("check"), "check alive=false held=0 in_use=0");
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
}

#[test]
fn single_use_flood_is_bounded() {
    let (sock, mut kid) = start_victim("hostile-flood");
    kid.send("accept");
    let mut h = Hostile::connect(sock.path());
    assert_eq!(kid.next_report(), "accept ok");
    let base = open_fds(kid.pid());
    let r = sealed_region("hostile-flood", 4096, b"");
    // Up to twice the ring size is tolerated (an honest sender can be a
    // ring ahead); the channel stays usable.
    for _ in 0..2 * ENTRIES {
        h.ctl(&Ctl::SingleUse { len: 4096 }.encode(), &[r.as_fd()]);
    }
    // A descriptor for an unknown slot makes the victim read its socket.
    h.push(&[desc(9, 1, 0, 1, 0)]);
    assert_eq!(kid.ask("recv"), "recv Err(Malformed(UnknownRegion(9)))");
    // Beyond that it is a flood: dropping records would misalign the FIFO,
    // so the victim closes the channel and keeps nothing.
    for _ in 0..100 {
        h.ctl(&Ctl::SingleUse { len: 4096 }.encode(), &[r.as_fd()]);
    }
    h.push(&[desc(9, 1, 0, 1, 1)]);
    assert_eq!(kid.ask("recv"), "recv Err(Malformed(UnknownRegion(9)))");
    assert_eq!(kid.ask("recv"), "recv Err(Disconnected)");
    let now = open_fds(kid.pid());
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
    assert!(
        now <= base + 2 * ENTRIES as usize + 1,
        "flooded single-use regions kept: {base} → {now} fds"
    );
}

/// Announcing a huge sparse (sealed) region must not make the victim
/// allocate it: the peer chooses the size, the victim pays for it.
#[test]
fn announced_sparse_region_is_not_allocated_by_victim() {
    let (sock, mut kid) = start_victim("hostile-sparse");
    kid.send("accept");
    let mut h = Hostile::connect(sock.path());
    assert_eq!(kid.next_report(), "accept ok");
    let before = rss_shmem_kib(kid.pid());
    let len = 256u64 << 20;
    h.region(0, len, sealed_region("hostile-sparse", len, b"x"));
    h.push(&[desc(0, 1, 0, 1, 1)]);
    assert_eq!(kid.ask("recv"), "recv Ok(\"x\")");
    let after = rss_shmem_kib(kid.pid());
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
    assert!(
        after - before < 32 << 10,
        "a 1-byte message cost the victim {} MiB",
        (after - before) >> 10
    );
}

#[test]
#[ignore = "child process entry point"]
fn child_victim() {
    if common::child_role("hostile-victim").is_some() {
        common::hostile::victim();
    }
}

/// The same forgeries against a message copied into a small-message slot:
/// a slot comes back only by the one notice for its token, once.
#[test]
fn forged_notices_free_no_slot() {
    let (sock, mut kid) = start_victim_with_slots("hostile-slots", 2);
    kid.send("accept");
    let mut h = Hostile::connect(sock.path());
    assert_eq!(kid.next_report(), "accept ok");
    assert_eq!(kid.ask("send hello-1"), "sent ok in_use=0 held=1");
    assert_eq!(kid.ask("copied"), "copied 1");
    let (d, (fd, len)) = take_hello_1(&mut h);
    // The receiver got a read-only file: it cannot write the slots.
    assert!(Mapping::map(&fd, len as usize, Access::ReadWrite, false).is_err());

    let t = d.token;
    h.forge(&[t ^ (1 << 32), t + 1, u64::MAX, 0xDEAD_BEEF]);
    assert_eq!(
        kid.ask("reclaim"),
        "reclaim released=0 held=1 in_use=0 bad_notices=4"
    );
    h.forge(&[t]);
    assert_eq!(
        kid.ask("reclaim"),
        "reclaim released=1 held=0 in_use=0 bad_notices=4"
    );
    h.forge(&[t]); // replay: the slot is not freed twice
    assert_eq!(
        kid.ask("reclaim"),
        "reclaim released=0 held=0 in_use=0 bad_notices=5"
    );
    // Two slots: two more copies, then (the peer holding both) a lent one.
    for i in 2..4 {
        assert!(kid.ask(&format!("send hello-{i}")).starts_with("sent ok"));
    }
    assert_eq!(kid.ask("copied"), "copied 3");
    assert_eq!(kid.ask("send hello-4"), "sent ok in_use=1 held=3");
    assert_eq!(kid.ask("copied"), "copied 3");
    // The peer ends holding two slots: they are retired with the rest.
    drop(h);
    assert_eq!(kid.ask("check"), "check alive=false held=0 in_use=0");
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
}
