//! Ring ends in the registry of live objects (`zcio_sys::registry`): a
//! producer and each consumer register when they attach, named by the ring
//! name, with the ring file's mode, and keep their counters
//! (`schema::producer`, `schema::consumer`) live in the entry's page
//! ([`StatsPage`]) with plain stores on the data path. A registration that
//! fails is counted (`zcio_sys::registry::failures`) and the end keeps its
//! counters in a local page.

use zcio_sys::registry::schema::{consumer as cons, producer as prod};
use zcio_sys::registry::{Kind, StatsPage};

use super::map::RingMap;

/// The page of the producer of `map`, which has written `blocks` blocks of
/// `bytes` bytes so far and writes next at `head`.
pub(super) fn producer(map: &RingMap, blocks: u64, bytes: u64, head: u64) -> StatsPage {
    register(
        Kind::RingProducer,
        map,
        &[
            (prod::BLOCKS, blocks),
            (prod::BYTES, bytes),
            (prod::HEAD, head),
            (prod::CAPACITY_BYTES, map.geometry().data_len),
        ],
    )
}

/// The page of a consumer of `map` that starts reading at `position`,
/// `lag` units behind the producer.
pub(super) fn consumer(map: &RingMap, position: u64, lag: u64) -> StatsPage {
    register(
        Kind::RingConsumer,
        map,
        &[(cons::POSITION, position), (cons::LAG_BYTES, lag)],
    )
}

fn register(kind: Kind, map: &RingMap, counters: &[(usize, u64)]) -> StatsPage {
    StatsPage::register(kind, map.name(), map.file_info().mode, counters)
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
        let p_entry = e.iter().find(|e| e.kind == Kind::RingProducer).unwrap();
        assert_eq!(p_entry.stats[prod::BLOCKS], 1);
        assert_eq!(p_entry.stats[prod::BYTES], 3);
        drop((p, c));
        assert!(ours(&name).is_empty(), "entries go with their ends");
        let _ = unlink(&name);
    }

    #[test]
    #[cfg_attr(miri, ignore = "ring: a /dev/shm file mapped shared; not in Miri")]
    fn counters_move_live_in_the_entries() {
        let name = format!("unit-live-counters-{}", std::process::id());
        let map = Options::new().size(64 << 10).create(&name).unwrap();
        let _ = unlink(&name);
        let mut p = Producer::attach(map.clone()).unwrap();
        let mut c = Consumer::attach(map.clone(), Start::Newest).unwrap();
        for _ in 0..3 {
            assert_eq!(p.write(&[7u8; 100]).unwrap(), 100);
        }
        let mut buf = [0u8; 100];
        assert_eq!(c.read(&mut buf).unwrap(), 100);
        let ps = p.stats();
        assert_eq!((ps.blocks, ps.bytes, ps.head), (3, 300, 300));
        assert_eq!((ps.consumers, ps.capacity_bytes), (1, 64 << 10));
        let cs = c.stats();
        assert_eq!((cs.read_blocks, cs.read_bytes, cs.lag), (1, 100, 200));
        assert_eq!(c.read(&mut buf).unwrap(), 100);
        assert_eq!(c.read(&mut buf).unwrap(), 100);
        assert_eq!(
            c.try_read(&mut buf),
            Err(super::super::ReadError::WouldBlock)
        );
        assert_eq!(c.stats().would_block, 1);
        // A full ring: the producer's refusals count too.
        while p.try_write(&[1u8; 4096]).is_ok() {}
        assert_eq!(p.stats().would_block, 1);
        // What tools see is what the ends say.
        if RunDir::open_default().is_ok() {
            for e in ours(&name) {
                match e.kind {
                    Kind::RingProducer => {
                        let s = p.stats();
                        assert_eq!(e.stats[prod::BLOCKS], s.blocks);
                        assert_eq!(e.stats[prod::BYTES], s.bytes);
                        assert_eq!(e.stats[prod::HEAD], s.head);
                        assert_eq!(e.stats[prod::WOULD_BLOCK], 1);
                    }
                    _ => {
                        assert_eq!(e.stats[cons::BLOCKS], 3);
                        assert_eq!(e.stats[cons::BYTES], 300);
                        assert_eq!(e.stats[cons::POSITION], 300);
                        assert_eq!(e.stats[cons::WOULD_BLOCK], 1);
                    }
                }
            }
        }
    }
}
