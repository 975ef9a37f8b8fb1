//! The pool of proxy threads.
//!
//! A proxy runs one job at a time: draining one receiver's send queue, or
//! receiving for one endpoint. When its job ends the thread parks as an
//! idle proxy and is reused (the most recently idled first: its stack and
//! caches are warm); idle proxies exit after `idle_exit`. At most
//! `max_proxies` threads exist; jobs beyond that wait in FIFO order for the
//! next proxy to come free.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering as Counter};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// What the proxies do and how many there may be.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Most proxy threads alive at once (send and receive proxies together).
    pub max_proxies: usize,
    /// Default per-partner quota: messages that may wait in one partner's
    /// send queue (and in its receive queue) before `send` fails with
    /// `QuotaExceeded` (the receive proxy stops taking messages instead,
    /// so the partner's sends block in the rendezvous).
    pub quota: usize,
    /// How long a proxy whose queue ran empty busy-waits (yielding) for more
    /// work before it parks. Keeps a stream of sends free of wakeups.
    pub spin: Duration,
    /// How long a parked proxy stays with its queue before returning to the
    /// pool.
    pub linger: Duration,
    /// How long an idle proxy thread waits for a job before it exits.
    pub idle_exit: Duration,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            max_proxies: 64,
            quota: 4096,
            spin: Duration::from_micros(50),
            linger: Duration::from_millis(20),
            idle_exit: Duration::from_secs(10),
        }
    }
}

/// Counters of a proxy pool ([`Proxies::stats`]).
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Proxy threads alive.
    pub threads: usize,
    /// Of those, idle.
    pub idle: usize,
    /// Jobs waiting for a proxy (the cap is reached).
    pub waiting_jobs: usize,
    /// Threads ever started.
    pub spawned: u64,
    /// Jobs handed to an idle proxy instead of a new thread.
    pub reused: u64,
}

pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// A parked idle proxy; `submit` puts a job in its box and unparks it.
struct Idle {
    job: Mutex<Option<Job>>,
    thread: Thread,
}

#[derive(Default)]
struct State {
    idle: Vec<Arc<Idle>>,
    threads: usize,
    waiting: VecDeque<Job>,
}

pub(crate) struct Inner {
    pub(crate) cfg: ProxyConfig,
    st: Mutex<State>,
    spawned: AtomicU64,
    reused: AtomicU64,
}

/// A pool of proxy threads shared by proxy endpoints (cheap to
/// clone; the threads exit when idle, see [`ProxyConfig::idle_exit`]).
#[derive(Clone)]
pub struct Proxies {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Proxies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxies")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Default for Proxies {
    fn default() -> Self {
        Self::new(ProxyConfig::default())
    }
}

