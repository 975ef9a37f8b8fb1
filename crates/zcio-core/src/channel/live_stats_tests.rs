//! The statistics page of a channel end moves as the end works: messages
//! and bytes each way, what each side holds, refusals per direction, the
//! peer's pid and the connection id both ends share.

use std::time::Duration;

use super::{Channel, ChannelConfig};
use crate::buf::{Pool, PoolConfig};
use crate::msg::Msg;

fn by_ref() -> ChannelConfig {
    ChannelConfig {
        lane: crate::LaneConfig::OFF,
        ring_entries: 8,
        ..ChannelConfig::default()
    }
}

fn filled(pool: &Pool, bytes: &[u8]) -> Msg {
    let mut b = pool.try_alloc(bytes.len()).unwrap();
    b.as_mut_slice().copy_from_slice(bytes);
    Msg::from(b.freeze().unwrap())
}

#[test]
#[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
fn counters_follow_messages_holdings_and_refusals() {
    let pool = Pool::new(PoolConfig {
        chunk_size: 1 << 20,
        max_chunks: 1,
        ..PoolConfig::named("live-stats")
    });
    let (a, b) = Channel::pair(by_ref()).unwrap();
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.peer_pid, std::process::id());
    assert_ne!(sa.connection, 0);
    assert_eq!(
        sa.connection, sb.connection,
        "both ends name one connection"
    );

    assert!(b.try_recv().is_err());
    assert_eq!(b.stats().recv_would_block, 1);
    assert!(b.recv_timeout(Duration::from_millis(1)).is_err());
    assert_eq!(b.stats().recv_timed_out, 1);

    a.send(filled(&pool, b"hello")).unwrap();
    a.send(filled(&pool, &[7; 100])).unwrap();
    let s = a.stats();
    assert_eq!((s.msgs_sent, s.bytes_sent), (2, 105));
    assert_eq!((s.held_by_peer, s.held_by_peer_bytes), (2, 105));

    let m1 = b.recv().unwrap();
    let m2 = b.recv().unwrap();
    let s = b.stats();
    assert_eq!((s.msgs_received, s.bytes_received, s.holding), (2, 105, 2));
    drop(m1);
    assert_eq!(b.stats().holding, 1);
    drop(m2);
    assert_eq!(b.stats().holding, 0);
    b.flush();
    a.reclaim();
    let s = a.stats();
    assert_eq!((s.held_by_peer, s.held_by_peer_bytes), (0, 0));
    assert_eq!(s.notices_received, 2);

    // Fill the ring (8 entries) without a receiver: the next try is refused.
    let mut refused = 0;
    for _ in 0..9 {
        if a.try_send(filled(&pool, b"x")).is_err() {
            refused += 1;
        }
    }
    assert_eq!(refused, 1);
    assert_eq!(a.stats().send_would_block, 1);

    drop(b);
    assert!(a.try_send(filled(&pool, b"late")).is_err());
    assert_eq!(a.stats().send_disconnected, 1);
    while a.try_recv().is_ok() {}
    assert_eq!(a.stats().recv_disconnected, 1);
}
