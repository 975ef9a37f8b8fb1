//! Ring ends in the registry of live objects (`zcio_sys::registry`): a
//! producer and each consumer register when they attach, named by the ring
//! name, with the ring file's mode. Only attach and drop touch the
//! registry; a registration that fails is counted
//! (`zcio_sys::registry::failures`) and the end works without it.

use zcio_sys::registry::schema::producer;
use zcio_sys::registry::{register_quietly, Kind, Registration};

use super::map::RingMap;

/// Register the producer of `map`, which has written `blocks` blocks of
/// `bytes` bytes so far.
pub(super) fn producer(map: &RingMap, blocks: u64, bytes: u64) -> Option<Registration> {
    register(
        Kind::RingProducer,
        map,
        &[(producer::BLOCKS, blocks), (producer::BYTES, bytes)],
    )
}

/// Register a consumer of `map`, its counters set from `(index, value)`
/// pairs (indices in `zcio_sys::registry::schema::consumer`; the consumer builds them from its stats).
pub(super) fn consumer(map: &RingMap, counters: &[(usize, u64)]) -> Option<Registration> {
    register(Kind::RingConsumer, map, counters)
}

fn register(kind: Kind, map: &RingMap, counters: &[(usize, u64)]) -> Option<Registration> {
    register_quietly(kind, map.name(), map.file_info().mode, counters)
}

#[cfg(test)]
mod tests {
    use zcio_sys::registry::{Entry, RunDir, State};

    use super::super::{unlink, Consumer, Layout, Options, Producer, Start};
    use super::*;

    /// Our live entries named `name` in the default run directory.
    fn ours(name: &str) -> Vec<Entry> {
        let Ok(dir) = RunDir::open_default() else {
            return Vec::new();
        };
        dir.list()
            .unwrap()
            .entries
            .into_iter()
            .filter(|e| e.name == name && e.pid == std::process::id())
            .collect()
    }

    #[test]
    #[cfg_attr(miri, ignore = "ring: a /dev/shm file mapped shared; not in Miri")]
    fn ring_ends_register_while_they_live() {
        if RunDir::open_default().is_err() {
            eprintln!("skipped: no usable run directory");
            return;
        }
        let name = format!("unit-registered-{}", std::process::id());
        let map = Options::new()
            .layout(Layout::Variable)
            .size(64 << 10)
            .mode(0o640)
            .create(&name)
            .unwrap();
        let mut p = Producer::attach(map.clone()).unwrap();
        p.write(b"abc").unwrap();
        let c = Consumer::attach(map.clone(), Start::Oldest).unwrap();
        let mut e = ours(&name);
        e.sort_by_key(|e| e.kind);
        let kinds: Vec<(Kind, State, u32)> = e.iter().map(|e| (e.kind, e.state, e.mode)).collect();
        assert_eq!(
            kinds,
            [
                (Kind::RingProducer, State::Live, 0o440),
                (Kind::RingConsumer, State::Live, 0o440)
            ]
        );
        drop(p);
        // A producer attached again starts from what the ring says.
        let p = Producer::attach(map).unwrap();
        let e = ours(&name);
        let prod = e.iter().find(|e| e.kind == Kind::RingProducer).unwrap();
        assert_eq!(prod.stats[producer::BLOCKS], 1);
        assert_eq!(prod.stats[producer::BYTES], 3);
        drop((p, c));
        assert!(ours(&name).is_empty(), "entries go with their ends");
        let _ = unlink(&name);
    }
}
