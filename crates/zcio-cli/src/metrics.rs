//! `zcio metrics`: every live object's statistics in the OpenMetrics text
//! format (Prometheus scrapes it), encoded by the `prometheus-client`
//! crate. One metric family per kind and counter of the schema,
//! `zcio_<kind>_<field>` (`_total` added to counters by the encoder), with
//! the labels `name`, `pid` and `entry` (the entry file, so every object is
//! its own series); plus `zcio_objects{kind,state}`,
//! `zcio_registry_invalid` and `zcio_registry_unreadable`. Each scrape
//! lists the registry afresh. `--listen` serves it over HTTP/1.1 (hyper on
//! tokio: bounded headers, slow clients timed out, a bounded number of
//! connections); `--once` prints it; `--list` prints the table of metrics.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use zcio_sys::registry::schema::{self, Type};
use zcio_sys::registry::{Kind, Listing, State};

use crate::objects;

#[derive(Args, Debug)]
pub struct MetricsArgs {
    /// Serve the metrics over HTTP at ADDR:PORT (`127.0.0.1:9464`; port 0
    /// picks a free one). The first line on stdout is the URL served.
    #[arg(long, value_name = "ADDR:PORT", conflicts_with_all = ["once", "list"])]
    pub listen: Option<SocketAddr>,
    /// Print the metrics once on stdout and exit.
    #[arg(long, conflicts_with = "list")]
    pub once: bool,
    /// Print the table of metric names, types and help (Markdown) and exit.
    #[arg(long)]
    pub list: bool,
}

type Labels = Vec<(String, String)>;

/// The OpenMetrics content type of the exposition.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// At most this many connections are served at once (more wait in the
/// kernel's backlog).
const MAX_CONNECTIONS: usize = 64;
/// A client must send its request head within this.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection (keep-alive included) lasts at most this.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest request head read.
const MAX_REQUEST: usize = 16 << 10;

/// Run `zcio metrics`; `Ok(status)` is the exit status.
pub fn run(a: MetricsArgs) -> Result<i32> {
    if a.list {
        print!("{}", table());
        return Ok(0);
    }
    if let Some(addr) = a.listen {
        return serve(addr).map(|()| 0);
    }
    if a.once {
        print!("{}", scrape(true)?);
        return Ok(0);
    }
    Err(crate::usage(
        "say what to do: --listen 127.0.0.1:9464 (serve), --once (print) or --list (the metric table)",
    ))
}

/// The metric name of `kind`'s field `field` (before the counter suffix).
pub fn metric_name(kind: Kind, field: &str) -> String {
    format!("zcio_{}_{field}", kind.as_str())
}

/// The exposition of the registry as it is now.
fn scrape(warn: bool) -> Result<String> {
    let (_, l) = objects::list(warn)?;
    exposition(&l)
}