impl Proxies {
    /// A pool with `cfg` (a cap of 0 is taken as 1).
    pub fn new(mut cfg: ProxyConfig) -> Self {
        cfg.max_proxies = cfg.max_proxies.max(1);
        Self {
            inner: Arc::new(Inner {
                cfg,
                st: Mutex::new(State::default()),
                spawned: AtomicU64::new(0),
                reused: AtomicU64::new(0),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ProxyConfig {
        &self.inner.cfg
    }

    /// Counters.
    pub fn stats(&self) -> ProxyStats {
        let st = self.inner.lock();
        ProxyStats {
            threads: st.threads,
            idle: st.idle.len(),
            waiting_jobs: st.waiting.len(),
            spawned: self.inner.spawned.load(Counter::Relaxed),
            reused: self.inner.reused.load(Counter::Relaxed),
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `job` on a proxy: an idle one, a new one below the cap, or the
    /// next one to come free.
    pub(crate) fn submit(self: &Arc<Self>, job: Job) {
        let mut st = self.lock();
        if let Some(idle) = st.idle.pop() {
            drop(st);
            *idle.job.lock().unwrap_or_else(|p| p.into_inner()) = Some(job);
            idle.thread.unpark();
            self.reused.fetch_add(1, Counter::Relaxed);
            return;
        }
        if st.threads >= self.cfg.max_proxies {
            st.waiting.push_back(job);
            return;
        }
        st.threads += 1;
        drop(st);
        // The job goes through a box so a failed spawn can give it back.
        let slot = Arc::new(Mutex::new(Some(job)));
        let (me, theirs) = (self.clone(), slot.clone());
        let spawned = std::thread::Builder::new()
            .name("zcio-proxy".into())
            .spawn(move || {
                let first = theirs.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(j) = first {
                    me.run(j);
                }
            });
        match spawned {
            Ok(_) => {
                self.spawned.fetch_add(1, Counter::Relaxed);
            }
            Err(_) => {
                // Out of threads: the job waits for a running proxy (its
                // owner's waits are bounded if none ever comes).
                let mut st = self.lock();
                st.threads -= 1;
                if let Some(j) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    st.waiting.push_front(j);
                }
            }
        }
    }

    /// A proxy thread: run jobs until idle for `idle_exit`.
    fn run(self: Arc<Self>, first: Job) {
        let mut job = Some(first);
        while let Some(j) = job.take() {
            j();
            job = self.next_job();
        }
    }

    /// The next job for a proxy whose job ended: a waiting one, or one
    /// handed over while parked idle; `None` means exit.
    fn next_job(&self) -> Option<Job> {
        let idle = Arc::new(Idle {
            job: Mutex::new(None),
            thread: std::thread::current(),
        });
        {
            let mut st = self.lock();
            if let Some(j) = st.waiting.pop_front() {
                return Some(j);
            }
            st.idle.push(idle.clone());
        }
        let until = Instant::now() + self.cfg.idle_exit;
        loop {
            if let Some(j) = idle.job.lock().unwrap_or_else(|p| p.into_inner()).take() {
                return Some(j);
            }
            let now = Instant::now();
            if now >= until {
                let mut st = self.lock();
                if let Some(i) = st.idle.iter().position(|x| Arc::ptr_eq(x, &idle)) {
                    st.idle.remove(i);
                    st.threads -= 1;
                    return None;
                }
                // Picked by `submit` just now: the job is in the box.
                drop(st);
                continue;
            }
            std::thread::park_timeout(until - now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn cap_queues_jobs_and_idle_proxies_are_reused() {
        let p = Proxies::new(ProxyConfig {
            max_proxies: 2,
            idle_exit: Duration::from_secs(5),
            ..ProxyConfig::default()
        });
        let (tx, rx) = mpsc::channel();
        let gate = Arc::new(std::sync::Barrier::new(3));
        for i in 0..2 {
            let (tx, gate) = (tx.clone(), gate.clone());
            p.inner.submit(Box::new(move || {
                gate.wait();
                tx.send(i).unwrap();
            }));
        }
        let tx3 = tx.clone();
        p.inner.submit(Box::new(move || tx3.send(2).unwrap()));
        let st = p.stats();
        assert_eq!((st.threads, st.waiting_jobs), (2, 1), "{st:?}");
        gate.wait();
        let mut got: Vec<i32> = (0..3)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        got.sort();
        assert_eq!(got, [0, 1, 2]);
        // Both threads go idle; the next job reuses one of them.
        let t0 = Instant::now();
        while p.stats().idle < 2 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        p.inner.submit(Box::new(move || tx.send(3).unwrap()));
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 3);
        let st = p.stats();
        assert_eq!((st.spawned, st.reused), (2, 1), "{st:?}");
        if cfg!(miri) {
            // Miri fails a run whose threads outlive it: let the proxies go
            // (their idle time passes on Miri's virtual clock, at once).
            while p.stats().threads > 0 && t0.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(100));
            }
            assert_eq!(p.stats().threads, 0);
        }
    }

    #[test]
    fn idle_proxies_exit() {
        let p = Proxies::new(ProxyConfig {
            idle_exit: Duration::from_millis(20),
            ..ProxyConfig::default()
        });
        let (tx, rx) = mpsc::channel();
        p.inner.submit(Box::new(move || tx.send(()).unwrap()));
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let t0 = Instant::now();
        while p.stats().threads > 0 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(p.stats().threads, 0);
    }
}
