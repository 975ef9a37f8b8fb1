"""zcio.forward: the relay loop between two channels (zcio::forward::run),
by reference and copying, its report, and how it stops (upstream close,
max_idle, timeout, a stop event), with the ends in other processes."""

from __future__ import annotations

import threading

import pytest

import zcio
import zcio_children as kids
from conftest import SPAWN

T = kids.TIMEOUT
SIZES = [1, 100, 5000, 70000, 1 << 20]


def relay(tmp_dir_paths, child, **kw):
    up_path, down_path = tmp_dir_paths
    src = child(kids.send_then_close, up_path, SIZES)
    dst = child(kids.recv_expect_then_end, down_path, SIZES)
    with zcio.Listener(up_path) as lu, zcio.Listener(down_path) as ld:
        up = lu.accept(timeout=T)
        down = ld.accept(timeout=T)
        with up, down:
            report = zcio.forward(up, down, **kw)
    src.join_ok()
    dst.join_ok()
    return report


@pytest.fixture
def two_paths(sock_path):
    return sock_path, sock_path + "2"


def test_forward_by_reference_until_the_upstream_closes(two_paths, child):
    r = relay(two_paths, child)
    assert r["end"] == "upstream-disconnected" and r["error"] is None
    assert r["msgs"] == len(SIZES) and r["bytes"] == sum(SIZES)
    assert r["errors"] == 0 and r["batches"] >= 1


def test_forward_copying_into_a_pool(two_paths, child):
    pool = zcio.Pool("relay-copy", chunk_size=4 << 20, max_chunks=4)
    r = relay(two_paths, child, pool=pool, batch=2)
    assert r["end"] == "upstream-disconnected"
    assert r["msgs"] == len(SIZES) and r["bytes"] == sum(SIZES)
    assert pool.stats()["allocs"] >= len(SIZES)


def idle_pair(two_paths, child):
    go = SPAWN.Event()
    a = child(kids.connect_and_idle, two_paths[0], go, {})
    b = child(kids.connect_and_idle, two_paths[1], go, {})
    lu, ld = zcio.Listener(two_paths[0]), zcio.Listener(two_paths[1])
    return go, (a, b), (lu, ld), lu.accept(timeout=T), ld.accept(timeout=T)


@pytest.mark.parametrize("how", ["stop", "timeout", "max_idle"])
def test_forward_stops(two_paths, child, how):
    go, kids_, lsts, up, down = idle_pair(two_paths, child)
    try:
        if how == "stop":
            ev = threading.Event()
            threading.Timer(0.05, ev.set).start()
            r = zcio.forward(up, down, stop=ev)
            assert r["end"] == "stopped" and ev.is_set()
        elif how == "timeout":
            r = zcio.forward(up, down, timeout=0.05)
            assert r["end"] == "stopped"
        else:
            r = zcio.forward(up, down, max_idle=0.05, idle_wait=0.01)
            assert r["end"] == "idle"
        assert r["msgs"] == 0
    finally:
        go.set()
        up.close()
        down.close()
        for lst in lsts:
            lst.close()
    for k in kids_:
        k.join_ok()


def test_forward_arguments_are_checked():
    a, b = zcio.Channel.pair()
    with a, b:
        with pytest.raises(ValueError, match="different"):
            zcio.forward(a, a)
        for bad in (dict(batch=0), dict(idle_wait=0), dict(max_idle=-1), dict(timeout=0)):
            with pytest.raises(ValueError):
                zcio.forward(a, b, **bad)
        with pytest.raises(ValueError, match="is_set"):
            zcio.forward(a, b, stop=object())