/// `l` in the OpenMetrics text format.
pub fn exposition(l: &Listing) -> Result<String> {
    let mut reg = Registry::default();
    let mut counters: BTreeMap<(Kind, usize), Family<Labels, Counter>> = BTreeMap::new();
    let mut gauges: BTreeMap<(Kind, usize), Family<Labels, Gauge<u64, AtomicU64>>> =
        BTreeMap::new();
    for kind in Kind::ALL {
        for f in schema::fields(kind) {
            let name = metric_name(kind, f.name);
            match f.ty {
                Type::Counter => {
                    let fam = Family::<Labels, Counter>::default();
                    reg.register(name, f.help, fam.clone());
                    counters.insert((kind, f.index), fam);
                }
                Type::Gauge => {
                    let fam = Family::<Labels, Gauge<u64, AtomicU64>>::default();
                    reg.register(name, f.help, fam.clone());
                    gauges.insert((kind, f.index), fam);
                }
            }
        }
    }
    let objects = Family::<Labels, Gauge<u64, AtomicU64>>::default();
    reg.register(
        "zcio_objects",
        "zcio objects in the run directory by kind and state",
        objects.clone(),
    );
    let mut per: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for e in &l.entries {
        *per.entry((e.kind.as_str(), e.state.as_str())).or_default() += 1;
        if e.state == State::Dead {
            continue;
        }
        let labels: Labels = vec![
            ("name".into(), e.name.clone()),
            ("pid".into(), e.pid.to_string()),
            ("entry".into(), e.file.clone()),
        ];
        for f in schema::fields(e.kind) {
            let v = objects::value(e, f);
            if let Some(fam) = counters.get(&(e.kind, f.index)) {
                fam.get_or_create(&labels).inc_by(v);
            } else if let Some(fam) = gauges.get(&(e.kind, f.index)) {
                fam.get_or_create(&labels).set(v);
            }
        }
    }
    for ((kind, state), n) in per {
        objects
            .get_or_create(&vec![
                ("kind".into(), kind.into()),
                ("state".into(), state.into()),
            ])
            .set(n);
    }
    let invalid = Gauge::<u64, AtomicU64>::default();
    invalid.set(l.invalid.len() as u64);
    reg.register(
        "zcio_registry_invalid",
        "files in the run directory that are not valid entries",
        invalid,
    );
    let unreadable = Gauge::<u64, AtomicU64>::default();
    unreadable.set(l.unreadable as u64);
    reg.register(
        "zcio_registry_unreadable",
        "entries this user may not open",
        unreadable,
    );
    let mut s = String::new();
    encode(&mut s, &reg).context("encode the metrics")?;
    Ok(s)
}

/// Every metric as a Markdown table (for `--list` and docs/metrics.md).
pub fn table() -> String {
    let mut o =
        String::from("| metric | type | kind | unit | help |\n| --- | --- | --- | --- | --- |\n");
    for kind in Kind::ALL {
        for f in schema::fields(kind) {
            let (ty, suffix) = match f.ty {
                Type::Counter => ("counter", "_total"),
                Type::Gauge => ("gauge", ""),
            };
            o += &format!(
                "| `{}{suffix}` | {ty} | {} | {} | {} |\n",
                metric_name(kind, f.name),
                kind.as_str(),
                f.unit.as_str(),
                f.help
            );
        }
    }
    o += "| `zcio_objects` | gauge | (all) | objects | zcio objects in the run directory by kind and state (labels `kind`, `state`) |\n";
    o += "| `zcio_registry_invalid` | gauge | (all) | files | files in the run directory that are not valid entries |\n";
    o += "| `zcio_registry_unreadable` | gauge | (all) | entries | entries this user may not open |\n";
    o
}

fn serve(addr: SocketAddr) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start the runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} (is the port in use? port 0 picks a free one)"))?;
        let bound = listener.local_addr().context("local address")?;
        // The first line: what a script or test reads to find the port.
        println!("http://{bound}/metrics");
        if !bound.ip().is_loopback() {
            eprintln!("zcio metrics: serving on {bound}: every host that reaches it sees the names of this user's zcio objects");
        }
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        loop {
            let permit = slots.clone().acquire_owned().await.context("connection limit")?;
            let (stream, _) = tokio::select! {
                r = listener.accept() => match r {
                    Ok(s) => s,
                    // Out of descriptors, a connection reset before accept:
                    // keep serving the others.
                    Err(e) => {
                        eprintln!("zcio metrics: accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = tokio::signal::ctrl_c() => return Ok(()),
            };
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let mut b = hyper::server::conn::http1::Builder::new();
                b.timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .max_buf_size(MAX_REQUEST);
                let conn = b.serve_connection(io, hyper::service::service_fn(respond));
                // A client slower than this is dropped; errors from a
                // client (bad requests, resets) end only its connection.
                let _ = tokio::time::timeout(CONNECTION_TIMEOUT, conn).await;
                drop(permit);
            });
        }
    })
}

type Body = http_body_util::Full<hyper::body::Bytes>;

