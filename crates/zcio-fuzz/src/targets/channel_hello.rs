//! The set-up handshake from both sides, against real channel ends:
//!
//! - a hostile connector sends a listener any hello (any record bytes or
//!   a hello with any magic, version and announced length) with any
//!   descriptors (none, the segment only, a segment that is unsealed,
//!   shorter than announced or whose header says anything, a doorbell
//!   that is not a socket, extra fds), then waits for the verdict; an
//!   accepted channel is then asked for a message;
//! - a hostile listener answers a connecting `Channel::connect` with any
//!   record (a welcome of another transport or version, a refusal with
//!   trailing bytes, garbage, descriptors attached) or hangs up.
//!
//! What is validated before anything is mapped — the credentials, the
//! record, the fds, the seals, the announced length against the real
//! size — and the header check after, are the production `segment::admit`
//! and `SegmentLayout::from_header` the listener runs.
//!
//! Invariant: no panic, no out-of-bounds access, no hang (both ends'
//! handshake waits are bounded: 500 ms on the victim's side); a segment
//! whose header or size is wrong is never accepted.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use crate::input::{Script, ScriptWriter};
use rustix::net::{self, SocketAddrUnix, SocketFlags};
use zcio::internals::bell::Doorbell;
use zcio::internals::segment::Handshake;
use zcio::internals::sys::fdpass;
use zcio::internals::wire::{
    SegmentHeader, SegmentLayout, DESC_SIZE, LAYOUT_VERSION, SEGMENT_MAGIC,
};
use zcio::{Channel, Listener};
use zcio_testkit::hostile;

struct Victim {
    listener: Listener,
    path: PathBuf,
    dir: PathBuf,
}

fn victim() -> &'static Victim {
    static V: OnceLock<Victim> = OnceLock::new();
    V.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("zcio-fuzz-hello-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("sock");
        let _ = std::fs::remove_file(&path);
        let listener = Listener::bind(&path, hostile::victim_cfg()).expect("bind the victim");
        Victim {
            listener,
            path,
            dir,
        }
    })
}

const ENTRIES: [u64; 5] = [64, 8, 63, 4, 1 << 21];

/// The header a connector writes for `m` × `n` entries, with the field the
/// script picks replaced.
fn header(s: &mut Script<'_>) -> (SegmentHeader, u64) {
    let m = s.value(&ENTRIES) as u32;
    let n = s.value(&ENTRIES) as u32;
    let honest = SegmentLayout::new(m, n).or_else(|| SegmentLayout::new(64, 64));
    let total = honest.map_or(4096, |l| l.total_len as u64);
    let mut h = hostile::header(&honest.expect("64 x 64 is a layout"));
    h.msg_entries = m;
    h.notice_entries = n;
    match s.count(0, 5) {
        0 => {}
        1 => h.magic = s.value(&[0, SEGMENT_MAGIC ^ 1]),
        2 => h.version = s.value(&[0, u64::from(LAYOUT_VERSION) + 1]) as u32,
        3 => h.desc_size = s.value(&[0, u64::from(DESC_SIZE) + 8]) as u32,
        4 => h.total_len = s.value(&[0, total + 4096, total - 4096]),
        _ => h.closed = [s.value(&[1]), s.value(&[1])],
    }
    (h, total)
}

fn header_bytes(h: &SegmentHeader) -> [u8; 64] {
    let mut b = [0u8; 64];
    // SAFETY: `SegmentHeader` is 64 bytes of plain integers (repr(C), no
    // padding: asserted in channel/wire.rs), copied out whole.
    unsafe { std::ptr::copy_nonoverlapping((h as *const SegmentHeader).cast::<u8>(), b.as_mut_ptr(), 64) };
    b
}

/// What one script saw.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The victim listener accepted the hostile connector.
    pub accepted: bool,
    /// The victim connector accepted the hostile listener's reply.
    pub connected: bool,
}

pub fn run(data: &[u8]) {
    session(data);
}

/// `[flag: the victim is the connector][…]`.
pub fn session(data: &[u8]) -> Outcome {
    let mut s = Script::new(data);
    if s.flag() {
        victim_connects(&mut s)
    } else {
        victim_listens(&mut s)
    }
}

