//! The publication cache: the last samples an exporter published, for
//! importers that join late (`--history`).
//!
//! The exporter keeps its last N data samples (payload and attachment, by
//! reference: Zenoh's `ZBytes` are shared, not copied) and answers queries
//! on `@zcio/cache/<stream>/<key>` with one reply per sample, oldest first,
//! then always a last reply of kind [`Kind::CacheRange`]. That last reply is
//! what makes the catch-up certain: a query that ends without it did not
//! reach the cache (a link or route not up yet) and is asked again — an
//! empty answer cannot be mistaken for an empty cache. The queryable is
//! declared before the exporter's liveliness token, so an importer that sees
//! the token knows there is a cache to ask.
//!
//! Positions tell duplicates apart: the importer subscribes before it
//! asks, handles the cached samples first, and drops live samples it
//! already had from the cache.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zenoh::bytes::ZBytes;
use zenoh::query::{ConsolidationMode, QueryTarget, Queryable};
use zenoh::sample::Sample;
use zenoh::{Session, Wait};

use crate::error::{zenoh, BridgeError};
use crate::wire::{Kind, Meta};

/// How long one cache query may take before it is asked again.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between two queries that did not reach the cache.
const RETRY: Duration = Duration::from_millis(100);

struct Entries {
    /// Payload, attachment and position of each cached sample.
    items: VecDeque<(ZBytes, Vec<u8>, u64)>,
    /// The position after the newest.
    next: u64,
}

/// An exporter's cache of its last samples.
pub(crate) struct Cache {
    entries: Arc<Mutex<Entries>>,
    cap: usize,
    _queryable: Queryable<()>,
}

fn lock(e: &Mutex<Entries>) -> std::sync::MutexGuard<'_, Entries> {
    e.lock().unwrap_or_else(|p| p.into_inner())
}

impl Cache {
    /// A cache of `cap` samples of `stream`, answering on its key.
    pub(crate) async fn declare(
        session: &Session,
        key: &str,
        stream: u64,
        byte_positions: bool,
        cap: usize,
    ) -> Result<Self, BridgeError> {
        let entries = Arc::new(Mutex::new(Entries {
            items: VecDeque::with_capacity(cap),
            next: 0,
        }));
        let shared = entries.clone();
        let queryable = session
            .declare_queryable(crate::liveness::cache_key(stream, key))
            .callback(move |q| {
                let (items, next) = {
                    let e = lock(&shared);
                    (e.items.clone(), e.next)
                };
                let first = items.front().map_or(next, |i| i.2);
                for (payload, att, _) in items {
                    // A failed reply (the querier gone) ends the answer.
                    if q.reply(q.key_expr().clone(), payload)
                        .attachment(att)
                        .wait()
                        .is_err()
                    {
                        return;
                    }
                }
                let range = Meta {
                    kind: Kind::CacheRange,
                    ..Meta::data(stream, first, next, byte_positions)
                };
                let _ = q
                    .reply(q.key_expr().clone(), ZBytes::new())
                    .attachment(range.encode())
                    .wait();
            })
            .await
            .map_err(zenoh)?;
        Ok(Self {
            entries,
            cap,
            _queryable: queryable,
        })
    }

    /// Remember a published data sample.
    pub(crate) fn push(&self, payload: ZBytes, att: Vec<u8>, meta: &Meta) {
        let mut e = lock(&self.entries);
        e.items.push_back((payload, att, meta.pos));
        e.next = meta.next;
        while e.items.len() > self.cap {
            e.items.pop_front();
        }
    }
}

/// Ask the cache of `stream` (exported to `key`) for what it holds, until
/// an answer arrives complete (its range reply) or `stop` completes. The
/// samples come back oldest first; `None`: stopped.
pub(crate) async fn fetch(
    session: &Session,
    stream: u64,
    key: &str,
    stop: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Result<Option<Vec<Sample>>, BridgeError> {
    let selector = crate::liveness::cache_key(stream, key);
    loop {
        let replies = session
            .get(selector.clone())
            .target(QueryTarget::All)
            .consolidation(ConsolidationMode::None)
            .timeout(QUERY_TIMEOUT)
            .await
            .map_err(zenoh)?;
        let mut got = Vec::new();
        let mut complete = false;
        loop {
            let r = tokio::select! {
                biased;
                () = stop.as_mut() => return Ok(None),
                r = replies.recv_async() => r,
            };
            let Ok(reply) = r else { break };
            let Ok(sample) = reply.into_result() else {
                continue;
            };
            let range = sample
                .attachment()
                .map(|a| a.to_bytes().into_owned())
                .and_then(|a| Meta::decode(&a, sample.payload().len()).ok())
                .is_some_and(|m| m.kind == Kind::CacheRange && m.stream == stream);
            if range {
                complete = true;
            } else {
                got.push(sample);
            }
        }
        if complete {
            return Ok(Some(got));
        }
        // Not routed to the cache yet: ask again shortly.
        tokio::select! {
            biased;
            () = stop.as_mut() => return Ok(None),
            () = tokio::time::sleep(RETRY) => {}
        }
    }
}
