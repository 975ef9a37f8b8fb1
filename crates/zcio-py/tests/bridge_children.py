"""Entry points of the children of test_bridge.py: zcio senders and ring
readers on either side of a Zenoh bridge, and plain eclipse-zenoh
publishers and subscribers that know nothing of zcio. Each child raises
(exit code 1) on any unexpected outcome; the parent asserts exit code 0.

Every Zenoh session here names its endpoints (``tcp/127.0.0.1:PORT``) and
has multicast scouting off."""

from __future__ import annotations

import json
import queue
import time

import numpy as np

import zcio
import zcio_children as kids

TIMEOUT = kids.TIMEOUT

#: What the subscriber test writes into the ring until the subscriber has
#: seen one (so the real blocks are published only once it listens).
PROBE = b"probe"


# ---------------------------------------------------------------- arrays


def pool_views(x: np.ndarray) -> list[np.ndarray]:
    """Views of a (64, 32) float64 array sent without a copy: strided,
    reversed, transposed (element 0 not at the payload's start)."""
    return [x[::-1, ::2], x.T[3:, :17]]


def base_values() -> np.ndarray:
    return np.arange(64 * 32, dtype=np.float64).reshape(64, 32) * 0.5 - 7.0


def bridge_arrays() -> list[np.ndarray]:
    """The arrays host A sends, as host B must read them back."""
    return kids.test_arrays() + pool_views(base_values())


