//! The raw hostile peer (the wire protocol written by hand from
//! `zcio::{wire, ring}` and `zcio::internals::sys::{fdpass, memfd, mmap}`) and
//! the victim child it attacks; used by zcio's `hostile.rs`,
//! `hostile_connect.rs` and `untrusted.rs` tests.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::MemfdFlags;
use rustix::net::{self, sockopt, AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
use zcio::internals::bell::Doorbell;
use zcio::internals::segment::{Handshake, HANDSHAKE_LEN};
use zcio::internals::spsc::{Reader, RingHeader, Writer};
use zcio::internals::sys::fdpass::{self, RecvOutcome};
use zcio::internals::sys::memfd;
use zcio::internals::sys::mmap::{Access, Mapping};
use zcio::internals::wire::{
    self, Ctl, Desc, Notice, SegmentHeader, SegmentLayout, LAYOUT_VERSION,
};
use zcio::{Channel, ChannelConfig, Listener, Msg};

use crate::{Kid, SockPath, STEP};

pub const ENTRIES: u32 = 64;

/// The victim's configuration: every message lent by reference (the
/// tests watch its pool), unless `slots` small-message slots of 64 bytes
/// are asked for.
pub fn victim_cfg_with(slots: u32) -> ChannelConfig {
    ChannelConfig {
        ring_entries: ENTRIES,
        notice_entries: ENTRIES,
        connect_timeout: std::time::Duration::from_millis(500),
        lane: zcio::LaneConfig {
            slots,
            slot_size: 64,
        },
        ..ChannelConfig::default()
    }
}

pub fn victim_cfg() -> ChannelConfig {
    victim_cfg_with(0)
}

pub fn raw_connect(path: &std::path::Path) -> OwnedFd {
    let s = net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    net::connect(&s, &SocketAddrUnix::new(path).unwrap()).expect("connect to victim");
    sockopt::set_socket_timeout(&s, sockopt::Timeout::Recv, Some(STEP)).unwrap();
    s
}

pub fn header(layout: &SegmentLayout) -> SegmentHeader {
    SegmentHeader {
        magic: wire::SEGMENT_MAGIC,
        version: LAYOUT_VERSION,
        msg_entries: layout.msg_entries,
        notice_entries: layout.notice_entries,
        desc_size: wire::DESC_SIZE,
        total_len: layout.total_len as u64,
        closed: [0; 2],
        cpus: [0; 2],
    }
}

pub fn write_header(fd: impl AsFd, h: SegmentHeader) {
    let m = Mapping::map(fd, 4096, Access::ReadWrite, false).expect("map segment");
    // SAFETY: the mapping is page-aligned and at least 64 bytes long.
    unsafe { m.as_ptr().cast::<SegmentHeader>().write(h) };
}

pub fn hello(len: u64) -> [u8; HANDSHAKE_LEN] {
    hello_as(wire::SEGMENT_MAGIC.to_le_bytes(), LAYOUT_VERSION, len)
}

pub fn hello_as(magic: [u8; 8], version: u32, len: u64) -> [u8; HANDSHAKE_LEN] {
    Handshake::Hello {
        magic,
        version,
        len,
    }
    .encode()
}

/// A sealed memfd of `len` bytes with `text` at offset 0.
pub fn sealed_region(name: &str, len: u64, text: &[u8]) -> OwnedFd {
    let fd = memfd::create_sized(name, len).unwrap();
    rustix::io::pwrite(&fd, text, 0).unwrap();
    fd
}

/// One end of a doorbell pair for a hand-written hello (the other end is
/// dropped: the victim's bell reports a hang-up, which the handshake does
/// not look at).
pub fn bell_end() -> OwnedFd {
    Doorbell::pair().unwrap().1
}

pub fn unsealed_region(name: &str, len: u64) -> OwnedFd {
    let fd =
        rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    rustix::fs::ftruncate(&fd, len).unwrap();
    fd
}

pub fn desc(region: u32, count: u32, offset: u64, len: u64, token: u64) -> Desc {
    Desc {
        region,
        count,
        offset,
        len,
        token,
        reserved: [0; 3],
    }
}

/// The connector end of a channel, written by hand.
pub struct Hostile {
    pub sock: OwnedFd,
    msgs: Writer<Desc>,
    notices_in: Reader<Notice>,
    pub msgs_in: Reader<Desc>,
    notices_out: Writer<Notice>,
    hdrs: [*const RingHeader; 4],
    /// Our end of the doorbell pair (rung when the victim sleeps on it).
    pub bell: Doorbell,
    _seg: Mapping,
}

impl Hostile {
    pub fn connect(path: &std::path::Path) -> Self {
        let sock = raw_connect(path);
        let layout = SegmentLayout::new(ENTRIES, ENTRIES).unwrap();
        let fd = memfd::create_sized("hostile-seg", layout.total_len as u64).unwrap();
        write_header(&fd, header(&layout));
        let seg = Mapping::map(&fd, layout.total_len, Access::ReadWrite, false).unwrap();
        let (bell, peer_bell) = Doorbell::pair().unwrap();
        fdpass::send(
            &sock,
            &hello(layout.total_len as u64),
            &[fd.as_fd(), peer_bell.as_fd()],
            false,
        )
        .unwrap();
        let mut buf = [0u8; 64];
        match fdpass::recv(&sock, &mut buf, false) {
            Ok(RecvOutcome::Record(r)) => assert_eq!(
                Handshake::decode(&buf[..r.len]),
                Some(Handshake::Welcome {
                    magic: wire::SEGMENT_MAGIC.to_le_bytes(),
                    version: LAYOUT_VERSION
                })
            ),
            other => panic!("no welcome: {other:?}"),
        }
        let base = seg.as_ptr();
        // SAFETY: offsets come from the layout of this mapping.
        let hdr = |i: usize| unsafe { base.add(layout.rings[i]).cast::<RingHeader>().cast_const() };
        // SAFETY: as above; entry arrays follow their headers.
        let ent = |i: usize| unsafe { base.add(layout.entries(i)) };
        // Each pair describes one ring of ENTRIES entries inside
        // `seg`, which lives in the same struct as the ring ends.
        // SAFETY: as argued just above.
        unsafe {
            Hostile {
                msgs: Writer::new(hdr(wire::C2L_MSGS), ent(wire::C2L_MSGS).cast(), ENTRIES),
                notices_in: Reader::new(
                    hdr(wire::L2C_NOTICES),
                    ent(wire::L2C_NOTICES).cast(),
                    ENTRIES,
                ),
                msgs_in: Reader::new(hdr(wire::L2C_MSGS), ent(wire::L2C_MSGS).cast(), ENTRIES),
                notices_out: Writer::new(
                    hdr(wire::C2L_NOTICES),
                    ent(wire::C2L_NOTICES).cast(),
                    ENTRIES,
                ),
                hdrs: [0, 1, 2, 3].map(hdr),
                sock,
                bell,
                _seg: seg,
            }
        }
    }

    pub fn push(&mut self, descs: &[Desc]) {
        assert!(self.msgs.free_slots().unwrap() >= descs.len());
        let mut pending = 0;
        self.msgs.write(descs, &mut pending);
        self.msgs.publish(pending);
        self.msgs.wake_consumer(Some(&self.bell));
    }

    /// Free entries on the message ring (as the victim's head says).
    pub fn room(&mut self) -> usize {
        self.msgs.free_slots().unwrap_or(0)
    }

    /// The shared control segment's address and length (to scribble on).
    pub fn segment(&self) -> (*mut u8, usize) {
        (self._seg.as_ptr(), self._seg.len())
    }

    pub fn ctl(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) {
        fdpass::send(&self.sock, bytes, fds, false).expect("send control record");
    }

    /// Send a control record; the victim may have hung up already.
    pub fn try_ctl(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> bool {
        fdpass::send(&self.sock, bytes, fds, true).is_ok()
    }

    pub fn region(&self, slot: u32, len: u64, fd: impl AsFd) {
        self.ctl(&Ctl::Region { slot, len }.encode(), &[fd.as_fd()]);
    }

    /// Tokens the victim returned so far.
    pub fn notices(&mut self) -> Vec<u64> {
        let n = self.notices_in.available_fresh().unwrap();
        let v = (0..n).map(|i| self.notices_in.peek(i).token).collect();
        self.notices_in.release(n);
        v
    }

    pub fn forge(&mut self, tokens: &[u64]) {
        let items: Vec<Notice> = tokens
            .iter()
            .map(|&token| Notice {
                token,
                kind: wire::NOTICE_RELEASED,
                reserved: 0,
            })
            .collect();
        self.forge_notices(&items);
    }

    pub fn forge_notices(&mut self, items: &[Notice]) {
        let mut pending = 0;
        self.notices_out.write(items, &mut pending);
        self.notices_out.publish(pending);
    }

    pub fn hdr(&self, ring: usize) -> &RingHeader {
        // SAFETY: points into `_seg`, alive as long as `self`.
        unsafe { &*self.hdrs[ring] }
    }
}

pub fn start_victim(tag: &str) -> (SockPath, Kid) {
    start_victim_with_slots(tag, 0)
}

/// A victim whose channel copies messages of up to 64 bytes into `slots`
/// small-message slots.
pub fn start_victim_with_slots(tag: &str, slots: u32) -> (SockPath, Kid) {
    let sock = SockPath::new(tag);
    let mut kid = Kid::spawn(
        "child_victim",
        "hostile-victim",
        &[("SOCK", sock.arg()), ("SLOTS", slots.to_string())],
    );
    kid.expect("ready");
    (sock, kid)
}

pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Resident shared memory of process `pid`, in KiB.
pub fn rss_shmem_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssShmem:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// The victim child: a `Listener` driven by commands on stdin, reporting
/// every outcome on stdout. It must never panic or crash.
pub fn victim() {
    let slots = crate::arg("SLOTS").parse().expect("SLOTS");
    let listener = Listener::bind(crate::arg("SOCK"), victim_cfg_with(slots)).expect("bind");
    crate::report("ready");
    let pool = crate::small_pool("victim", 64 << 10, 8);
    let mut ch: Option<Channel> = None;
    fn show<E: std::fmt::Debug>(r: Result<Msg, E>) -> String {
        match r {
            Ok(m) => format!("Ok({:?})", String::from_utf8_lossy(&m.to_vec())),
            Err(e) => format!("Err({e:?})"),
        }
    }
    while let Some(cmd) = crate::command() {
        let (verb, rest) = cmd.split_once(' ').unwrap_or((cmd.as_str(), ""));
        let c = || ch.as_ref().expect("no channel");
        let in_use = || pool.stats().buffers_in_use;
        match verb {
            "accept" => match listener.accept_timeout(STEP) {
                Ok(x) => {
                    ch = Some(x);
                    crate::report("accept ok");
                }
                Err(e) => crate::report(format_args!("accept err {e:?}")),
            },
            "recv" => {
                let r = show(c().recv_timeout(STEP));
                c().flush(); // publish notices for what we dropped or rejected
                crate::report(format_args!("recv {r}"));
            }
            "drain" => {
                let mut out = Vec::new();
                for _ in 0..1000 {
                    let r = c().try_recv();
                    let more = matches!(r, Ok(_) | Err(zcio::TryRecvError::Malformed(_)));
                    out.push(show(r));
                    if !more {
                        break;
                    }
                }
                c().flush();
                crate::report(format_args!("drained {}", out.join("; ")));
            }
            "stats" => {
                let s = c().stats();
                crate::report(format_args!(
                    "stats malformed={} regions_received={} bad_notices={}",
                    s.malformed, s.regions_received, s.bad_notices
                ));
            }
            "send" => match c().send(crate::msg_of(&pool, rest.as_bytes())) {
                Ok(()) => crate::report(format_args!(
                    "sent ok in_use={} held={}",
                    in_use(),
                    c().stats().held_by_peer
                )),
                Err(e) => {
                    let e = e.kind(); // the message is dropped here
                    crate::report(format_args!(
                        "sent err {e:?} in_use={} held={}",
                        in_use(),
                        c().stats().held_by_peer
                    ));
                }
            },
            "flood" => {
                let mut sent = 0;
                let mut err = String::from("none");
                for _ in 0..rest.parse::<usize>().expect("count") {
                    match c().send(crate::msg_of(&pool, b"flood")) {
                        Ok(()) => sent += 1,
                        Err(e) => {
                            err = format!("{:?}", e.kind());
                            break;
                        }
                    }
                }
                let held = c().stats().held_by_peer;
                crate::report(format_args!(
                    "flood sent={sent} err={err} in_use={} held={held}",
                    in_use()
                ));
            }
            "reclaim" => {
                let n = c().reclaim();
                let s = c().stats();
                crate::report(format_args!(
                    "reclaim released={n} held={} in_use={} bad_notices={}",
                    s.held_by_peer,
                    in_use(),
                    s.bad_notices
                ));
            }
            "copied" => {
                crate::report(format_args!("copied {}", c().stats().msgs_copied));
            }
            "check" => {
                let alive =
                    crate::try_settle(c(), std::time::Duration::from_secs(5), || !c().check_peer());
                crate::report(format_args!(
                    "check alive={} held={} in_use={}",
                    !alive,
                    c().stats().held_by_peer,
                    in_use()
                ));
            }
            "exit" => {
                crate::report("bye");
                return;
            }
            other => panic!("unknown command {other:?}"),
        }
    }
}

impl Hostile {
    /// Return `tokens` as notices after refreshing the victim's head (so a
    /// long-running partner never trips the cached-room check). The victim
    /// lends at most a notice ring's worth, so they always fit.
    pub fn give_back(&mut self, tokens: &[u64]) {
        let free = self.notices_out.free_slots().expect("notice ring intact");
        assert!(free >= tokens.len(), "victim lent more than fits");
        self.forge(tokens);
    }

    /// Copy out every descriptor the victim published, without consuming
    /// them (the ring stays full from the victim's point of view).
    /// As [`Hostile::peek_all`], but nothing when the victim's ring is
    /// not intact (the peer may have scribbled on it).
    pub fn try_peek_all(&mut self) -> Vec<Desc> {
        let n = self.msgs_in.available_fresh().unwrap_or(0);
        (0..n).map(|i| self.msgs_in.peek(i)).collect()
    }

    pub fn peek_all(&mut self) -> Vec<Desc> {
        let n = self.msgs_in.available_fresh().expect("victim ring intact");
        (0..n).map(|i| self.msgs_in.peek(i)).collect()
    }
}
