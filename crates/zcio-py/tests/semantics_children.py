"""Entry points of the child processes test_semantics.py spawns (module-level
so the spawn start method can import them). Each child raises (exit code 1)
on any unexpected outcome; the parent asserts exit code 0."""

from __future__ import annotations

import json

import numpy as np

import zcio

TIMEOUT = 30.0


def message(i: int, n: int) -> np.ndarray:
    """Message i of a test stream: n bytes that depend on i."""
    k = np.arange(n, dtype=np.uint64)
    return ((k * 7) ^ (k >> 9) ^ np.uint64((i * 131) & 0xFF)).astype(np.uint8)


def arrays() -> list[np.ndarray]:
    """Arrays sent by send_arrays, the same in every process."""
    rng = np.random.default_rng(99)
    return [
        np.arange(10, dtype=np.uint8),
        rng.standard_normal((64, 33)).astype(np.float32),
        np.arange(300_000, dtype=np.int64),  # 2.4 MB: whole pages
        (rng.standard_normal((3, 5)) + 1j).astype(np.complex128),
        np.arange(12, dtype=">i2").reshape(3, 4),
        np.asfortranarray(rng.standard_normal((40, 50))),
        np.zeros((0, 4), dtype=np.float64),
    ]


def connect(path: str, **kw) -> zcio.SemanticEndpoint:
    ch = zcio.Channel.connect(path, timeout=TIMEOUT)
    # The mechanisms themselves, whatever the cost model prefers here.
    kw.setdefault("ignore_cost_model", True)
    return zcio.SemanticEndpoint(ch, hello_timeout=TIMEOUT, **kw)


def ec_receiver(path: str, count: int, n: int, trust: bool) -> None:
    """Input `count` messages into arena buffers at the sender's page
    offset; each must be message i, and the previous one must not have
    changed since. Reports the swapped page count back."""
    ep = connect(path, trust_peer=trust)
    got = ep.poll(timeout=TIMEOUT)
    assert got is not None and got[0] == n, got
    bufs = [ep.arena_buffer(n, page_offset=got[1]) for _ in range(4)]
    views = [np.frombuffer(b, dtype=np.uint8) for b in bufs]
    swapped = 0
    for i in range(count):
        r = ep.input(bufs[i % 4], timeout=TIMEOUT)
        assert r.len == n and r.sender == "emulated-copy", r
        swapped += r.swapped_pages
        v = views[i % 4]
        bad = np.flatnonzero(v != message(i, n))
        assert bad.size == 0, f"message {i}: {bad.size} bytes differ, first at {bad[0]}"
        if i > 0:
            prev = views[(i - 1) % 4]
            assert np.array_equal(prev, message(i - 1, n)), f"message {i - 1} changed"
    ep.output(json.dumps({"swapped": swapped}).encode(), semantics="copy")
    try:
        # No timeout: a peer that closed cleanly is seen by a receive (a
        # timed wait polls, and sees only a peer that died).
        ep.input(bytearray(64))
    except zcio.Disconnected:
        pass
    else:
        raise AssertionError("expected Disconnected after the sender closed")


def send_arrays(path: str, sem: str) -> None:
    """send_array each of arrays() under `sem`, then one array that lives in
    the arena; report the deliveries."""
    ep = connect(path, output=sem, input=sem)
    deliveries = []
    for a in arrays():
        deliveries.append(ep.send_array(a, semantics=sem))
    buf = ep.arena_buffer(1 << 20)
    arr = np.frombuffer(buf, dtype=np.float64)
    arr[:] = np.arange(arr.size)
    deliveries.append(ep.send_array(arr, semantics=sem))
    arr[:] = -1.0  # overwrite at once: strong semantics must not show this
    ep.output(json.dumps(deliveries).encode(), semantics="copy")
    r = ep.poll(timeout=TIMEOUT)
    assert r is not None
    ep.input(bytearray(16), timeout=TIMEOUT)


def owned_sender(path: str, sem: str, count: int, n: int) -> None:
    """alloc / fill / output_owned `count` buffers under `sem`."""
    ep = connect(path, output=sem, input=sem)
    out = []
    for i in range(count):
        b = ep.alloc(n)
        v = memoryview(b)
        v[:] = message(i, n).tobytes()
        try:
            ep.output_owned(b)
        except BufferError:
            pass
        else:
            raise AssertionError("output_owned must refuse while a memoryview is exported")
        v.release()
        out.append(ep.output_owned(b))
        assert b.released
    ep.output(json.dumps(out).encode(), semantics="copy")
    ep.input(bytearray(16), timeout=TIMEOUT)


def streamer(path: str) -> None:
    """Output emulated-copy messages from the arena until killed."""
    ep = connect(path)
    buf = ep.arena_buffer(64 << 10)
    v = np.frombuffer(buf, dtype=np.uint8)
    i = 0
    while True:
        v[:] = i & 0xFF
        ep.output(buf)
        i += 1


def sink(path: str) -> None:
    """Input 3 messages, say so, then wait to be killed."""
    ep = connect(path)
    b = bytearray(1 << 20)
    for _ in range(3):
        ep.input(b, timeout=TIMEOUT)
    ep.output(b"got3", semantics="copy")
    import time

    time.sleep(600)


def one_message(path: str, n: int) -> None:
    """Output message 0 of n bytes, then wait for "done"."""
    ep = connect(path)
    buf = ep.arena_buffer(n, page_offset=100)
    np.frombuffer(buf, dtype=np.uint8)[:] = message(0, n)
    ep.output(buf)
    ep.input(bytearray(16), timeout=TIMEOUT)


def peer_checker(path: str) -> None:
    """An endpoint inputting emulated move that trusts its peer: checks the
    test's hello (copy input, not trusting), then says b"ok" and waits for
    b"done"."""
    ep = connect(path, output="copy", input="emulated-move", trust_peer=True)
    assert ep.peer == ("copy", False), ep.peer
    ep.output(b"ok", semantics="copy")
    buf = bytearray(8)
    assert ep.input(buf, semantics="copy", timeout=TIMEOUT).len == 4
    ep.close()


def calibrate_to(path: str) -> None:
    """Measure this machine (quick) and save the model to `path`."""
    m = zcio.calibrate(quick=True)
    assert m.source == "measured"
    m.save(path)


def current_model_is(path: str) -> None:
    """Started with ZCIO_CALIBRATION=path: that is the calibration file, and
    the model this process decides with is its."""
    assert zcio.calibration_path() == path
    m = zcio.CostModel.current()
    assert m.source == "file", m
    assert m.cost("copy_in", 1 << 20) > 0
