"""zcio.bridge across real processes: `zcio bridge export|import` children
joined by explicit tcp/127.0.0.1 endpoints (multicast scouting off in
every session), zcio senders and ring readers on either side, and plain
eclipse-zenoh publishers and subscribers that know nothing of zcio.

Needs the `zcio` tool ($ZCIO_BIN or PATH; scripts/test-python builds it)
and the eclipse-zenoh package (requirements-dev.txt): without them these
tests fail, saying so. Nothing here asserts on time."""

from __future__ import annotations

import errno
import multiprocessing
import os
import time

import numpy as np
import pytest

import zcio
import zcio.bridge
import bridge_children as bk
import zcio_children as kids

SPAWN = multiprocessing.get_context("spawn")
T = kids.TIMEOUT
LOCAL = "tcp/127.0.0.1:0"


@pytest.fixture
def tools():
    """The bridge tests need the zcio tool and eclipse-zenoh: fail (not
    skip) without them, saying how to get them."""
    try:
        zcio.bridge.find_zcio()
    except FileNotFoundError as e:
        pytest.fail(f"{e} (scripts/test-python builds it and sets ZCIO_BIN)")
    try:
        import zenoh  # noqa: F401
    except ImportError:
        pytest.fail(
            "the eclipse-zenoh package is missing: pip install -r crates/zcio-py/requirements-dev.txt"
        )


@pytest.fixture
def key(request):
    return f"zcio-pytest/{os.getpid()}/{request.node.name}"


@pytest.fixture
def bridges():
    """start(fn, *args, **kw) -> Bridge; every bridge is stopped at teardown."""
    started: list[zcio.bridge.Bridge] = []

    def start(fn, *args, **kw):
        b = fn(*args, **kw)
        started.append(b)
        return b

    yield start
    for b in started:
        try:
            b.stop(timeout=10)
        except zcio.TimedOut:
            pass


def wait_event(ev, what: str) -> None:
    assert ev.wait(T), f"timed out waiting for {what}"


def test_numpy_arrays_from_a_channel_to_two_ring_readers(tools, sock_path, ring_name, key, bridges, child):
    """Host A sends numpy arrays with send_array on a channel to an
    exporting bridge's listener; host B's importing bridge writes them into
    a ring, where two reader processes each read every array zero-copy
    (Peek.array()) with its dtype, shape and strides, byte for byte."""
    ex = bridges(zcio.bridge.export, f"listen:{sock_path}", key, listen=LOCAL)
    assert len(ex.endpoints) == 1 and ex.endpoints[0].startswith("tcp/127.0.0.1:")
    assert not ex.endpoints[0].endswith(":0"), "port 0 is resolved in the ready line"
    im = bridges(
        zcio.bridge.import_, key, f"ring:{ring_name}", listen=LOCAL, connect=ex.endpoints, size=4 << 20
    )
    n = len(bk.bridge_arrays())
    attached = [SPAWN.Event() for _ in range(2)]
    got_all = [SPAWN.Event() for _ in range(2)]
    readers = [child(bk.read_ring_arrays, ring_name, attached[i], got_all[i]) for i in range(2)]
    for ev in attached:
        wait_event(ev, "a reader to attach")
    done = SPAWN.Event()
    sender = child(bk.send_arrays_to_listener, sock_path, done)
    for ev in got_all:
        wait_event(ev, "a reader to get every array")
    done.set()
    sender.join_ok()
    # Everything arrived: stopping the listener export publishes the end of
    # the stream, which closes the ring cleanly and ends the import.
    assert ex.stop() == 0
    assert im.wait(T) == 0, im.stderr
    for r in readers:
        r.join_ok()
    assert ex.stats["samples"] == n and ex.stats["connections"] == 1, ex.stats
    assert ex.stats["end"] == "stopped"
    s = im.stats
    assert s["samples"] == n and s["end"] == "end of stream", s
    assert s["malformed"] == s["oversize"] == s["gaps"] == 0, s


