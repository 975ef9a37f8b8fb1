//! A hostile rendezvous client against a real server end, plain or behind
//! a proxy endpoint (`zcio::proxy`, whose receive proxy collects
//! the messages): the client speaks the set-up by hand (the shared
//! handshake with the rendezvous magic and layout version), then follows a
//! script — publish messages through the slot protocol (any label, word
//! count and descriptor count), write any value into any field of the
//! client→server slot (state words the protocol cannot produce, counts
//! past `WORDS` or `MAX_FDS`, stale sequence numbers), send descriptor
//! records on the socket with any tag and any number of memfds, take or
//! ignore what the server sends, scribble anywhere in the segment, hang up.
//!
//! Invariant: no panic, no out-of-bounds access, no hang (every server call
//! is non-blocking, or bounded by a 5 ms configuration); a message the
//! server hands out has at most `WORDS` words and at most `MAX_FDS`
//! descriptors, and descriptors only when the client sent that many under
//! that message's sequence number.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use crate::input::{Script, ScriptWriter};
use zcio::proxy::{ProxyEndpoint, Proxies};
use zcio::internals::bell::Doorbell;
use zcio::internals::rendezvous::{
    self as rdv, Raw, Slot, C2S, EMPTY, FULL, MAGIC, S2C, TAKEN, VERSION, WORDS,
};
use zcio::internals::segment::Handshake;
use zcio::internals::sys::fdpass::{self, RecvOutcome};
use zcio::internals::sys::memfd;
use zcio::internals::sys::mmap::{Access, Mapping};
use zcio::rendezvous::{Envelope, RendezvousConfig, RendezvousListener};

const MAX_FDS: usize = Envelope::MAX_FDS;
use zcio_testkit::hostile;

struct Server {
    listener: RendezvousListener,
    path: PathBuf,
    proxies: Proxies,
}

fn server() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("zcio-fuzz-rdv-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("sock");
        let _ = std::fs::remove_file(&path);
        let quick = Duration::from_millis(5);
        let listener = RendezvousListener::bind(&path)
            .expect("bind the server")
            .with_config(RendezvousConfig {
                send_timeout: quick,
                recv_timeout: quick,
                ..RendezvousConfig::default()
            });
        Server {
            listener,
            path,
            proxies: Proxies::default(),
        }
    })
}

/// The client, written by hand: its socket, its end of the doorbell pair
/// and its mapping of the one-page segment.
struct Client {
    sock: OwnedFd,
    _bell: Doorbell,
    seg: Mapping,
}

impl Client {
    fn connect(path: &std::path::Path) -> Self {
        let sock = hostile::raw_connect(path);
        let len = zcio::page_size();
        let fd = memfd::create_sized("fuzz-rdv", len as u64).expect("memfd");
        let seg = Mapping::map(&fd, len, Access::ReadWrite, false).expect("map");
        let mut hdr = [0u8; 16];
        hdr[..8].copy_from_slice(&MAGIC);
        hdr[8..12].copy_from_slice(&VERSION.to_le_bytes());
        // SAFETY: the mapping is ours, a page long and not yet shared.
        unsafe { std::ptr::copy_nonoverlapping(hdr.as_ptr(), seg.as_ptr(), hdr.len()) };
        let (bell, peer_bell) = Doorbell::pair().expect("doorbell");
        let hello = Handshake::Hello {
            magic: MAGIC,
            version: VERSION,
            len: len as u64,
        };
        fdpass::send(
            &sock,
            &hello.encode(),
            &[fd.as_fd(), peer_bell.as_fd()],
            false,
        )
        .expect("hello");
        let mut buf = [0u8; 64];
        match fdpass::recv(&sock, &mut buf, false) {
            Ok(RecvOutcome::Record(r)) => assert!(matches!(
                Handshake::decode(&buf[..r.len]),
                Some(Handshake::Welcome { .. })
            )),
            other => panic!("no welcome: {other:?}"),
        }
        Self {
            sock,
            _bell: bell,
            seg,
        }
    }

