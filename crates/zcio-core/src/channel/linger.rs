//! Closed channel ends whose peer still holds buffers of ours, and the
//! reaper thread that lets them go.
//!
//! A closed end cannot free what its peer holds: the ledger decides (see
//! `ledger.rs`). So a closed end whose ledger is not empty *lingers*: its
//! core (socket, doorbell, pidfd, control segment, and through the ledger
//! the pool's regions) stays alive until the peer has returned everything
//! or is gone. Nobody else will look at such an end again — its `Channel`
//! and often its `Pool` are dropped — so one thread per process, started
//! with the first lingering end, watches them all without a timer: it arms
//! each end's notice ring in bell mode (the peer rings our doorbell when it
//! publishes a notice) and `poll`s the doorbells, the sockets (hang-up) and
//! the pidfds (exit), plus an eventfd that says a new end lingers. An end
//! whose ledger emptied, or whose peer is gone (its holdings then ended by
//! `Core::mark_gone`), is dropped there, which closes every descriptor and
//! mapping it had. The thread sleeps without a timeout while nothing
//! lingers; while something does, a backstop bounds each sleep (a peer may
//! have distrusted our flag and wakes us only now and then, see
//! `notify.rs`).

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec};

use crate::channel::core::{lock, Core};

/// Longest a lingering end waits for its peer's wake before it looks anyway.
const BACKSTOP: Duration = Duration::from_secs(1);

struct Lingering {
    cores: Vec<Arc<Core>>,
    /// The reaper of this process (`None` before the first end lingers,
    /// and in a forked child, whose parent's thread did not come along).
    reaper: Option<Reaper>,
}

struct Reaper {
    pid: u32,
    wake: Arc<OwnedFd>,
}

static LINGER: Mutex<Lingering> = Mutex::new(Lingering {
    cores: Vec::new(),
    reaper: None,
});

/// Keep `core` (closed, its peer holding buffers) until its peer is done.
pub(crate) fn linger(core: Arc<Core>) {
    let mut l = lock(&LINGER);
    l.cores.push(core);
    let pid = std::process::id();
    match &l.reaper {
        Some(r) if r.pid == pid => {
            let _ = rustix::io::write(&*r.wake, &1u64.to_ne_bytes());
        }
        _ => l.reaper = start(pid),
    }
}

/// Drop lingering ends that are done (also called from reclaim paths, and
/// the only way they go if no reaper thread could be started).
pub(crate) fn reap_lingering() {
    reap(&mut lock(&LINGER).cores);
}

fn reap(cores: &mut Vec<Arc<Core>>) {
    cores.retain(|c| {
        // try_lock: a pool's allocation may be waiting for notices under
        // the send lock; it takes them in itself.
        match c.tx.try_lock() {
            Ok(mut tx) => {
                c.drain_locked(&mut tx);
                let _ = c.expire_locked(&mut tx);
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                c.drain_locked(&mut p.into_inner());
            }
            Err(std::sync::TryLockError::WouldBlock) => return true,
        }
        c.check_peer();
        c.peer_holds_any() && !c.is_gone()
    });
}

fn start(pid: u32) -> Option<Reaper> {
    let wake = Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).ok()?);
    let fd = wake.clone();
    std::thread::Builder::new()
        .name("zcio-linger".into())
        .spawn(move || run(&fd))
        .ok()?;
    Some(Reaper { pid, wake })
}