@pytest.mark.parametrize("copy", [False, True], ids=["lent", "copied"])
def test_plain_zenoh_subscriber_of_an_exported_ring(tools, ring_name, key, bridges, child, copy):
    """A plain eclipse-zenoh subscriber of an exported ring gets each ring
    block's bytes as the sample payload and the end of the stream as a
    DELETE of the key — blocks lent from the ring's pages (the default) or
    copied out first (``copy=True``)."""
    blocks = [1, 100, 4096, 70_000, 5, 2048]
    prod = zcio.RingProducer(ring_name, size=1 << 20, layout="variable")
    ex = bridges(zcio.bridge.export, f"ring:{ring_name}", key, listen=LOCAL, copy=copy)
    probe_seen = SPAWN.Event()
    sub = child(bk.zenoh_subscriber, ex.endpoints[0], key, blocks, probe_seen)
    # Probe blocks until the subscriber sees one: the real blocks are then
    # published while it listens (a plain subscriber gets no history).
    deadline = time.monotonic() + T
    probes = 0
    while not probe_seen.wait(0.05):
        assert time.monotonic() < deadline, "the subscriber never saw a probe"
        assert sub.proc.is_alive(), "the subscriber died"
        prod.write(bk.PROBE, timeout=T)
        probes += 1
    for i, size in enumerate(blocks):
        prod.write(kids.sized(i, size), timeout=T)
    prod.close()  # end of stream: the exporter publishes a DELETE and ends
    sub.join_ok()
    assert ex.wait(T) == 0, ex.stderr
    s = ex.stats
    assert s["end"] == "end of stream" and s["samples"] == probes + len(blocks), s
    assert s["bytes"] == probes * len(bk.PROBE) + sum(blocks), s


def test_plain_zenoh_publisher_into_a_ring(tools, ring_name, key, bridges, child):
    """A plain eclipse-zenoh publisher's payloads arrive through an
    importing bridge as ring blocks, exactly."""
    payloads = [kids.sized(i, n) for i, n in enumerate([3, 1000, 65_536, 200_000, 1])]
    im = bridges(zcio.bridge.import_, key, f"ring:{ring_name}", listen=LOCAL, size=4 << 20)
    cons = zcio.RingConsumer(ring_name, start="oldest", timeout=T)
    done = SPAWN.Event()
    pub = child(bk.zenoh_publisher, im.endpoints[0], key, payloads, done)
    for i, want in enumerate(payloads):
        got = cons.read(1 << 20, timeout=T)
        assert got == want, f"block {i}: {len(got)} bytes, wanted {len(want)}"
    done.set()
    pub.join_ok()
    # A plain publisher has no end of stream: stopping the import is no
    # clean end either — the ring is closed with ECANCELED, the import exits
    # with EXIT_STOPPED.
    assert im.stop() == zcio.bridge.EXIT_STOPPED
    with pytest.raises(zcio.Disconnected) as e:
        cons.read(1 << 20, timeout=T)
    assert e.value.code == errno.ECANCELED
    cons.close()
    s = im.stats
    assert s["samples"] == len(payloads) and s["bytes"] == sum(map(len, payloads)), s
    assert s["malformed"] == s["oversize"] == 0, s


def test_hostile_publisher_is_dropped_and_counted(tools, ring_name, key, bridges, child):
    """Oversized payloads and samples with a malformed zcio attachment (it
    starts with b"zcio" but has the wrong length or version) are dropped
    and counted by the importer, which keeps delivering the good ones."""
    max_size = 4096
    samples = bk.hostile_samples(max_size)
    good = [p for what, p, _ in samples if what == "good"]
    im = bridges(
        zcio.bridge.import_, key, f"ring:{ring_name}", listen=LOCAL, size=1 << 20, max_size=max_size
    )
    cons = zcio.RingConsumer(ring_name, start="oldest", timeout=T)
    done = SPAWN.Event()
    pub = child(bk.zenoh_hostile_publisher, im.endpoints[0], key, max_size, done)
    for i, want in enumerate(good):
        assert cons.read(1 << 20, timeout=T) == want, f"good sample {i}"
    done.set()
    pub.join_ok()
    assert im.stop() == zcio.bridge.EXIT_STOPPED
    with pytest.raises(zcio.Disconnected) as e:
        cons.read(1 << 20, timeout=T)
    assert e.value.code == errno.ECANCELED
    cons.close()
    s = im.stats
    assert s["oversize"] == sum(w == "oversize" for w, _, _ in samples), s
    assert s["malformed"] == sum(w == "malformed" for w, _, _ in samples), s
    assert s["samples"] == len(good), s


