"""Pools: exhaustion with and without a timeout, stats, Pool.empty."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import zcio


def small_pool() -> zcio.Pool:
    return zcio.Pool("small", chunk_size=64 << 10, max_chunks=1, populate=False)


def test_pool_exhaustion_full_then_timeout_then_recovers():
    p = small_pool()
    held = [p.alloc(16 << 10, timeout=0) for _ in range(4)]
    with pytest.raises(zcio.PoolExhausted) as e:
        p.alloc(16 << 10, timeout=0)
    assert isinstance(e.value, zcio.Full) and isinstance(e.value, zcio.AllocError)
    with pytest.raises(zcio.AllocTimedOut) as e:
        p.alloc(4096, timeout=0.1)
    assert isinstance(e.value, zcio.TimedOut) and isinstance(e.value, TimeoutError)
    st = p.stats()
    assert st["buffers_in_use"] == 4 and st["exhausted"] >= 1
    held.pop()
    gc.collect()
    assert len(p.alloc(16 << 10, timeout=0)) == 16 << 10


def test_an_allocation_beyond_the_memory_available_is_refused_not_oom_killed():
    """More than the machine has (here 1 TiB, populated) is an AllocError
    with ENOMEM before anything is allocated; the pool stays usable; and a
    pool whose buffers all came back that still cannot fit a request says
    so at once instead of waiting out its timeout."""
    import errno

    p = zcio.Pool("huge", chunk_size=4096, max_chunks=2, populate=True)
    with pytest.raises(zcio.AllocError) as e:
        p.alloc(1 << 40, timeout=0)
    assert e.value.errno == errno.ENOMEM and "MemAvailable" in str(e.value)
    assert p.stats()["chunks"] == 0
    assert len(p.alloc(4096, timeout=0)) == 4096
    gc.collect()
    q = small_pool()
    held = q.alloc(64 << 10, timeout=0)
    del held
    gc.collect()
    with pytest.raises(zcio.AllocError, match="never will"):
        q.alloc(128 << 10, timeout=30)


def test_send_exhausts_the_channel_pool_while_the_receiver_holds_messages():
    a, b = zcio.Channel.pair()
    p = small_pool()
    for i in range(4):
        a.send(bytes([i]) * (16 << 10), timeout=5, pool=p)
    kept = [b.recv(timeout=5) for _ in range(4)]
    with pytest.raises(zcio.PoolExhausted):
        a.send(b"x" * (16 << 10), timeout=0, pool=p)
    with pytest.raises(zcio.AllocTimedOut):
        a.send(b"x" * (16 << 10), timeout=0.1, pool=p)
    del kept[0]  # the receiver releases one: the sender can go on
    gc.collect()
    b.flush()
    a.send(b"y" * (16 << 10), timeout=5, pool=p)
    assert b.recv(timeout=5).tobytes()[:1] == b"y"


def test_empty_arrays_and_stats():
    p = zcio.Pool("arrays")
    x = p.empty((3, 4), dtype="int16")
    assert x.shape == (3, 4) and x.dtype == np.int16 and x.flags.writeable
    x[:] = 5
    assert isinstance(x.base, zcio.PoolBuffer)
    y = p.empty(0)
    assert y.shape == (0,) and y.dtype == np.float64
    st = p.stats()
    assert st["allocs"] == 2 and st["buffers_in_use"] == 2
    with pytest.raises(TypeError):
        p.empty(3, dtype=object)
    del x, y
    gc.collect()
    assert p.stats()["buffers_in_use"] == 0
    assert p.name == "arrays" and not p.secured
    with pytest.raises(ValueError):
        p.alloc(0)


def test_huge_pages_report_the_setting_and_what_the_kernel_mapped():
    p = zcio.Pool("thp", chunk_size=4 << 20, max_chunks=1)
    x = p.empty(4 << 20, dtype="uint8")
    x[:] = 1
    h = p.huge_pages()
    assert h["setting"] in ("never", "advise", "always")
    assert h["chunk_bytes"] == 4 << 20
    assert 0 <= h["huge_bytes"] <= h["chunk_bytes"]
    if h["setting"] == "never":
        assert h["huge_bytes"] == 0
        print("skipped: the kernel offers no huge pages for shared memory here")
