"""Rings across processes: read, readinto, peek/release in place, end of
stream, a consumer that outlives a killed producer, lapping, full rings."""

from __future__ import annotations

import errno
import math
import os
import select
import signal

import numpy as np
import pytest

import zcio
import zcio_children as kids

T = kids.TIMEOUT


def test_blocks_across_processes_with_peek(ring_name, child):
    c = child(kids.ring_produce, ring_name, 40, 500, "close")
    with zcio.RingConsumer(ring_name, timeout=T) as cons:
        for i in range(40):
            if i % 2:
                assert cons.read(4096, timeout=T) == kids.sized(i, 500)
                continue
            pk = cons.peek(timeout=T)
            assert pk is not None and len(pk) == 500 and pk.volatile
            view = np.frombuffer(pk, dtype=np.uint8)  # in place
            assert view.tobytes() == kids.sized(i, 500)
            with pytest.raises(BufferError):
                pk.release()  # a view is still out
            with pytest.raises(zcio.RingError):
                cons.read(4096, timeout=0)  # the peek must be released first
            del view
            pk.release()
            assert pk.released
        assert cons.read(4096, timeout=T) == b"", "end of stream after close"
        assert cons.peek(timeout=T) is None
        st = cons.stats()
        assert st["read_blocks"] == 40 and st["read_bytes"] == 40 * 500
        assert st["lag"] == 0 and st["position"] > 0 and "would_block" in st
    c.join_ok()


def test_producer_stats_count_live(ring_name):
    with zcio.RingProducer(ring_name, size=1 << 16, policy="block", layout="variable") as p:
        with zcio.RingConsumer(ring_name, timeout=T) as cons:
            for i in range(5):
                p.write(kids.sized(i, 100))
            st = p.stats()
            assert (st["blocks"], st["bytes"], st["consumers"]) == (5, 500, 1)
            assert st["capacity_bytes"] == 1 << 16 and st["would_block"] == 0
            for i in range(5):
                assert cons.read(4096, timeout=T) == kids.sized(i, 100)
            with pytest.raises(zcio.Empty):
                cons.read(4096, timeout=0)
            assert cons.stats()["would_block"] == 1
        p.unlink()


def test_continuous_stream_readinto(ring_name, child):
    total = 200_000
    c = child(kids.ring_stream, ring_name, total)
    got = bytearray()
    buf = bytearray(7000)
    with zcio.RingConsumer(ring_name, timeout=T) as cons:
        while True:
            n = cons.readinto(buf, timeout=T)
            if n == 0:
                break
            got += buf[:n]
    assert bytes(got) == bytes(k & 0xFF for k in range(total))
    c.join_ok()


def test_consumer_outlives_a_killed_producer(ring_name, child):
    c = child(kids.ring_produce, ring_name, 5, 100, "hang")
    cons = zcio.RingConsumer(ring_name, timeout=T)
    for i in range(4):
        assert cons.read(4096, timeout=T) == kids.sized(i, 100)
    pk = cons.peek(timeout=T)  # held across the producer's death
    os.kill(c.pid, signal.SIGKILL)
    c.proc.join(T)
    assert bytes(pk) == kids.sized(4, 100), "still mapped after the producer died"
    pk.release()
    with pytest.raises(zcio.Disconnected) as e:
        cons.read(4096, timeout=T)
    assert e.value.pid == c.pid
    cons.close()


def test_released_peek_gives_no_bytes(ring_name):
    """After release() the block is the ring's again (here an overwriting
    producer writes newer blocks over it): every way to its bytes raises
    ValueError instead of handing out someone else's data."""
    prod = zcio.RingProducer(ring_name, size=4096, layout="variable", policy="frp")
    cons = zcio.RingConsumer(ring_name)
    prod.write(b"A" * 600, timeout=1)
    pk = cons.peek(timeout=0)
    assert len(pk) == 600 and bytes(pk) == b"A" * 600
    pk.release()
    for i in range(8):  # 8 * 600 bytes: around the 4 KiB ring, over block A
        prod.write(bytes([0x30 + i]) * 600, timeout=1)
    uses = {
        "bytes": bytes,
        "memoryview": memoryview,
        "len": len,
        "numpy": lambda p: np.frombuffer(p, dtype=np.uint8),
        "tobytes": lambda p: p.tobytes(),
        "is_intact": lambda p: p.is_intact(),
    }
    for what, use in uses.items():
        with pytest.raises(ValueError, match="released"):
            use(pk)
            pytest.fail(f"{what} worked on a released peek")
    assert pk.released
    pk.release()  # releasing again is a no-op
    cons.close()
    prod.close()


