"""Buffering semantics across real processes: SemanticEndpoint output/input
under emulated copy with the sender overwriting its buffer at once,
send_array/recv_array under each of the eight semantics, system-allocated
buffers, bad names, a too-short buffer, a peer killed mid-stream, the
peer's hello, and the cost model (calibrated in a child, saved, loaded, and
read by a child started with ZCIO_CALIBRATION)."""

from __future__ import annotations

import json
import os
import signal
import threading

import numpy as np
import pytest

import semantics_children as kids
import zcio

T = kids.TIMEOUT
NAMES = [
    "copy",
    "emulated-copy",
    "share",
    "emulated-share",
    "move",
    "emulated-move",
    "weak-move",
    "emulated-weak-move",
]


def accept(sock_path, **kw):
    lst = zcio.Listener(sock_path)
    try:
        ch = lst.accept(timeout=T)
    finally:
        lst.close()
    # The mechanisms themselves, whatever the cost model prefers here.
    kw.setdefault("ignore_cost_model", True)
    return zcio.SemanticEndpoint(ch, hello_timeout=T, **kw)


def test_names_and_bad_names():
    assert zcio.semantics_names() == NAMES
    a, b = zcio.Channel.pair()
    # A bad name is a ValueError raised before the channel is taken.
    with pytest.raises(ValueError, match="emulated-copy"):
        zcio.SemanticEndpoint(a, output="nope")
    with pytest.raises(ValueError):
        a.endpoint(input="emulated_cpy")
    # Both channels are still usable: make endpoints on two threads.
    eps = {}

    def make(key, ch):
        eps[key] = ch.endpoint(output="copy", input="EMULATED_COPY", hello_timeout=T)

    t = threading.Thread(target=make, args=("b", b))
    t.start()
    make("a", a)
    t.join(T)
    ea, eb = eps["a"], eps["b"]
    assert ea.semantics == ("copy", "emulated-copy")
    assert ea.peer == ("emulated-copy", False)
    # The channel now belongs to the endpoint.
    with pytest.raises(ValueError, match="SemanticEndpoint"):
        a.send(b"x")
    with pytest.raises(ValueError):
        a.endpoint()
    assert a.disconnected
    # Per-call names are checked too.
    with pytest.raises(ValueError, match="unknown semantics"):
        ea.output(b"x", semantics="bogus")
    with pytest.raises(ValueError):
        eb.input(bytearray(4), semantics="", timeout=0)
    with pytest.raises(ValueError):
        ea.output(b"")
    assert ea.output(b"hello") == "copied"
    buf = bytearray(5)
    r = eb.input(buf, timeout=T)
    assert bytes(buf) == b"hello" and r.len == 5 and r.sender == "copy"
    with pytest.raises(zcio.TimedOut) as e:
        eb.input(buf, timeout=0.05)
    assert not isinstance(e.value, zcio.AllocError), repr(e.value)  # a receive, not a pool
    assert eb.poll() is None
    ea.close()
    with pytest.raises(zcio.Disconnected):
        eb.input(buf)  # a clean close is seen by a receive without timeout


@pytest.mark.parametrize("trust", [False, True], ids=["copy-out", "page-swap"])
def test_emulated_copy_overwrite_loop(sock_path, child, trust):
    count, n = 200, (64 << 10) + 1000
    c = child(kids.ec_receiver, sock_path, count, n, trust)
    ep = accept(sock_path)
    buf = ep.arena_buffer(n, page_offset=300)
    assert len(buf) == n and buf.page_offset == 300
    v = np.frombuffer(buf, dtype=np.uint8)
    assert v.flags.writeable
    deliveries = set()
    for i in range(count):
        v[:] = kids.message(i, n)
        deliveries.add(ep.output(buf))
        # Overwrite at once, every page: the receiver must never see this.
        v[:] = 0xEE ^ (i & 0xFF)
    assert deliveries == {"protected"}, deliveries
    done = bytearray(256)
    r = ep.input(done, timeout=T)
    report = json.loads(bytes(done[: r.len]))
    st = ep.stats()
    assert st["out_protected"] == count and st["tcow_copies"] > 0, st
    if trust:
        assert report["swapped"] > 0, report
    else:
        assert report["swapped"] == 0, report
    ep.close()
    c.join_ok()