def test_peek_array_rejects_a_block_without_a_valid_header(ring_name):
    """Peek.array() copies the header out and validates it: a block that is
    not an array (or whose header lies) raises MalformedMessage, and the
    block can still be released and the ring read on."""
    prod = zcio.RingProducer(ring_name, size=1 << 16, layout="variable")
    cons = zcio.RingConsumer(ring_name, timeout=T)
    hdr = bytearray(b"ZCNDARR1" + b"\0" * 56)
    hdr[8] = 1  # version
    hdr[12] = 1  # ndim 1
    hdr[14] = 3  # dtype "<f8"
    hdr[16] = 128  # header length
    hdr += b"<f8\0\0\0\0\0" + (1000).to_bytes(8, "little") + (8).to_bytes(8, "little")
    hdr += b"\0" * (128 - len(hdr))
    hdr[24:32] = (128).to_bytes(8, "little")  # payload offset
    hdr[32:40] = (80).to_bytes(8, "little")  # payload: 10 elements, not 1000
    for bad in [b"not an array", b"ZCNDARR1" + b"\0" * 100, bytes(hdr) + b"\0" * 80]:
        prod.write(bad, timeout=T)
        with cons.peek(timeout=T) as pk:
            with pytest.raises(zcio.MalformedMessage):
                pk.array()
        assert pk.released
    # A valid one reads, and the block is held while the array lives.
    a = np.arange(10, dtype="<f8")
    hdr[32:40] = (80).to_bytes(8, "little")
    hdr[64 + 8 : 64 + 16] = (10).to_bytes(8, "little")
    prod.write(bytes(hdr) + a.tobytes(), timeout=T)
    pk = cons.peek(timeout=T)
    arr = pk.array()
    np.testing.assert_array_equal(arr, a)
    assert not arr.flags.writeable and isinstance(arr.base, zcio.PeekView)
    with pytest.raises(BufferError):
        pk.release()
    with pytest.raises(zcio.RingError):
        cons.read(100, timeout=0)  # the block is still held
    del arr
    pk.release()
    with pytest.raises(ValueError):
        pk.array()  # released: no longer ours
    prod.close()
    assert cons.read(100, timeout=T) == b""
    cons.close()


def test_wrapper_errors(tools, key, ring_name, sock_path, monkeypatch):
    """What the wrapper raises: usage errors, a bridge that cannot start,
    and a missing tool, each saying what to do."""
    with pytest.raises(zcio.BridgeUsageError) as e:
        zcio.bridge.export("ring:x", "bad/*/key", listen=LOCAL)
    assert e.value.returncode == 2 and "wildcard" in e.value.stderr
    with pytest.raises(zcio.BridgeError) as e:
        zcio.bridge.export(f"ring:{ring_name}", key, listen=LOCAL)  # no such ring
    assert e.value.returncode == 1 and e.value.stderr
    with pytest.raises(TypeError):
        zcio.bridge.import_(key, None)  # type: ignore[arg-type]
    monkeypatch.setenv("ZCIO_BIN", "/nonexistent/zcio")
    with pytest.raises(FileNotFoundError, match="ZCIO_BIN"):
        zcio.bridge.import_(key, f"connect:{sock_path}", listen=LOCAL)
    monkeypatch.delenv("ZCIO_BIN")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(FileNotFoundError, match="cargo build --release -p zcio-cli"):
        zcio.bridge.find_zcio()


def test_stop_wait_and_context_manager(tools, key, ring_name):
    with zcio.bridge.import_(key, f"ring:{ring_name}", listen=LOCAL, size=1 << 16) as im:
        assert im.returncode is None and im.stats is None
        # Live counters from its registry entry (nothing published yet).
        c = im.counters()
        assert c["samples"] == 0 and c["sample_bytes"] == 0 and c["lost_samples"] == 0
        with pytest.raises(zcio.TimedOut):
            im.wait(0.2)
        assert "import" in repr(im) and "running" in repr(im)
    # Stopped before any end of stream: exit status 3, not a failure.
    assert im.returncode == zcio.bridge.EXIT_STOPPED and im.stats["end"] == "stopped"
    assert im.stop() == zcio.bridge.EXIT_STOPPED  # again: the status
    im.check()
    with pytest.raises(zcio.BridgeError, match="has ended"):
        im.counters()


def test_msg_array_reads_what_recv_array_reads():
    """msg.array(): the array of a send_array message received with recv()
    (as from an importing bridge's channel sink), in place."""
    a, b = zcio.Channel.pair()
    with a, b:
        want = np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::-1]
        a.send_array(want, timeout=T)
        a.send(b"plain bytes", timeout=T)
        msg = b.recv(timeout=T)
        got = msg.array()
        np.testing.assert_array_equal(got, want)
        assert isinstance(got.base, zcio.MsgView) and got.base.msg is msg
        with pytest.raises(zcio.MalformedMessage):
            b.recv(timeout=T).array()
