//! A forwarder that dies must not let the originator reuse a buffer that a
//! live receiver further down the path still reads.
//!
//! O (this test) → F (forwarder process) → R (keeper process). O sends one
//! 64 KiB buffer of `'A'` to F, F forwards it to R, R keeps it. F is killed
//! with SIGKILL. O's ledger loses its only witness of where the buffer went,
//! so it must retire the buffer instead of reusing it: whatever O allocates
//! and writes afterwards, R must still read `'A'`. Before retirement existed,
//! O's next allocation returned the very same pages and R saw `'B'`.

mod common;

use std::time::Duration;

use common::{Kid, SockPath, STEP};
use zcio::{Channel, ChannelConfig, Listener, Msg, Pool, PoolConfig};

const LEN: usize = 64 << 10;

#[test]
fn dead_forwarder_does_not_let_the_originator_reuse_what_a_receiver_holds() {
    let r_sock = SockPath::new("fwd-death-r");
    let f_sock = SockPath::new("fwd-death-f");
    let mut keeper = Kid::spawn("child_keeper", "keeper", &[("SOCK", r_sock.arg())]);
    keeper.expect("listening");
    let mut fwd = Kid::spawn(
        "child_forwarder",
        "forwarder",
        &[("UP", f_sock.arg()), ("DOWN", r_sock.arg())],
    );
    fwd.expect("listening");
    let o = Channel::connect(f_sock.path(), ChannelConfig::default()).expect("connect to F");
    // One chunk with room for two buffers: after the kill, a pool that
    // forgot where its buffer went hands out the same pages again.
    let pool = Pool::new(PoolConfig {
        chunk_size: 2 * LEN,
        max_chunks: 1,
        populate: false,
        ..PoolConfig::named("fwd-death")
    });
    let mut b = pool.alloc_timeout(LEN, STEP).expect("alloc");
    b.as_mut_slice().fill(b'A');
    let first = b.freeze().expect("freeze");
    let first_offset = first.region_offset();
    o.send(Msg::from(first)).expect("send to F");
    assert_eq!(fwd.expect("forwarded"), LEN.to_string());
    assert_eq!(keeper.expect("holding"), LEN.to_string());

    fwd.kill();
    common::eventually("O notices F's death", || !o.check_peer());

    // Allocate and overwrite whatever the pool hands out now — twice, so a
    // LIFO quick list or a best-fit extent would both have had their chance
    // to return the forwarded pages.
    let mut later = Vec::new();
    for fill in [b'B', b'C'] {
        match pool.alloc_timeout(LEN, Duration::from_millis(200)) {
            Ok(mut b) => {
                assert_ne!(
                    b.region_offset(),
                    first_offset,
                    "the forwarded buffer's pages were handed out again"
                );
                b.as_mut_slice().fill(fill);
                later.push(b.freeze().expect("freeze"));
            }
            Err(e) => eprintln!("alloc after the kill: {e}"),
        }
    }
    assert_eq!(keeper.ask("check"), format!("intact {LEN}"));
    let st = pool.stats();
    assert_eq!(st.buffers_retired, 1, "{st:?}");
    assert_eq!(st.bytes_retired, LEN, "{st:?}");
    assert_eq!(
        st.bytes_free + st.bytes_in_use + st.bytes_retired,
        st.bytes_total,
        "retired memory is accounted, not free: {st:?}"
    );
    drop(later);
    keeper.send("exit");
    keeper.finish();
}

#[test]
#[ignore = "child process entry point"]
fn child_forwarder() {
    if common::child_role("forwarder").is_none() {
        return;
    }
    let down = Channel::connect(common::arg("DOWN"), ChannelConfig::default()).expect("connect R");
    let up_l = Listener::bind(common::arg("UP"), ChannelConfig::default()).expect("bind");
    common::report("listening");
    let up = up_l.accept_timeout(STEP).expect("accept O");
    let m = up.recv_timeout(STEP).expect("recv from O");
    let len = m.len();
    down.send(m).expect("forward to R");
    common::report(format_args!("forwarded {len}"));
    // Wait to be killed.
    while common::command().is_some() {}
}

#[test]
#[ignore = "child process entry point"]
fn child_keeper() {
    if common::child_role("keeper").is_none() {
        return;
    }
    let l = Listener::bind(common::arg("SOCK"), ChannelConfig::default()).expect("bind");
    common::report("listening");
    let ch = l.accept_timeout(STEP).expect("accept F");
    let m = ch.recv_timeout(STEP).expect("recv from F");
    common::report(format_args!("holding {}", m.len()));
    while let Some(cmd) = common::command() {
        match cmd.as_str() {
            "check" => {
                let bytes = m.to_vec();
                match bytes.iter().position(|&b| b != b'A') {
                    None => common::report(format_args!("intact {}", bytes.len())),
                    Some(at) => {
                        common::report(format_args!("changed at {at}: {:?}", char::from(bytes[at])))
                    }
                }
            }
            "exit" => return,
            other => panic!("unknown command {other:?}"),
        }
    }
}