async fn respond(
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Body>, std::convert::Infallible> {
    use hyper::{Method, StatusCode};
    let reply = |code: StatusCode, ty: &str, body: String| {
        let mut r = hyper::Response::new(Body::from(body));
        *r.status_mut() = code;
        if let Ok(v) = hyper::header::HeaderValue::from_str(ty) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        Ok(r)
    };
    const PLAIN: &str = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            "only GET /metrics\n".into(),
        );
    }
    match req.uri().path() {
        "/metrics" | "/" => match tokio::task::spawn_blocking(|| scrape(false)).await {
            Ok(Ok(s)) => reply(StatusCode::OK, CONTENT_TYPE, s),
            Ok(Err(e)) => reply(StatusCode::INTERNAL_SERVER_ERROR, PLAIN, format!("{e:#}\n")),
            Err(_) => reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                PLAIN,
                "the scrape failed\n".into(),
            ),
        },
        _ => reply(
            StatusCode::NOT_FOUND,
            PLAIN,
            "not found: the metrics are at /metrics\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zcio_sys::registry::schema::{channel, consumer};
    use zcio_sys::registry::Entry;

    fn entry(kind: Kind, name: &str, file: &str, stats: &[(usize, u64)]) -> Entry {
        let mut s = vec![0; zcio_sys::registry::STATS_COUNT];
        for &(i, v) in stats {
            s[i] = v;
        }
        Entry {
            file: file.into(),
            kind,
            name: name.into(),
            pid: 42,
            pid_ns: 0,
            uid: 0,
            file_uid: 0,
            mode: 0o400,
            created_ns: 0,
            state: State::Live,
            stats: s,
        }
    }

    #[test]
    fn counters_gauges_and_labels() {
        let l = Listing {
            entries: vec![
                entry(
                    Kind::Channel,
                    "/tmp/a \"b\".sock",
                    "channel.a.1",
                    &[(channel::SENT_MESSAGES, 5), (channel::RECEIVED_SLICES, 3)],
                ),
                entry(
                    Kind::RingConsumer,
                    "demo",
                    "consumer.demo.2",
                    &[(consumer::LAG_BYTES, 4096)],
                ),
            ],
            ..Listing::default()
        };
        let s = exposition(&l).unwrap();
        assert!(
            s.contains("# TYPE zcio_channel_sent_messages counter\n"),
            "{s}"
        );
        assert!(s.contains("zcio_channel_sent_messages_total{name=\"/tmp/a \\\"b\\\".sock\",pid=\"42\",entry=\"channel.a.1\"} 5\n"), "{s}");
        assert!(s.contains("# TYPE zcio_channel_holding_buffers gauge\n"));
        assert!(
            s.contains("zcio_channel_holding_buffers{name=\"/tmp/a \\\"b\\\".sock\",pid=\"42\",entry=\"channel.a.1\"} 3\n"),
            "a difference is computed from its counters: {s}"
        );
        assert!(s.contains("zcio_consumer_lag_bytes{name=\"demo\",pid=\"42\",entry=\"consumer.demo.2\"} 4096\n"), "{s}");
        assert!(
            s.contains("zcio_objects{kind=\"channel\",state=\"live\"} 1\n"),
            "{s}"
        );
        assert!(s.contains("zcio_registry_invalid 0\n"), "{s}");
        assert!(s.ends_with("# EOF\n"));
    }

    #[test]
    fn the_table_names_every_field() {
        let t = table();
        for kind in Kind::ALL {
            for f in schema::fields(kind) {
                assert!(t.contains(&metric_name(kind, f.name)), "{kind} {}", f.name);
            }
        }
        assert!(t.contains("`zcio_channel_sent_messages_total` | counter"));
    }

    #[test]
    fn docs_list_every_metric() {
        let doc = include_str!("../../../docs/metrics.md");
        assert!(
            doc.contains(&table()),
            "docs/metrics.md is out of date: paste the output of `zcio metrics --list` at its end"
        );
    }
}