    fn slot(&self, at: usize) -> &Slot {
        // SAFETY: `at` is C2S or S2C: a 128-aligned, 128-byte slot inside
        // the page this mapping covers (alive as long as `self`); a `Slot`
        // is atomics only, the one way both ends touch it.
        unsafe { &*self.seg.as_ptr().add(at).cast::<Slot>() }
    }
}

mod op {
    pub const PUBLISH: u8 = 0;
    pub const WRITE: u8 = 1;
    pub const FDS: u8 = 2;
    pub const RECV: u8 = 3;
    pub const SEND: u8 = 4;
    pub const TAKE: u8 = 5;
    pub const SCRIBBLE: u8 = 6;
    pub const HANG_UP: u8 = 7;
    pub const N: u8 = 8;
}

const STATES: [u64; 9] = [
    1 << 4 | FULL,
    EMPTY,
    TAKEN,
    3,
    2 << 4 | FULL,
    1 << 4 | FULL | 4,
    1 << 4 | FULL | 8,
    u64::MAX,
    1 << 4 | TAKEN,
];
const COUNTS: [u64; 7] = [
    1,
    0,
    WORDS as u64,
    WORDS as u64 + 1,
    1 | 1 << 32,
    2 << 32,
    (MAX_FDS as u64 + 1) << 32,
];
const SMALL: [u64; 6] = [0, 1, 2, 3, 8, u64::MAX];
const WORDS_AT: [u64; 8] = [0, 1, 2, 16, 17, 18, 19, 32];

enum End {
    Plain(Box<zcio::rendezvous::Rendezvous>),
    Proxy(ProxyEndpoint),
}

/// What one script saw.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub received: usize,
    pub with_fds: usize,
}

pub fn run(data: &[u8]) {
    session(data);
}

/// Run one script: `[flag: asynchronous server][ops…]`.
pub fn session(data: &[u8]) -> Outcome {
    let srv = server();
    let mut s = Script::new(data);
    let asynchronous = s.flag();
    let (end, client) = std::thread::scope(|sc| {
        let acc = sc.spawn(|| srv.listener.accept_timeout(Duration::from_secs(10)));
        let client = Client::connect(&srv.path);
        (acc.join().expect("accept thread"), client)
    });
    let end = end.expect("the server accepts an honest hello");
    let end = if asynchronous {
        End::Proxy(ProxyEndpoint::new(end, &srv.proxies))
    } else {
        End::Plain(Box::new(end))
    };
    let mut client = Some(client);
    let mut out = Outcome::default();
    let mut steps = 0;
    while !s.is_empty() && steps < 48 {
        steps += 1;
        let o = s.op(op::N);
        let Some(c) = client.as_ref() else {
            if o == op::RECV || o == op::SEND {
                recv_or_send(&end, o, &mut s, &mut out);
            }
            continue;
        };
        match o {
            op::PUBLISH => {
                // An honest sender resets a taken slot before its next
                // message (flag), a hostile one may not.
                if s.flag() {
                    let sl = c.slot(C2S);
                    let st = sl.state.load(Ordering::SeqCst);
                    if st & 3 == TAKEN {
                        sl.state.store(st >> 4 << 4 | EMPTY, Ordering::SeqCst);
                    }
                }
                let len = s.count(0, WORDS);
                let raw = Raw {
                    label: s.value(&SMALL),
                    words: std::array::from_fn(|i| i as u64),
                    len,
                    nfds: s.count(0, 3),
                    seq: 0,
                };
                let _ = rdv::publish(c.slot(C2S), &raw, None);
            }
            op::WRITE => {
                let sl = c.slot(C2S);
                let v = s.value(&STATES);
                match s.count(0, 3) {
                    0 => sl.state.store(v, Ordering::SeqCst),
                    1 => sl.counts.store(s.value(&COUNTS), Ordering::SeqCst),
                    2 => sl.label.store(v, Ordering::SeqCst),
                    _ => sl.words[s.count(0, WORDS - 1)].store(v, Ordering::SeqCst),
                }
            }
            op::FDS => {
                let tag = s.value(&SMALL);
                let n = s.count(0, 3);
                let fds: Vec<OwnedFd> = (0..n)
                    .map(|_| memfd::create_sized("fuzz-rdv-fd", 4096).expect("memfd"))
                    .collect();
                let b: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
                let bytes = if s.flag() {
                    tag.to_le_bytes().to_vec()
                } else {
                    s.bytes().to_vec()
                };
                let _ = fdpass::send(&c.sock, &bytes, &b, true);
            }
            op::RECV | op::SEND => recv_or_send(&end, o, &mut s, &mut out),
            op::TAKE => {
                let _ = rdv::take(c.slot(S2C), None);
                // Reset after a take, as the sender would, or leave it.
                if s.flag() {
                    let sl = c.slot(S2C);
                    let st = sl.state.load(Ordering::SeqCst);
                    sl.state.store(st >> 4 << 4 | EMPTY, Ordering::SeqCst);
                }
            }
            op::SCRIBBLE => {
                let at = s.value(&WORDS_AT) as usize % (c.seg.len() / 8);
                let v = s.value(&STATES);
                // SAFETY: word `at` lies inside the client's mapping of the
                // segment (page-aligned, alive as long as `c`); the server
                // touches it only atomically.
                unsafe {
                    (*c.seg.as_ptr().add(at * 8).cast::<AtomicU64>()).store(v, Ordering::SeqCst)
                };
            }
            _ => client = None,
        }
    }
    drop(end);
    drop(client);
    out
}