def check_array(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if want.size and (want.flags.c_contiguous or want.flags.f_contiguous):
        assert got.strides == want.strides, (what, got.strides, want.strides)
    assert got.tobytes() == want.tobytes(), f"{what}: bytes differ"
    assert not got.flags.writeable, what


def send_arrays_to_listener(path: str, done) -> None:
    """Host A: send every array of bridge_arrays() on a channel to `path`
    (the exporting bridge's listener): copied ones, then pool arrays sent
    without a copy. Stays connected until `done` is set."""
    pool = zcio.Pool("bridge-host-a", chunk_size=1 << 20, max_chunks=2)
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        for a in kids.test_arrays():
            ch.send_array(a, timeout=TIMEOUT)
        x = pool.empty((64, 32), dtype=np.float64)
        x[:] = base_values()
        for v in pool_views(x):
            ch.send_array(v, timeout=TIMEOUT)
        assert done.wait(TIMEOUT), "the parent never said done"


def read_ring_arrays(ring: str, attached, got_all) -> None:
    """Host B: one of several local readers of the imported ring. Each
    block is read as an array in place (Peek.array()), checked against
    bridge_arrays(), then released; then the end of the stream."""
    want = bridge_arrays()
    with zcio.RingConsumer(ring, start="oldest", timeout=TIMEOUT) as cons:
        attached.set()
        for i, w in enumerate(want):
            pk = cons.peek(timeout=TIMEOUT)
            assert pk is not None, f"end of stream before array {i}"
            arr = pk.array()
            check_array(arr, w, f"array {i}")
            # In place: the array's memory is the block's, behind the header.
            assert isinstance(arr.base, zcio.PeekView) and arr.base.peek is pk
            assert zcio.is_volatile(arr)
            block = np.frombuffer(pk, dtype=np.uint8)
            start = block.ctypes.data
            if arr.size:
                spans = [s * (d - 1) for s, d in zip(arr.strides, arr.shape)]
                lo = arr.ctypes.data + sum(x for x in spans if x < 0)
                hi = arr.ctypes.data + sum(x for x in spans if x > 0) + arr.itemsize
                assert start + 64 <= lo and hi <= start + len(pk), "the array is not in the block"
            del block
            try:
                pk.release()
            except BufferError:
                pass
            else:
                raise AssertionError("release() must be refused while the array lives")
            del arr
            pk.release()
        got_all.set()
        assert cons.peek(timeout=TIMEOUT) is None, "expected the end of the stream"


# ------------------------------------------------------------ plain zenoh


def zenoh_config(connect: list[str] | None = None, listen: list[str] | None = None):
    """A peer session on named endpoints only, multicast scouting off."""
    import zenoh

    c = zenoh.Config()
    c.insert_json5("mode", '"peer"')
    c.insert_json5("scouting/multicast/enabled", "false")
    c.insert_json5("listen/endpoints", json.dumps(listen or []))
    c.insert_json5("connect/endpoints", json.dumps(connect or []))
    return c


def zenoh_subscriber(endpoint: str, key: str, blocks: list[int], probe_seen) -> None:
    """A plain Zenoh subscriber of an exported ring: after the probes, each
    sample's payload is one ring block's bytes exactly (block i:
    kids.sized(i, blocks[i])), zcio's metadata rides in the attachment, and
    the end of the stream is a DELETE of the key."""
    import zenoh

    got: queue.Queue = queue.Queue()

    def on_sample(s) -> None:
        att = s.attachment
        got.put((s.kind, s.payload.to_bytes(), None if att is None else att.to_bytes()))

    with zenoh.open(zenoh_config(connect=[endpoint])) as session:
        sub = session.declare_subscriber(key, on_sample)
        i = 0
        while True:
            kind, payload, att = got.get(timeout=TIMEOUT)
            if kind == zenoh.SampleKind.DELETE:
                assert payload == b"", payload
                assert att is not None and att[:4] == b"zcio", att
                break
            assert kind == zenoh.SampleKind.PUT, kind
            assert att is not None and att[:4] == b"zcio", "zcio's metadata is in the attachment"
            if payload == PROBE:
                assert i == 0, "a probe after the real blocks"
                probe_seen.set()
                continue
            assert i < len(blocks), f"more samples than blocks ({len(blocks)})"
            assert payload == kids.sized(i, blocks[i]), f"block {i} differs"
            i += 1
        assert i == len(blocks), f"{i} of {len(blocks)} blocks before the DELETE"
        sub.undeclare()


def wait_matching(publisher, deadline: float) -> None:
    """Until a subscriber (the importing bridge) matches `publisher`."""
    while not publisher.matching_status.matching:
        assert time.monotonic() < deadline, "no subscriber matched the publisher"
        time.sleep(0.02)


def zenoh_publisher(endpoint: str, key: str, payloads: list[bytes], done) -> None:
    """A plain Zenoh publisher: `payloads` as they are, no attachment."""
    import zenoh

    with zenoh.open(zenoh_config(connect=[endpoint])) as session:
        pub = session.declare_publisher(
            key, congestion_control=zenoh.CongestionControl.BLOCK, reliability=zenoh.Reliability.RELIABLE
        )
        wait_matching(pub, time.monotonic() + TIMEOUT)
        for p in payloads:
            pub.put(p)
        assert done.wait(TIMEOUT), "the parent never said done"
        pub.undeclare()


def zcio_record(version: int = 1, kind: int = 1, flags: int = 0, array_len: int = 0) -> bytes:
    """A 48-byte zcio attachment record (see crates/zcio-zenoh/src/wire.rs)."""
    r = bytearray(48)
    r[0:4] = b"zcio"
    r[4] = version
    r[5] = kind
    r[6:8] = flags.to_bytes(2, "little")
    r[8:16] = (77).to_bytes(8, "little")  # stream
    r[16:24] = (0).to_bytes(8, "little")  # position
    r[24:32] = (1).to_bytes(8, "little")  # position after
    r[40:44] = array_len.to_bytes(4, "little")
    return bytes(r)


def hostile_samples(max_size: int) -> list[tuple[str, bytes, bytes | None]]:
    """(what, payload, attachment): the good ones the importer must deliver
    in this order, the bad ones it must drop and count."""
    good = [kids.sized(i, n) for i, n in enumerate([100, max_size, 1])]
    return [
        ("good", good[0], None),
        ("oversize", kids.sized(50, max_size + 1), None),
        ("oversize", kids.sized(51, 3 * max_size), None),
        ("malformed", b"short", b"zcio\x01"),  # shorter than the record
        ("malformed", b"version", zcio_record(version=9)),  # a version nobody wrote
        ("malformed", b"long", zcio_record() + b"\0" * 8),  # 56 bytes, no array header announced
        ("malformed", b"flags", zcio_record(flags=2)),  # claims an array header it lacks
        ("good", good[1], None),
        ("good", good[2], b"another application's attachment"),
    ]


def zenoh_hostile_publisher(endpoint: str, key: str, max_size: int, done) -> None:
    """A plain Zenoh publisher that also sends oversized payloads and
    samples whose zcio attachment is malformed, between good samples."""
    import zenoh

    with zenoh.open(zenoh_config(connect=[endpoint])) as session:
        pub = session.declare_publisher(
            key, congestion_control=zenoh.CongestionControl.BLOCK, reliability=zenoh.Reliability.RELIABLE
        )
        wait_matching(pub, time.monotonic() + TIMEOUT)
        for _what, payload, att in hostile_samples(max_size):
            if att is None:
                pub.put(payload)
            else:
                pub.put(payload, attachment=att)
        assert done.wait(TIMEOUT), "the parent never said done"
        pub.undeclare()
