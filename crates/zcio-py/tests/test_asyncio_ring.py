"""Rings under asyncio (every test runs its body under asyncio.run):
read_async / async for / write_async on the ends' named bells
(loop.add_reader, plus the 50 ms look a ring needs) against peer processes
using the blocking API; cancellation at random points; a producer killed
or failing while a task waits; a consumer killed while a write waits; a
loop that keeps running (and does not spin) while a task waits; in one
process: timeouts, forms, close, several tasks, a flooding bell and the
doorbell calls in a loop of one's own."""

from __future__ import annotations

import asyncio
import os
import random
import selectors
import signal
import socket
import threading
import time

import pytest

import zcio
import zcio_children as kids
from aio_helpers import Ticker, bounded
from zcio import _aio

T = kids.TIMEOUT


def fill(p: zcio.RingProducer, block: bytes = b"x" * 1000) -> int:
    """Write `block` until the ring is full; the count."""
    n = 0
    while True:
        try:
            p.write(block, timeout=0)
            n += 1
        except zcio.Full:
            return n


# --- across processes ----------------------------------------------------------


def test_read_async_and_async_for_from_a_blocking_producer(ring_name, child):
    n = 2000
    c = child(kids.aio_ring_producer, ring_name, n, 97, "close")

    async def main() -> None:
        with zcio.RingConsumer(ring_name, start="oldest", timeout=T) as cons:
            ticker = Ticker()
            for i in range(n // 2):
                b = await bounded(cons.read_async(4096))
                assert b == kids.aio_msg(i), i
            i = n // 2
            async for b in cons:
                assert b == kids.aio_msg(i), i
                i += 1
            # The iteration ended at the end of the stream, after every block.
            assert i == n
            # The producer paused 20 ms every 97 blocks: the loop ran meanwhile.
            assert ticker.ticks > 0
            ticker.stop()
            assert await bounded(cons.read_async(4096)) == b""
            assert await bounded(cons.peek_async()) is None
            buf = bytearray(16)
            assert await bounded(cons.readinto_async(buf)) == 0

    asyncio.run(main())
    c.join_ok()


def test_default_waits_end_at_the_wait_bound(ring_name, child):
    """timeout=None (and `async for`) waits up to the end's wait_bound (0.2
    s here), then raises TimedOut: a producer process that never writes, a
    consumer process that never reads."""
    c = child(kids.ring_produce, ring_name, 0, 100, "hang")
    name = ring_name + "-w"
    prod = zcio.RingProducer(name, size=16 << 10, layout="variable")

    async def main() -> None:
        with zcio.RingConsumer(ring_name, timeout=T) as cons:
            cons.wait_bound = 0.2
            with pytest.raises(zcio.TimedOut):
                await bounded(cons.read_async(100))
            with pytest.raises(zcio.TimedOut):
                await bounded(cons.peek_async())
            with pytest.raises(zcio.TimedOut):
                async for _ in cons:
                    raise AssertionError("the producer wrote nothing")
        idle = child(kids.aio_ring_idle_consumer, name)
        assert prod.wait_for_consumers(1, timeout=T) == 1
        prod.wait_bound = 0.2
        fill(prod)
        with pytest.raises(zcio.TimedOut):
            await bounded(prod.write_async(b"x" * 1000))
        idle.kill()

    try:
        asyncio.run(main())
    finally:
        prod.close()
        zcio.ring_unlink(name)
    c.kill()


def test_write_async_waits_for_a_slow_blocking_consumer(ring_name, child):
    # A 16 KiB block ring (a few blocks of up to 3 KB) to a consumer that
    # starts 0.3 s late and pauses: the writes wait for room.
    n = 1500
    with zcio.RingProducer(ring_name, size=16 << 10, layout="variable", policy="block") as p:
        c = child(kids.aio_ring_consumer, ring_name, n, 0.3, 151)

        async def main() -> None:
            assert await asyncio.to_thread(p.wait_for_consumers, 1, T) == 1
            ticker = Ticker()
            t0 = time.monotonic()
            for i in range(n):
                data = kids.aio_msg(i)
                assert await p.write_async(data if i % 2 else bytearray(data), timeout=T) == len(data)
            waited = time.monotonic() - t0
            assert waited >= 0.2, f"the ring never filled ({waited:.3f} s)"
            assert ticker.ticks > 20, f"the loop did not run while writes waited ({ticker.ticks})"
            ticker.stop()

        asyncio.run(main())
    c.join_ok()


def test_write_async_of_a_byte_stream_in_pieces(ring_name, child):
    # A 16 KiB continuous ring: writes longer than half the ring go in
    # pieces, each waiting for room; the consumer checks every byte.
    total = 300_000
    data = kids.aio_stream(total)
    rng = random.Random(3)
    with zcio.RingProducer(ring_name, size=16 << 10, layout="continuous", policy="block") as p:
        c = child(kids.aio_stream_consumer, ring_name, total, 0.2)

        async def main() -> None:
            assert await asyncio.to_thread(p.wait_for_consumers, 1, T) == 1
            done = 0
            mv = memoryview(data)
            while done < total:
                k = min(rng.choice([100, 5000, 20000, 60000]), total - done)
                assert await p.write_async(mv[done : done + k], timeout=T) == k
                done += k

        asyncio.run(main())
    c.join_ok()


def test_cancelled_read_async_loses_no_block(ring_name, child):
    n = 1500
    c = child(kids.aio_ring_producer, ring_name, n, 13, "close")
    rng = random.Random(20241)

    async def main() -> None:
        with zcio.RingConsumer(ring_name, start="oldest", timeout=T) as cons:
            i = timeouts = cancels = 0
            while i < n:
                how = rng.random()
                if how < 0.4:
                    # asyncio.wait_for with a tiny timeout (0: cancelled
                    # before it starts).
                    t = rng.choice([0.0, rng.uniform(0, 0.003)])
                    try:
                        b = await asyncio.wait_for(cons.read_async(4096), t)
                    except TimeoutError:
                        timeouts += 1
                        continue
                elif how < 0.8:
                    # task.cancel() after a random number of loop steps;
                    # half of them on the iteration.
                    aw = cons.read_async(4096) if rng.random() < 0.5 else anext(cons)
                    task = asyncio.ensure_future(aw)
                    for _ in range(rng.randrange(4)):
                        await asyncio.sleep(0)
                    task.cancel()
                    try:
                        b = await task
                    except asyncio.CancelledError:
                        cancels += 1
                        continue
                else:
                    # A peek, cancelled or not; released after copying.
                    try:
                        pk = await asyncio.wait_for(cons.peek_async(), rng.uniform(0, 0.003))
                    except TimeoutError:
                        timeouts += 1
                        continue
                    b = pk.tobytes()
                    pk.release()
                assert b == kids.aio_msg(i), f"block {i} lost or out of order"
                i += 1
            assert timeouts > 0 and cancels > 0, (timeouts, cancels)
            # Nothing was taken twice or left over: the end of the stream.
            assert await bounded(cons.read_async(4096)) == b""

    asyncio.run(main())
    c.join_ok()


def test_cancelled_write_async_writes_all_or_nothing(ring_name, child):
    # Writes cancelled at random points while they wait for room, each
    # repeated until it went through; the consumer checks every block came
    # exactly once, in order.
    n = 1200
    rng = random.Random(8)
    with zcio.RingProducer(ring_name, size=16 << 10, layout="variable", policy="block") as p:
        c = child(kids.aio_ring_consumer, ring_name, n, 0.2, 61)

        async def main() -> None:
            assert await asyncio.to_thread(p.wait_for_consumers, 1, T) == 1
            cancelled = 0
            for i in range(n):
                data = kids.aio_msg(i)
                while True:
                    if rng.random() < 0.5:
                        try:
                            await asyncio.wait_for(p.write_async(data), rng.uniform(0, 0.004))
                            break
                        except TimeoutError:
                            cancelled += 1
                    else:
                        task = asyncio.ensure_future(p.write_async(data))
                        for _ in range(rng.randrange(4)):
                            await asyncio.sleep(0)
                        if task.done():
                            await task
                            break
                        task.cancel()
                        try:
                            await task
                            break  # it completed before the cancellation took
                        except asyncio.CancelledError:
                            cancelled += 1
            assert cancelled > 0

        asyncio.run(main())
    c.join_ok()


@pytest.mark.parametrize("form", ["read_async", "async for"])
def test_producer_killed_while_a_read_waits(ring_name, child, form):
    c = child(kids.aio_ring_producer, ring_name, 3, 0, "hang")

    async def main() -> None:
        with zcio.RingConsumer(ring_name, start="oldest", timeout=T) as cons:
            for i in range(3):
                assert await bounded(cons.read_async(4096)) == kids.aio_msg(i)

            async def rest() -> list[bytes]:
                if form == "read_async":
                    return [await cons.read_async(4096)]
                return [b async for b in cons]

            task = asyncio.ensure_future(rest())
            await asyncio.sleep(0.3)
            assert not task.done(), "the read did not wait"
            t0 = time.monotonic()
            os.kill(c.pid, signal.SIGKILL)
            with pytest.raises(zcio.Disconnected) as e:
                await asyncio.wait_for(task, 10)
            # Noticed by the 50 ms look (a ring cannot hang up).
            took = time.monotonic() - t0
            assert took < 3, f"the dead producer was noticed after {took:.3f} s"
            assert e.value.pid == c.pid

    asyncio.run(main())
    c.kill()


def test_producer_failing_after_its_data(ring_name, child):
    n = 50
    c = child(kids.aio_ring_producer, ring_name, n, 7, "fail")

    async def main() -> None:
        with zcio.RingConsumer(ring_name, start="oldest", timeout=T) as cons:
            got = []
            with pytest.raises(zcio.Disconnected) as e:
                async for b in cons:
                    got.append(b)
            assert got == [kids.aio_msg(i) for i in range(n)]
            assert e.value.code == 7
            with pytest.raises(zcio.Disconnected):
                await bounded(cons.read_async(4096))

    asyncio.run(main())
    c.join_ok()


def test_consumer_killed_while_a_write_waits(ring_name, child):
    # The slowest consumer dies while write_async waits for it: the 50 ms
    # look evicts it and the write goes through.
    with zcio.RingProducer(ring_name, size=16 << 10, layout="variable", policy="block") as p:
        c = child(kids.aio_ring_idle_consumer, ring_name)

        async def main() -> None:
            assert await asyncio.to_thread(p.wait_for_consumers, 1, T) == 1
            assert fill(p) > 0
            task = asyncio.ensure_future(p.write_async(b"y" * 1000))
            await asyncio.sleep(0.3)
            assert not task.done(), "the write did not wait"
            t0 = time.monotonic()
            os.kill(c.pid, signal.SIGKILL)
            assert await asyncio.wait_for(task, 10) == 1000
            took = time.monotonic() - t0
            assert took < 3, f"the dead consumer was evicted after {took:.3f} s"
            assert p.consumers() == 0

        asyncio.run(main())
    c.kill()


def test_the_loop_runs_and_does_not_spin_while_a_read_waits(ring_name, child):
    c = child(kids.aio_ring_producer, ring_name, 0, 0, "hang")  # an idle producer

    async def main() -> None:
        with zcio.RingConsumer(ring_name, start="oldest", timeout=T) as cons:
            ticker = Ticker()
            cpu0, t0 = time.thread_time(), time.monotonic()
            with pytest.raises(zcio.TimedOut) as e:
                await cons.read_async(4096, timeout=0.5)
            cpu, wall = time.thread_time() - cpu0, time.monotonic() - t0
            ticker.stop()
            assert isinstance(e.value, TimeoutError)
            assert wall >= 0.5
            assert ticker.ticks >= 20, f"the loop was blocked: {ticker.ticks} ticks in {wall:.3f} s"
            # The 50 ms looks and the ticker's wakes aside, waiting costs
            # no CPU: not a poll loop.
            assert cpu < 0.25 * wall, f"{cpu:.3f} s of CPU in {wall:.3f} s of waiting"

    asyncio.run(main())
    c.kill()


# --- in one process ------------------------------------------------------------


def test_timeouts_forms_and_errors_in_one_process(ring_name):
    p = zcio.RingProducer(ring_name, size=16 << 10, layout="variable", policy="block")
    cons = zcio.RingConsumer(ring_name, start="oldest")

    async def main() -> None:
        with pytest.raises(zcio.Empty):
            await cons.read_async(100, timeout=0)
        with pytest.raises(zcio.TimedOut):
            await cons.read_async(100, timeout=0.05)
        with pytest.raises(zcio.TimedOut):
            await cons.peek_async(timeout=0.05)
        # Arguments are checked at the call, as the blocking calls do.
        with pytest.raises(ValueError):
            cons.read_async(100, timeout=-1)
        with pytest.raises(TypeError):
            p.write_async(b"x", timeout="soon")
        with pytest.raises(BufferError):
            cons.readinto_async(b"read-only")
        # The forms: bytes, readinto, peek; a waiting read gets a later write.
        task = asyncio.ensure_future(cons.read_async(100))
        await asyncio.sleep(0.05)
        assert not task.done()
        assert await p.write_async(b"hello") == 5
        assert await bounded(task, 5) == b"hello"
        await p.write_async(bytearray(b"world"))
        buf = bytearray(10)
        assert await cons.readinto_async(buf, timeout=1) == 5
        assert bytes(buf[:5]) == b"world"
        await p.write_async(memoryview(b"peeked"))
        pk = await cons.peek_async(timeout=1)
        assert bytes(pk) == b"peeked"
        # A read while the peek is outstanding is refused, as for read.
        with pytest.raises(zcio.RingError):
            await cons.read_async(100, timeout=1)
        pk.release()
        # A block too small a buffer for, as read says.
        await p.write_async(b"0123456789")
        with pytest.raises(ValueError):
            await cons.read_async(4, timeout=1)
        assert await cons.read_async(100, timeout=1) == b"0123456789"
        # A full ring: Full at once, TimedOut after a while, and a waiting
        # write goes once the consumer reads.
        k = fill(p)
        with pytest.raises(zcio.Full):
            await p.write_async(b"z" * 1000, timeout=0)
        with pytest.raises(zcio.TimedOut):
            await p.write_async(b"z" * 1000, timeout=0.05)
        w = asyncio.ensure_future(p.write_async(b"z" * 1000))
        await asyncio.sleep(0.05)
        assert not w.done()
        assert await cons.read_async(2000, timeout=1) == b"x" * 1000
        assert await bounded(w, 5) == 1000
        for _ in range(k - 1):
            assert await cons.read_async(2000, timeout=1) == b"x" * 1000
        assert await cons.read_async(2000, timeout=1) == b"z" * 1000
        # Two tasks wait on one consumer: each gets one block.
        r1 = asyncio.ensure_future(cons.read_async(100))
        r2 = asyncio.ensure_future(cons.read_async(100))
        await asyncio.sleep(0.05)
        await p.write_async(b"a")
        await p.write_async(b"b")
        assert sorted(await bounded(asyncio.gather(r1, r2), 5)) == [b"a", b"b"]
        # The producer's close ends the stream for a waiting read.
        task = asyncio.ensure_future(cons.read_async(100))
        await asyncio.sleep(0.05)
        p.close()
        assert await bounded(task, 5) == b""
        # Our own close wakes a waiting task (ValueError: closed, as read).
        cons2 = zcio.RingConsumer(ring_name, start="newest")
        task = asyncio.ensure_future(cons2.read_async(100))
        await asyncio.sleep(0.05)
        threading.Thread(target=cons2.close).start()
        with pytest.raises(ValueError, match="closed"):
            await bounded(task, 5)
        with pytest.raises(ValueError, match="closed"):
            cons2.read_async(100)

    asyncio.run(main())
    cons.close()


def test_a_byte_stream_write_that_times_out_part_way(ring_name):
    p = zcio.RingProducer(ring_name, size=16 << 10, layout="continuous", policy="block")
    cons = zcio.RingConsumer(ring_name, start="oldest")

    async def main() -> None:
        # 40 KB into a 16 KiB ring nobody reads: the first pieces go, then
        # the timeout returns the count (as write does).
        n = await p.write_async(b"s" * 40_000, timeout=0.1)
        assert 0 < n < 40_000
        assert n % (8 << 10) == 0, n  # whole pieces of half the ring
        with pytest.raises(zcio.TimedOut):
            await p.write_async(b"s" * 40_000, timeout=0.05)
        got = 0
        while got < n:
            got += len(await cons.read_async(1 << 20, timeout=1))
        assert got == n

    asyncio.run(main())
    p.close()
    cons.close()


def test_policies_that_never_wait(ring_name):
    # srp drops a block that does not fit (Full at once, as write says);
    # frp overwrites: a write_async never waits.
    p = zcio.RingProducer(ring_name, size=16 << 10, layout="variable", policy="srp")
    cons = zcio.RingConsumer(ring_name, start="oldest")

    async def main() -> None:
        k = fill(p)
        with pytest.raises(zcio.Full):
            await bounded(p.write_async(b"d" * 1000, timeout=5), 1)
        assert cons.stats()["drops"] >= 1
        for _ in range(k):
            await cons.read_async(2000, timeout=1)

    asyncio.run(main())
    p.close()
    cons.close()
    zcio.ring_unlink(ring_name)
    p = zcio.RingProducer(ring_name, size=16 << 10, layout="variable", policy="frp")

    async def frp() -> None:
        for _ in range(100):
            assert await bounded(p.write_async(b"o" * 1000), 1) == 1000

    asyncio.run(frp())
    p.close()


def test_a_read_waiting_through_a_long_idle_stays_on_the_bell(ring_name):
    """The 50 ms looks are not futile wakes: after 2 s idle (about 40
    looks, more than the flood limit) the bell is still trusted, and the
    next block wakes the task through it, not at the next look."""
    p = zcio.RingProducer(ring_name, size=16 << 10, layout="variable", policy="block")
    cons = zcio.RingConsumer(ring_name, start="oldest")
    written = []

    def write_later() -> None:
        time.sleep(2.0)
        written.append(time.monotonic())
        p.write(b"late", timeout=1)

    async def main() -> None:
        threading.Thread(target=write_later).start()
        task = asyncio.ensure_future(cons.read_async(100))
        await asyncio.sleep(1.9)
        bell = cons._aio_bell
        assert bell.wakes > _aio.FLOOD_LIMIT, bell.wakes  # the looks ran
        assert not bell.distrusted(), (bell.futile, bell.dead)
        assert await bounded(task, 10) == b"late"
        latency = time.monotonic() - written[0]
        assert not bell.distrusted()
        # Through the bell: far below the 50 ms between looks (loosely:
        # the test may run on a loaded machine).
        assert latency < 0.045, f"woken {latency * 1000:.1f} ms after the write"

    asyncio.run(main())
    p.close()
    cons.close()


def test_a_bell_rung_in_a_flood_neither_hangs_nor_spins_the_loop(ring_name):
    p = zcio.RingProducer(ring_name, size=16 << 10, layout="variable", policy="block")
    cons = zcio.RingConsumer(ring_name, start="oldest")
    # The consumer's named bell, as any process could ring it.
    addr = socket.socket(fileno=os.dup(cons.doorbell())).getsockname()
    stop = threading.Event()

    def flood() -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        while not stop.is_set():
            try:
                s.sendto(b"\1", socket.MSG_DONTWAIT, addr)
            except (BlockingIOError, ConnectionRefusedError):
                time.sleep(0)
        s.close()

    async def main() -> None:
        flooder = threading.Thread(target=flood)
        flooder.start()
        try:
            cpu0, t0 = time.thread_time(), time.monotonic()
            with pytest.raises(zcio.TimedOut):
                await cons.read_async(100, timeout=0.5)
            cpu, wall = time.thread_time() - cpu0, time.monotonic() - t0
            # At most FLOOD_LIMIT futile wakes, then one look per 50 ms.
            assert cpu < 0.3 * wall, f"{cpu:.3f} s of CPU in {wall:.3f} s: the flood spun the loop"
            # A real block still arrives (by the look).
            p.write(b"through", timeout=1)
            assert await cons.read_async(100, timeout=5) == b"through"
        finally:
            stop.set()
            flooder.join()

    asyncio.run(main())
    p.close()
    cons.close()


def read_in_my_loop(cons, sel, n=4096):
    """The example of docs/python.md ("A loop of your own", rings), as
    printed."""
    fd = cons.doorbell()
    sel.register(fd, selectors.EVENT_READ)
    try:
        while True:
            try:
                return cons.read(n, timeout=0)  # 1. try (b"" at the end)
            except zcio.Empty:
                pass
            if not cons.prepare_read_sleep():  # 2. a block came meanwhile
                continue
            sel.select(timeout=0.05)  # 3. the bell, or 50 ms (a ring cannot hang up)
            cons.doorbell_rang()  # 4. Disconnected if the producer died
    finally:
        sel.unregister(fd)


def test_the_doorbell_calls_in_a_loop_of_your_own(ring_name):
    p = zcio.RingProducer(ring_name, size=16 << 10, layout="variable", policy="block")
    cons = zcio.RingConsumer(ring_name, start="oldest")
    sel = selectors.DefaultSelector()
    fd = cons.doorbell()
    assert fd == cons.doorbell() and fd >= 0
    assert cons.doorbell_rang() is None  # nothing rang: harmless
    threading.Timer(0.05, lambda: p.write(b"ring", timeout=1)).start()
    assert read_in_my_loop(cons, sel) == b"ring"
    # The producer's side: room now; a full ring says sleep; the
    # consumer's read rings the producer's bell.
    pfd = p.doorbell()
    assert pfd >= 0 and pfd != fd
    assert p.prepare_write_sleep(1000) is False
    fill(p)
    assert p.prepare_write_sleep(1000) is True
    threading.Timer(0.05, lambda: cons.read(4096, timeout=1)).start()
    sel.register(pfd, selectors.EVENT_READ)
    assert sel.select(timeout=5), "the consumer's read did not ring the producer"
    sel.unregister(pfd)
    p.doorbell_rang()
    assert p.prepare_write_sleep(1000) is False
    with pytest.raises(ValueError):
        p.prepare_write_sleep(1 << 20)  # larger than the ring: never fits
    p.close()
    with pytest.raises(ValueError, match="closed"):
        p.doorbell()
    while read_in_my_loop(cons, sel):
        pass  # to the end of the stream (b"")
    sel.close()
    cons.close()
    with pytest.raises(ValueError, match="closed"):
        cons.prepare_read_sleep()