fn recv_or_send(end: &End, o: u8, s: &mut Script<'_>, out: &mut Outcome) {
    let check = |m: &Envelope, out: &mut Outcome| {
        out.received += 1;
        assert!(m.words.len() <= WORDS, "more words than a slot holds");
        assert!(m.fds.len() <= MAX_FDS, "more descriptors than a record holds");
        if !m.fds.is_empty() {
            out.with_fds += 1;
        }
    };
    if o == op::RECV {
        match end {
            End::Plain(e) => {
                if let Ok(m) = e.try_recv() {
                    check(&m, out);
                }
            }
            End::Proxy(e) => {
                if let Ok(m) = e.try_recv() {
                    check(&m, out);
                }
            }
        }
        return;
    }
    let msg = Envelope::new(s.value(&SMALL), &[1, 2, 3][..s.count(0, 3)]);
    match end {
        End::Plain(e) => {
            let _ = e.try_send(&msg);
        }
        End::Proxy(e) => {
            let _ = e.send(msg);
        }
    }
}

/// Honest exchanges (a message with and without descriptors, a reply
/// taken) on both kinds of server, and a few broken states.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for asynchronous in [false, true] {
        let mut w = ScriptWriter::new();
        w.flag(asynchronous);
        // two words, label 1, no fds; receive
        w.op(op::PUBLISH).flag(true).count(0, 2).pick(1).count(0, 0);
        w.op(op::RECV);
        // one fd under sequence 2 (the next hand-over), then publish
        w.op(op::FDS).pick(2).count(0, 1).flag(true);
        w.op(op::PUBLISH).flag(true).count(0, 1).pick(2).count(0, 1);
        w.op(op::RECV);
        // a reply from the server, taken and reset
        w.op(op::SEND).pick(1).count(0, 2).op(op::TAKE).flag(true);
        out.push(w.finish());

        w.flag(asynchronous);
        w.op(op::WRITE).pick(0).count(0, 1).pick(3).op(op::WRITE).pick(0).count(0, 0);
        w.op(op::RECV).op(op::WRITE).pick(3).count(0, 0).op(op::RECV);
        w.op(op::SCRIBBLE).pick(2).pick(7).op(op::RECV).op(op::HANG_UP).op(op::RECV);
        out.push(w.finish());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_reach_delivery() {
        let got: Vec<Outcome> = seeds().iter().map(|s| session(s)).collect();
        // Plain server: both messages, the second with its descriptor.
        assert_eq!(
            got[0],
            Outcome {
                received: 2,
                with_fds: 1
            },
            "{got:?}"
        );
    }
}