def test_rewritten_buffers_are_copied_then_probed(sock_path, child):
    # A sender that rewrites its buffer at once, with no rewriting
    # tolerated: after the first lend, outputs copy, lending again as a
    # probe after 1, 2, 4, 8, 16 copies; the receiver still always sees
    # the bytes as they were at each output.
    count, n = 40, (64 << 10) + 1000
    c = child(kids.ec_receiver, sock_path, count, n, True)
    with pytest.raises(ValueError, match="rewrite_tolerance"):
        zcio.SemanticEndpoint(zcio.Channel.pair()[0], rewrite_tolerance=1.5)
    ep = accept(sock_path, rewrite_tolerance=0.0)
    assert ep.rewrite_tolerance(n) == 0.0
    buf = ep.arena_buffer(n, page_offset=300)
    v = np.frombuffer(buf, dtype=np.uint8)
    lent = []
    for i in range(count):
        v[:] = kids.message(i, n)
        if ep.output(buf) == "protected":
            lent.append(i)
        v[:] = 0xEE ^ (i & 0xFF)
    assert lent == [0, 1, 4, 9, 18, 35], lent
    st = ep.stats()
    assert st["out_rewrite_copies"] == count - 6 and st["out_copied"] == count - 6, st
    done = bytearray(256)
    ep.input(done, timeout=T)
    ep.close()
    c.join_ok()


def test_rewrite_tolerance_defaults():
    a, b = zcio.Channel.pair()
    eps = {}

    def make(key, ch, **kw):
        eps[key] = ch.endpoint(hello_timeout=T, **kw)

    t = threading.Thread(target=make, args=("b", b), kwargs={"ignore_cost_model": True})
    t.start()
    make("a", a)
    t.join(T)
    # The cost model's figure is a fraction; the mechanisms' policy
    # always lends again.
    assert 0.0 <= eps["a"].rewrite_tolerance(16 << 20) <= 1.0
    assert eps["a"].rewrite_tolerance(100) == 0.0
    assert eps["b"].rewrite_tolerance(100) == 1.0
    eps["a"].close()
    eps["b"].close()


