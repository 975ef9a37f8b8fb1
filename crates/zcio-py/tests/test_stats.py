"""Live statistics (issue 37): a channel end's, a lane end's and a pool's
stats() carry the counters the registry shows tools, at exact values after
a known workload (in one process: the peer's pid is ours)."""

from __future__ import annotations

import gc
import os

import pytest

import zcio

T = 30.0


def test_channel_stats_count_bytes_holdings_refusals_and_name_the_peer():
    a, b = zcio.Channel.pair()
    with pytest.raises(zcio.WouldBlock):
        b.recv(timeout=0)
    sizes = (5, 100, 5000)
    for n in sizes:
        a.send(b"x" * n, timeout=T)
    msgs = [b.recv(timeout=T) for _ in sizes]
    sa, sb = a.stats(), b.stats()
    for key in (
        "bytes_sent",
        "bytes_received",
        "held_by_peer_bytes",
        "holding",
        "msgs_copied",
        "send_would_block",
        "send_timed_out",
        "send_disconnected",
        "recv_would_block",
        "recv_timed_out",
        "recv_disconnected",
        "peer_pid",
        "connection",
    ):
        assert key in sa and key in sb, key
    assert (sa["msgs_sent"], sa["bytes_sent"]) == (3, sum(sizes))
    assert (sb["msgs_received"], sb["bytes_received"]) == (3, sum(sizes))
    assert sb["holding"] == 3 and sb["recv_would_block"] == 1
    assert sa["peer_pid"] == os.getpid() == sb["peer_pid"]
    assert sa["connection"] != 0 and sa["connection"] == sb["connection"]
    del msgs
    gc.collect()
    assert b.stats()["holding"] == 0
    b.flush()
    a.reclaim()
    assert (a.stats()["held_by_peer"], a.stats()["held_by_peer_bytes"]) == (0, 0)
    b.close()
    with pytest.raises(zcio.Disconnected):
        a.send(b"late", timeout=T)
    assert a.stats()["send_disconnected"] == 1


def test_lane_stats_count_bytes_and_refusals():
    a, b = zcio.Channel.pair()
    tx = a.open_lane(slots=2, slot_size=64)
    rx = b.accept_lane(timeout=T)
    with pytest.raises(zcio.WouldBlock):
        rx.recv(timeout=0)
    tx.send(b"one", timeout=T)
    tx.send(b"x" * 60, timeout=T)
    st = tx.stats()
    assert (st["messages"], st["bytes"], st["in_flight"]) == (2, 63, 2)
    assert st["peer_pid"] == os.getpid() and st["connection"] != 0
    for _ in range(2):
        m = rx.recv(timeout=T)
        del m
    sr = rx.stats()
    assert (sr["messages"], sr["bytes"], sr["would_block"]) == (2, 63, 1)
    assert sr["connection"] == st["connection"]
    for key in ("timed_out", "disconnected", "sleeps", "wakes"):
        assert key in st and key in sr, key
    tx.close()
    rx.close()


def test_pool_stats_carry_capacity_and_timed_out_allocations():
    p = zcio.Pool("stats-py", chunk_size=64 << 10, max_chunks=1)
    st = p.stats()
    assert st["capacity_buffers"] == (64 << 10) // os.sysconf("SC_PAGE_SIZE")
    assert st["alloc_timed_out"] == 0
    held = p.alloc(64 << 10)
    with pytest.raises(zcio.AllocTimedOut):
        p.alloc(1, timeout=0.01)
    assert p.stats()["alloc_timed_out"] == 1
    del held
