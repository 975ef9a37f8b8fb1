//! The queue between Zenoh's callbacks (its own threads) and an importer
//! task: bounded in bytes, so a slow local sink holds Zenoh's receive
//! thread back (and so the link, and with `Block` the remote publisher)
//! instead of letting memory grow.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

use zenoh::sample::Sample;

/// What arrives for an importer.
pub(crate) enum Event {
    /// A data or control sample.
    Sample(Box<Sample>),
    /// A liveliness token of an exporter appeared or vanished.
    Token {
        /// What it says.
        token: crate::liveness::Token,
        /// The key the exporter publishes to.
        key: String,
        /// Appeared (true) or vanished.
        alive: bool,
    },
}

struct State {
    items: VecDeque<(Event, usize)>,
    bytes: usize,
    closed: bool,
}

/// A byte-bounded queue of [`Event`]s.
pub(crate) struct Inbox {
    state: Mutex<State>,
    room: Condvar,
    ready: tokio::sync::Notify,
    budget: usize,
}

impl Inbox {
    /// A queue holding at most `budget` payload bytes (one larger event
    /// is always admitted into an empty queue).
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            state: Mutex::new(State {
                items: VecDeque::new(),
                bytes: 0,
                closed: false,
            }),
            room: Condvar::new(),
            ready: tokio::sync::Notify::new(),
            budget,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `ev` (`bytes` of payload), blocking the calling Zenoh thread
    /// while the queue is over budget; the wait ends when the importer
    /// takes events or closes the queue. Dropped once closed.
    pub(crate) fn push(&self, ev: Event, bytes: usize) {
        let mut s = self.lock();
        while !s.closed && !s.items.is_empty() && s.bytes + bytes > self.budget {
            s = self.room.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.closed {
            return;
        }
        s.bytes += bytes;
        s.items.push_back((ev, bytes));
        drop(s);
        self.ready.notify_one();
    }

    /// Take the next event, waiting for one.
    pub(crate) async fn pop(&self) -> Event {
        loop {
            // Register interest before looking, so a push between the
            // look and the wait is not missed (`Notify` keeps one permit).
            let notified = self.ready.notified();
            {
                let mut s = self.lock();
                if let Some((ev, n)) = s.items.pop_front() {
                    s.bytes -= n;
                    drop(s);
                    self.room.notify_all();
                    return ev;
                }
            }
            notified.await;
        }
    }

    /// Stop accepting events and release every blocked Zenoh thread.
    pub(crate) fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.items.clear();
        s.bytes = 0;
        drop(s);
        self.room.notify_all();
    }
}