fn run(wake: &OwnedFd) {
    // Ends whose doorbell hung up: not polled again (a hang-up is
    // reported on every poll), their socket and pidfd still are.
    let mut bell_gone: Vec<*const Core> = Vec::new();
    loop {
        let cores: Vec<Arc<Core>> = {
            let mut l = lock(&LINGER);
            reap(&mut l.cores);
            l.cores.clone()
        };
        bell_gone.retain(|p| cores.iter().any(|c| std::ptr::eq(Arc::as_ptr(c), *p)));
        let mut pending = false;
        for c in &cores {
            c.enter_bell_mode();
            if c.notice_sleep().arm().is_none() {
                pending = true;
            }
        }
        if !pending {
            let mut fds = Vec::with_capacity(1 + 3 * cores.len());
            fds.push(PollFd::new(wake, PollFlags::IN));
            for c in &cores {
                if !bell_gone.contains(&Arc::as_ptr(c)) {
                    fds.push(PollFd::new(&c.bell, PollFlags::IN));
                }
                fds.push(PollFd::new(&c.sock, PollFlags::RDHUP));
                if let Some(p) = c.pidfd() {
                    fds.push(PollFd::new(p, PollFlags::IN));
                }
            }
            let backstop = Timespec::try_from(BACKSTOP).ok();
            let _ = poll(
                &mut fds,
                if cores.is_empty() {
                    None
                } else {
                    backstop.as_ref()
                },
            );
        }
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(wake, &mut buf);
        for c in &cores {
            c.notice_sleep().disarm();
            if !bell_gone.contains(&Arc::as_ptr(c)) && c.take_rings_checked() {
                bell_gone.push(Arc::as_ptr(c));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};
    use crate::channel::{Channel, ChannelConfig};
    use crate::msg::Msg;
    use std::time::Instant;

    fn until(what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !cond() {
            assert!(Instant::now() < deadline, "{what}: not within 20 s");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn pool() -> Pool {
        Pool::new(PoolConfig {
            chunk_size: 1 << 16,
            populate: false,
            ..PoolConfig::named("linger")
        })
    }

    fn send8(ch: &Channel, p: &Pool) {
        for i in 0..8u8 {
            let mut b = p.try_alloc(1024).unwrap();
            b.as_mut_slice().fill(i);
            ch.send(Msg::from(b.freeze().unwrap())).unwrap();
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn a_closed_end_goes_once_its_live_peer_returns_what_it_held() {
        let (a, b) = Channel::pair(ChannelConfig::default()).unwrap();
        let p = pool();
        send8(&a, &p);
        let core = Arc::downgrade(a.core());
        drop(a);
        drop(p);
        assert!(
            core.strong_count() > 0,
            "the peer holds 8 buffers: it lingers"
        );
        let msgs: Vec<_> = (0..8).map(|_| b.recv().unwrap()).collect();
        assert!(msgs
            .iter()
            .enumerate()
            .all(|(i, m)| m.to_vec() == [i as u8; 1024]));
        drop(msgs);
        // The peer's end stays open: only its notices can free ours.
        until("the lingering end is dropped", || core.strong_count() == 0);
        assert!(b.recv().unwrap_err().is_disconnected());
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn a_closed_end_goes_when_its_peer_dies_holding_its_buffers() {
        use std::os::fd::{AsFd, AsRawFd};
        let (a, b) = Channel::pair(ChannelConfig::default()).unwrap();
        let p = pool();
        send8(&a, &p);
        let held: Vec<_> = (0..8).map(|_| b.recv().unwrap()).collect();
        let core = Arc::downgrade(a.core());
        drop((a, p));
        assert!(
            core.strong_count() > 0,
            "the peer holds 8 buffers: it lingers"
        );
        // The peer dies: its socket and doorbell close without a notice
        // (pointed at /dev/null under its feet, as a kill would close them).
        let null = std::fs::File::open("/dev/null").unwrap();
        for fd in [b.core().sock.as_fd(), b.core().bell.as_fd()] {
            // SAFETY: both descriptors are open; dup2 replaces `fd`'s open
            // file in place, and its owner later closes the /dev/null copy.
            assert!(unsafe { libc::dup2(null.as_raw_fd(), fd.as_raw_fd()) } >= 0);
        }
        until("the lingering end is dropped", || core.strong_count() == 0);
        drop((held, b));
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn a_receiver_closing_while_it_reads_lent_buffers_does_not_pass_for_dead() {
        let (a, b) = Channel::pair(ChannelConfig {
            lane: crate::LaneConfig::OFF, // lent by reference, not copied
            ..ChannelConfig::default()
        })
        .unwrap();
        let p = pool();
        send8(&a, &p);
        let held: Vec<_> = (0..8).map(|_| b.recv().unwrap()).collect();
        drop(b);
        // The receiver closed its end but still reads the 8 slices: the
        // originator must neither take it for dead nor reuse them.
        assert!(
            a.check_peer(),
            "a close while holding lent slices is no hang-up"
        );
        assert_eq!(p.stats().buffers_in_use, 8);
        assert!(held
            .iter()
            .enumerate()
            .all(|(i, m)| m.to_vec() == [i as u8; 1024]));
        drop(held);
        until("the slices come back", || {
            a.reclaim();
            p.stats().buffers_in_use == 0
        });
        assert_eq!(p.stats().buffers_retired, 0, "returned, not retired");
    }
}