def test_view_taken_before_release_blocks_release(ring_name):
    """A view exported before release() keeps the block: release() raises
    BufferError while it lives (the view's bytes stay the block's), and a
    `with` block leaves the peek unreleased when a view escaped it."""
    prod = zcio.RingProducer(ring_name, size=4096, layout="variable", policy="frp")
    cons = zcio.RingConsumer(ring_name)
    prod.write(b"B" * 100, timeout=1)
    pk = cons.peek(timeout=0)
    mv = memoryview(pk)
    with pytest.raises(BufferError):
        pk.release()
    assert not pk.released and len(pk) == 100 and bytes(mv) == b"B" * 100
    with pytest.raises(zcio.RingError):
        cons.read(4096, timeout=0)  # still outstanding
    mv.release()
    pk.release()
    with pytest.raises(ValueError):
        memoryview(pk)

    prod.write(b"C" * 100, timeout=1)
    with cons.peek(timeout=0) as pk2:
        arr = np.frombuffer(pk2, dtype=np.uint8)
    assert not pk2.released, "a view escaped the with block: not released"
    assert arr.tobytes() == b"C" * 100
    del arr
    pk2.release()
    assert pk2.released
    cons.close()
    prod.close()


def test_peek_lapped_on_an_overwriting_ring(ring_name):
    prod = zcio.RingProducer(ring_name, size=8192, layout="slotted", slot_size=1024, policy="frp")
    cons = zcio.RingConsumer(ring_name)
    prod.write(b"first", timeout=1)
    pk = cons.peek(timeout=1)
    assert pk.tobytes() == b"first" and pk.is_intact()
    for i in range(16):
        prod.write(bytes([i]) * 8, timeout=1)
    assert not pk.is_intact()
    with pytest.raises(zcio.Lapped):
        pk.release()
    assert cons.stats()["skipped_blocks"] >= 1
    cons.close()
    prod.close()


def test_full_ring_and_timeouts(ring_name):
    prod = zcio.RingProducer(ring_name, size=4096, layout="slotted", slot_size=1024)
    cons = zcio.RingConsumer(ring_name)
    for i in range(4):
        prod.write(bytes([i]) * 10, timeout=0)
    with pytest.raises(zcio.Full):
        prod.write(b"x", timeout=0)
    with pytest.raises(zcio.TimedOut):
        prod.write(b"x", timeout=0.05)
    assert cons.read(1024, timeout=0) == bytes([0]) * 10
    prod.write(b"room again", timeout=0)
    for _ in range(4):
        cons.read(1024, timeout=0)
    with pytest.raises(zcio.Empty):
        cons.read(1024, timeout=0)
    with pytest.raises(zcio.TimedOut):
        cons.read(1024, timeout=0.05)
    with pytest.raises(ValueError):
        prod.write(b"y" * 5000, timeout=0)  # larger than a slot


def test_default_waits_end_at_the_wait_bound(ring_name, child):
    """timeout=None waits up to the end's wait_bound (0.2 s here), then
    raises TimedOut: a producer in another process that never writes, a
    consumer in another process that never reads."""
    c = child(kids.ring_produce, ring_name, 0, 100, "hang")
    cons = zcio.RingConsumer(ring_name, timeout=T)
    assert cons.wait_bound == 3600.0
    cons.wait_bound = 0.2
    assert cons.wait_bound == 0.2
    with pytest.raises(zcio.TimedOut):
        cons.read(100)
    with pytest.raises(zcio.TimedOut):
        cons.readinto(bytearray(100))
    with pytest.raises(zcio.TimedOut):
        cons.peek()
    cons.close()
    c.kill()

    name = ring_name + "-w"
    prod = zcio.RingProducer(name, size=64 << 10, layout="variable")
    try:
        c = child(kids.aio_ring_idle_consumer, name)
        assert prod.wait_for_consumers(1, timeout=T) == 1
        assert prod.wait_bound == 10.0
        prod.wait_bound = 0.2
        assert prod.wait_for_consumers(2) == 1  # up to the bound
        written = 0
        with pytest.raises(zcio.TimedOut):
            while written < 100_000:  # the consumer never reads: the ring fills
                prod.write(b"b" * 1000)
                written += 1
        assert written > 0
        # math.inf: no bound (explicit); a try still does not wait.
        prod.wait_bound = math.inf
        assert prod.wait_bound == math.inf
        with pytest.raises(zcio.Full):
            prod.write(b"b" * 1000, timeout=0)
        with pytest.raises(ValueError):
            prod.wait_bound = -1.0
        c.kill()
    finally:
        prod.close()
        zcio.ring_unlink(name)


