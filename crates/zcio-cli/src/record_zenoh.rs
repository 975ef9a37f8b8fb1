//! `zcio record zenoh:KEY`: the samples of a Zenoh key expression (a
//! `zcio bridge export`, or any Zenoh publisher) into the MCAP file.
//!
//! The bridge's own importer follows the stream (`zcio_zenoh::Importer`
//! with a [`Sink::Deliver`]): samples in stream order, duplicates dropped,
//! gaps counted, the exporter's end of stream, error close, its producer's
//! death and the exporter vanishing (its liveliness token gone) told apart
//! exactly as `zcio bridge import` does. The importer hands each delivered
//! sample to a queue bounded in bytes ([`QUEUE_BYTES`]); the source's
//! recording thread takes them from there into the file. A disk slower
//! than the stream fills the queue, and then the importer's policy
//! applies: the Zenoh receive thread waits for room, which holds the link
//! and (for exports of block-policy rings, published with
//! `CongestionControl::Block`) the remote producer — the recording slows
//! the stream down, it never drops samples.
//!
//! Every Zenoh source shares one session (`--listen`, `--connect`,
//! `--config`, like `zcio bridge`), on a small tokio runtime.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::runtime::{Handle, Runtime};
use zcio_zenoh::zenoh::Session;
use zcio_zenoh::{deliveries, Deliveries, ImportOptions, Importer, Next, SessionOptions, Sink};

use crate::bridge::{bridge_err, listening, watch_reach, FollowArgs, SessionArgs};
use crate::mcap_out::{tag_of, ChannelKey};
use crate::record::{Shared, StreamFailed, IDLE};

/// Bytes of samples waiting between the importer and the file, at most
/// (plus one sample, when a single one is larger).
pub const QUEUE_BYTES: usize = 32 << 20;

/// The Zenoh session of every `zenoh:` source of one recording.
pub struct ZenohSide {
    rt: Runtime,
    session: Session,
    /// The endpoints the session listens on (for the `ready` line).
    pub endpoints: String,
    reach: Option<tokio::task::JoinHandle<()>>,
    max_sample: usize,
    grace: std::time::Duration,
    connect_timeout: Option<std::time::Duration>,
}

/// One opened `zenoh:KEY` source: its importer, subscribed once it runs.
pub struct ZenohSource {
    expr: String,
    importer: Importer,
    rx: Deliveries,
}

impl ZenohSide {
    /// Check the session options and open the session.
    pub fn open(session: &SessionArgs, follow: &FollowArgs) -> Result<Self> {
        let opts: SessionOptions = session.options()?;
        let (grace, connect_timeout) = follow.durations()?;
        crate::bridge::keep_freed_memory();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("zcio-record-zenoh")
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        let targets = session.connect_targets(&opts);
        let (s, endpoints, reach) = rt.block_on(async {
            let s = opts.open().await?;
            let eps = listening(&s).await;
            let reach = watch_reach(&s, "zcio record", targets);
            anyhow::Ok((s, eps, reach))
        })?;
        Ok(Self {
            rt,
            session: s,
            endpoints,
            reach,
            max_sample: session.max_size,
            grace,
            connect_timeout,
        })
    }

    /// A source importing `expr`; `history`: catch up from the exporter's
    /// cache first.
    pub fn source(&self, expr: &str, history: bool) -> Result<ZenohSource> {
        let (tx, rx) = deliveries(QUEUE_BYTES);
        let importer = Importer::new(
            &self.session,
            expr,
            Sink::Deliver(tx),
            ImportOptions {
                history,
                grace: self.grace,
                max_sample: self.max_sample,
                connect_timeout: self.connect_timeout,
                keep: false,
                ..ImportOptions::default()
            },
        )
        .map_err(bridge_err)?;
        Ok(ZenohSource {
            expr: expr.to_owned(),
            importer,
            rx,
        })
    }

    /// The runtime the importers run on.
    pub fn handle(&self) -> Handle {
        self.rt.handle().clone()
    }

    /// Close the session (after every source ended).
    pub fn close(self) {
        if let Some(r) = &self.reach {
            r.abort();
        }
        let _ = self.rt.block_on(async { self.session.close().await });
    }
}

/// The metadata of the MCAP channel of key `key` (of source `expr`).
fn metadata(expr: &str, key: &ChannelKey) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("zcio.source".into(), "zenoh".into());
    m.insert("zcio.key_expr".into(), expr.into());
    m.insert("zcio.key".into(), key.0.clone());
    if key.2 != 0 {
        m.insert("zcio.block_tag".into(), key.2.to_string());
    }
    m
}

/// Record `src` until the exporter's end of stream, a stop, or a failure
/// of the stream ([`StreamFailed`]: what arrived before stays in the file).
pub fn record(src: ZenohSource, rt: &Handle, shared: &Arc<Shared>) -> Result<()> {
    let ZenohSource { expr, importer, rx } = src;
    let counters = importer.counters();
    let s = shared.clone();
    let stop = async move {
        while !s.stopped() {
            tokio::time::sleep(IDLE).await;
        }
    };
    let s = shared.clone();
    let task = rt.spawn(importer.run(stop, move || s.ready_one()));
    let mut seen: HashSet<ChannelKey> = HashSet::new();
    let mut more = true;
    let mut failed = None;
    loop {
        match rx.recv_timeout(IDLE) {
            Next::Sample(d) if more => {
                let typed = if d.array { None } else { tag_of(&d.data) };
                let key: ChannelKey = (d.key, typed, d.tag);
                if !seen.contains(&key) {
                    if let Err(e) = shared.channel(&key, &metadata(&expr, &key)) {
                        failed = Some(e);
                        break;
                    }
                    seen.insert(key.clone());
                }
                let publish = d.timestamp_ns.unwrap_or(d.received_ns);
                match shared.write_at(&key, d.received_ns, publish, &d.data) {
                    Ok(true) => {}
                    // --count reached or the file closed: the stop ends the
                    // import; what still comes is dropped.
                    Ok(false) => more = false,
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            Next::Sample(_) | Next::TimedOut => {}
            Next::Closed(_) => break,
        }
    }
    // A failed write: stop the import (its next sample fails too, the
    // queue's reader being gone) and wait for it before saying why.
    drop(rx);
    if let Some(e) = failed {
        shared.stop_now();
        let _ = rt.block_on(task);
        return Err(e);
    }
    let res = rt
        .block_on(task)
        .with_context(|| format!("the import of zenoh:{expr} failed"))?;
    let st = counters.snapshot();
    let dropped = st.oversize + st.malformed;
    if st.gaps > 0 || dropped > 0 {
        eprintln!(
            "zcio record: warning: zenoh:{expr}: {} gaps in the stream ({} positions lost upstream), {} samples dropped ({} larger than --max-size, {} with a malformed attachment)",
            st.gaps, st.lost, dropped, st.oversize, st.malformed
        );
    }
    match res {
        Ok(_) => Ok(()),
        Err(e) if e.is_usage() => Err(bridge_err(e)),
        Err(e) => Err(StreamFailed(format!("zenoh:{expr}: {e}")).into()),
    }
}