fn victim_listens(s: &mut Script<'_>) -> Outcome {
    let v = victim();
    let (h, total) = header(s);
    let actual = s.value(&[total, 4096, total + 4096, 0]).min(1 << 22);
    let announced = s.value(&[total, actual, 0, total + 1, 1 << 40]);
    let sealed = !s.flag();
    let seg = if sealed {
        zcio::internals::sys::memfd::create_sized("fuzz-hello", actual).expect("memfd")
    } else {
        hostile::unsealed_region("fuzz-hello", actual)
    };
    let file = std::fs::File::from(seg);
    let _ = file.write_all_at(&header_bytes(&h), 0);
    let seg = OwnedFd::from(file);
    let (_bell, peer_bell) = Doorbell::pair().expect("doorbell");
    let not_a_socket = hostile::sealed_region("fuzz-not-bell", 4096, b"");
    let record = match s.count(0, 3) {
        0 => hostile::hello(announced).to_vec(),
        1 => hostile::hello_as(
            s.value(&[0, SEGMENT_MAGIC]).to_le_bytes(),
            s.value(&[u64::from(LAYOUT_VERSION) + 1, 0]) as u32,
            announced,
        )
        .to_vec(),
        _ => s.bytes().to_vec(),
    };
    let fds: Vec<_> = match s.count(0, 4) {
        0 => vec![seg.as_fd(), peer_bell.as_fd()],
        1 => vec![],
        2 => vec![seg.as_fd()],
        3 => vec![seg.as_fd(), not_a_socket.as_fd()],
        _ => vec![seg.as_fd(), peer_bell.as_fd(), seg.as_fd()],
    };
    let fds_ok = fds.len() == 2 && sealed;
    let (accepted, _) = std::thread::scope(|sc| {
        let acc = sc.spawn(|| v.listener.accept_timeout(Duration::from_secs(5)));
        let sock = hostile::raw_connect(&v.path);
        let _ = fdpass::send(&sock, &record, &fds, false);
        let mut buf = [0u8; 64];
        let verdict = fdpass::recv(&sock, &mut buf, false);
        (acc.join().expect("accept thread"), (sock, verdict))
    });
    let accepted = match accepted {
        Ok(ch) => {
            let _ = ch.try_recv();
            true
        }
        Err(_) => false,
    };
    if accepted {
        // Whatever else it tolerates, the listener never maps a segment
        // whose layout is not the one it checks.
        assert!(
            fds_ok && SegmentLayout::from_header(&h, actual.min(announced)).is_some(),
            "accepted a segment whose header or size is wrong: {h:?}, actual {actual}, announced {announced}"
        );
    }
    Outcome {
        accepted,
        connected: false,
    }
}

fn victim_connects(s: &mut Script<'_>) -> Outcome {
    let v = victim();
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let path = v.dir.join(format!(
        "hostile-{}",
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&path);
    // A listener written by hand.
    let lsock = fdpass::seqpacket().expect("socket");
    let bound = SocketAddrUnix::new(&path)
        .and_then(|a| net::bind(&lsock, &a))
        .and_then(|()| net::listen(&lsock, 4))
        .is_ok();
    let record = match s.count(0, 4) {
        0 => hostile_welcome(),
        1 => Handshake::Welcome {
            magic: s.value(&[0, SEGMENT_MAGIC]).to_le_bytes(),
            version: s.value(&[u64::from(LAYOUT_VERSION) + 1, 0]) as u32,
        }
        .encode()
        .to_vec(),
        2 => Handshake::Refused.encode().to_vec(),
        3 => s.bytes().to_vec(),
        _ => Vec::new(),
    };
    let with_fd = s.flag();
    let extra = hostile::sealed_region("fuzz-extra", 4096, b"");
    let mut connected = false;
    if bound {
        std::thread::scope(|sc| {
            let kid = sc.spawn(|| Channel::connect(&path, hostile::victim_cfg()));
            if let Ok(conn) = net::accept_with(&lsock, SocketFlags::CLOEXEC) {
                let mut buf = [0u8; 64];
                let _ = fdpass::recv(&conn, &mut buf, false);
                if !record.is_empty() {
                    let fds = if with_fd { vec![extra.as_fd()] } else { vec![] };
                    let _ = fdpass::send(&conn, &record, &fds, false);
                }
                drop(conn);
            }
            if let Ok(ch) = kid.join().expect("connect thread") {
                let _ = ch.try_recv();
                connected = true;
            }
        });
    }
    let _ = std::fs::remove_file(&path);
    if connected {
        // Only the exact welcome of this transport and version, alone.
        assert!(
            record == hostile_welcome() && !with_fd,
            "connected after {record:?} (fd: {with_fd})"
        );
    }
    Outcome {
        accepted: false,
        connected,
    }
}

/// The welcome an honest listener sends.
fn hostile_welcome() -> Vec<u8> {
    Handshake::Welcome {
        magic: SEGMENT_MAGIC.to_le_bytes(),
        version: LAYOUT_VERSION,
    }
    .encode()
    .to_vec()
}

/// An honest hello and an honest welcome, then one of each broken kind.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut w = ScriptWriter::new();
    // victim listens: 64 x 64, header as is, actual = announced = total,
    // sealed, an honest hello, segment + doorbell
    let listen = |w: &mut ScriptWriter, field: usize, record: usize, fds: usize| {
        w.flag(false).pick(0).pick(0).count(0, field);
        match field {
            1..=3 => {
                w.pick(0);
            }
            4 => {
                w.pick(1);
            }
            5 => {
                w.pick(0).pick(0);
            }
            _ => {}
        }
        w.pick(0).pick(0).flag(false).count(0, record);
        if record == 1 {
            w.pick(1).pick(0);
        }
        if record == 2 {
            w.bytes(b"garbage");
        }
        w.count(0, fds);
    };
    for (field, record, fds) in [(0, 0, 0), (1, 0, 0), (4, 0, 0), (0, 1, 0), (0, 0, 3), (0, 2, 1)] {
        listen(&mut w, field, record, fds);
        out.push(w.finish());
    }
    for (reply, fd) in [(0, false), (1, false), (2, false), (0, true), (4, false)] {
        w.flag(true).count(0, reply);
        if reply == 1 {
            w.pick(1).pick(0);
        }
        w.flag(fd);
        out.push(w.finish());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn honest_handshakes_succeed_and_broken_ones_do_not() {
        let got: Vec<Outcome> = seeds().iter().map(|s| session(s)).collect();
        let accepted: Vec<bool> = got[..6].iter().map(|o| o.accepted).collect();
        assert_eq!(accepted, [true, false, false, false, false, false], "{got:?}");
        let connected: Vec<bool> = got[6..].iter().map(|o| o.connected).collect();
        assert_eq!(connected, [true, false, false, false, false], "{got:?}");
    }
}