@pytest.mark.parametrize("sem", NAMES)
def test_send_recv_array_each_semantics(sock_path, child, sem):
    c = child(kids.send_arrays, sock_path, sem)
    ep = accept(sock_path, output=sem, input=sem)
    for want in kids.arrays():
        got = ep.recv_array(semantics=sem, timeout=T)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        if got.size:
            got.flat[0] = got.flat[0]  # received arrays are the receiver's own
    got = ep.recv_array(timeout=T)
    want = np.arange((1 << 20) // 8, dtype=np.float64)
    if sem in ("copy", "emulated-copy", "move", "emulated-move"):
        # Strong integrity: the sender's write right after send_array is
        # not visible.
        np.testing.assert_array_equal(got, want)
    else:
        assert got.shape == want.shape
    report = bytearray(4096)
    r = ep.input(report, timeout=T)
    deliveries = json.loads(bytes(report[: r.len]))
    # The array that lived in the sender's arena went without a copy under
    # the zero-copy semantics (the others copy by definition).
    expect_last = {
        "copy": "copied",
        "emulated-copy": "protected",
        "share": "lent",
        "emulated-share": "lent",
        "move": "sealed",
        "emulated-move": "hidden",
        "weak-move": "lent",
        "emulated-weak-move": "lent",
    }[sem]
    assert deliveries[-1] == expect_last, deliveries
    ep.output(b"bye")
    c.join_ok()


@pytest.mark.parametrize(
    "sem,delivery",
    [("move", "sealed"), ("emulated-move", "hidden"), ("emulated-weak-move", "lent")],
)
def test_owned_buffers(sock_path, child, sem, delivery):
    count, n = 10, (256 << 10) + 17
    c = child(kids.owned_sender, sock_path, sem, count, n)
    ep = accept(sock_path, output=sem, input=sem)
    for i in range(count):
        b = ep.input_owned(timeout=T)
        assert len(b) == n
        v = np.frombuffer(b, dtype=np.uint8)
        np.testing.assert_array_equal(v, kids.message(i, n))
        v[0] ^= 0xFF  # private to the receiver
        del v
        ep.free(b)
        assert b.released
        with pytest.raises(BufferError):
            memoryview(b)
        with pytest.raises(ValueError):
            ep.free(b)
    report = bytearray(4096)
    r = ep.input(report, timeout=T)
    assert json.loads(bytes(report[: r.len])) == [delivery] * count
    ep.output(b"bye")
    c.join_ok()


def test_input_too_short_keeps_the_message(sock_path, child):
    n = 50_000
    c = child(kids.one_message, sock_path, n)
    ep = accept(sock_path)
    small = bytearray(100)
    with pytest.raises(ValueError) as e:
        ep.input(small, timeout=T)
    assert e.value.needed == n
    assert ep.poll() == (n, 100)
    buf = ep.arena_buffer(n, page_offset=100)
    r = ep.input(buf, timeout=T)
    assert r.len == n
    np.testing.assert_array_equal(np.frombuffer(buf, dtype=np.uint8), kids.message(0, n))
    ep.output(b"done")
    c.join_ok()


def test_killed_sender_raises_not_hangs(sock_path, child):
    c = child(kids.streamer, sock_path)
    ep = accept(sock_path)
    b = bytearray(64 << 10)
    for _ in range(3):
        ep.input(b, timeout=T)
    os.kill(c.pid, signal.SIGKILL)
    c.proc.join(T)
    with pytest.raises(zcio.Disconnected):
        for _ in range(100_000):
            ep.input(b, timeout=T)
    with pytest.raises(zcio.Disconnected):
        ep.recv_array(timeout=T)


def test_killed_receiver_raises_not_hangs(sock_path, child):
    c = child(kids.sink, sock_path)
    ep = accept(sock_path)
    buf = ep.arena_buffer(256 << 10)
    for _ in range(3):
        ep.output(buf)
    got = bytearray(8)
    assert ep.input(got, timeout=T).len == 4
    os.kill(c.pid, signal.SIGKILL)
    c.proc.join(T)
    with pytest.raises(zcio.Disconnected):
        for i in range(100_000):
            ep.output(buf)
            np.frombuffer(buf, dtype=np.uint8)[:] = i & 0xFF


def test_peer_hello_across_processes(sock_path, child):
    # Each end learns the other's input semantics and whether it trusts.
    c = child(kids.peer_checker, sock_path)
    ep = accept(sock_path, output="copy", input="copy")
    buf = bytearray(8)
    assert ep.input(buf, timeout=T).len == 2 and bytes(buf[:2]) == b"ok"
    assert ep.peer == ("emulated-move", True)
    ep.output(b"done")
    c.join_ok()
    ep.close()


def test_cost_model_calibrate_save_load(tmp_path, child, monkeypatch):
    path = str(tmp_path / "cal" / "calibration.json")
    child(kids.calibrate_to, path).join_ok()
    m = zcio.CostModel.load(path)
    assert m.source == "file" and "file" in repr(m)
    small, big = m.cost("copy_in", 4096), m.cost("copy_in", 4 << 20)
    assert 0 < small < big
    assert "tcow_fault" in zcio.CostModel.OPS and len(zcio.CostModel.OPS) == 16
    for name in NAMES:
        assert 0 < m.predict(name, 1 << 20) < 1e12
        assert m.predict(name, 1 << 20, aligned=False) > 0
    with pytest.raises(ValueError, match="copy_in"):
        m.cost("teleport", 1)
    with pytest.raises(ValueError, match="emulated-copy"):
        m.predict("nope", 1)
    j = zcio.CostModel.from_json(m.to_json())
    assert j.cost("copy_in", 4 << 20) == big and j.to_json() == m.to_json()
    assert zcio.CostModel.builtin().source == "builtin"
    assert zcio.CostModel.current().source in ("builtin", "file")
    with pytest.raises(FileNotFoundError):
        zcio.CostModel.load(str(tmp_path / "nope.json"))
    with pytest.raises(ValueError, match="calibration file"):
        zcio.CostModel.from_json("not json")
    with pytest.raises(ValueError):
        zcio.CostModel.from_json('{"format": "something else"}')
    with pytest.raises(OSError):
        m.save(str(tmp_path / "cal" / "calibration.json" / "below-a-file"))
    # A process started with ZCIO_CALIBRATION decides with that file.
    monkeypatch.setenv("ZCIO_CALIBRATION", path)
    assert zcio.calibration_path() == path
    child(kids.current_model_is, path).join_ok()