def test_fileno_polls_readable(ring_name):
    prod = zcio.RingProducer(ring_name, size=4096, layout="variable")
    cons = zcio.RingConsumer(ring_name)
    fd = cons.fileno()
    with pytest.raises(zcio.Empty):
        cons.read(100, timeout=0)  # arms the doorbell (fileno() did already)
    prod.write(b"ping", timeout=1)
    r, _, _ = select.select([fd], [], [], T)
    assert r == [fd]
    assert cons.read(100, timeout=0) == b"ping"
    assert cons.fileno() == fd == cons.doorbell(), "fileno() is the doorbell"
    with pytest.raises(zcio.Empty):
        cons.read(100, timeout=0)  # takes the ring and arms again
    r, _, _ = select.select([fd], [], [], 0)
    assert r == []
    assert isinstance(prod.fileno(), int)


def test_fileno_across_processes(ring_name, child):
    """A select() loop on fileno() reads every block a producer process
    writes, then the end of the stream."""
    c = child(kids.ring_produce, ring_name, 40, 500, "close")
    with zcio.RingConsumer(ring_name, timeout=T) as cons:
        fd = cons.fileno()
        got = 0
        ended = False
        while not ended:
            r, _, _ = select.select([fd], [], [], T)
            assert r == [fd], "the doorbell never became readable"
            while True:
                try:
                    b = cons.read(4096, timeout=0)
                except zcio.Empty:
                    break
                if b == b"":
                    ended = True
                    break
                assert b == kids.sized(got, 500)
                got += 1
        assert got == 40
    c.join_ok()


def test_seek_and_unlink(ring_name):
    prod = zcio.RingProducer(ring_name, size=8192, layout="slotted", slot_size=1024, policy="frp")
    for i in range(3):
        prod.write(bytes([i]), timeout=0)
    cons = zcio.RingConsumer(ring_name, start="oldest")
    assert cons.read(1024, timeout=0) == b"\x00"
    cons.seek(1)
    assert cons.read(1024, timeout=0) == b"\x02"
    cons.seek(-2)
    assert cons.read(1024, timeout=0) == b"\x01"
    cons.seek("newest")
    with pytest.raises(zcio.Empty):
        cons.read(1024, timeout=0)
    assert ring_name in zcio.ring_list()
    prod.unlink()
    assert ring_name not in zcio.ring_list()
    with pytest.raises(zcio.RingError) as e:
        zcio.RingConsumer(ring_name)
    assert e.value.errno == 2  # ENOENT


def test_seek_out_of_range_int(ring_name):
    """An int too large for a distance is OverflowError (it used to be a
    TypeError asking for an int); distances up to 2**64 - 1 clamp to the
    data the ring holds."""
    prod = zcio.RingProducer(ring_name, size=8192, layout="slotted", slot_size=1024, policy="frp")
    for i in range(3):
        prod.write(bytes([i]), timeout=0)
    cons = zcio.RingConsumer(ring_name, start="oldest")
    for bad in (2**70, -(2**70), 2**64, -(2**64)):
        with pytest.raises(OverflowError, match="out of range"):
            cons.seek(bad)
    assert cons.read(1024, timeout=0) == b"\x00", "failed seeks leave the cursor"
    cons.seek(2**64 - 1)  # clamped to the newest
    with pytest.raises(zcio.Empty):
        cons.read(1024, timeout=0)
    cons.seek(-(2**64 - 1))  # clamped to the oldest
    assert cons.read(1024, timeout=0) == b"\x00"
    cons.seek(np.int64(1))  # anything with __index__
    assert cons.read(1024, timeout=0) == b"\x02"
    with pytest.raises(TypeError):
        cons.seek(1.5)
    with pytest.raises(ValueError):
        cons.seek("middle")
    cons.close()
    prod.close()


def test_mode_beyond_permission_bits_is_refused(ring_name):
    for mode in (0o7777, 0o4600, 0o2600, 0o1600):
        with pytest.raises(zcio.RingError) as e:
            zcio.RingProducer(ring_name, size=4096, mode=mode)
        assert e.value.errno == errno.EINVAL
        assert "beyond 0777" in str(e.value)
    assert ring_name not in zcio.ring_list(), "nothing was created"
    with zcio.RingProducer(ring_name, size=4096, mode=0o640) as prod:
        assert os.fstat(prod.fileno()).st_mode & 0o7777 == 0o640


def test_close_with_error_code(ring_name):
    prod = zcio.RingProducer(ring_name, size=4096, layout="variable")
    cons = zcio.RingConsumer(ring_name)
    prod.write(b"partial", timeout=0)
    prod.close_with_error(5)
    assert cons.read(100, timeout=1) == b"partial"
    with pytest.raises(zcio.Disconnected) as e:
        cons.read(100, timeout=1)
    assert e.value.code == 5
