"""Channels under asyncio (every test runs its body under asyncio.run):
recv_async / send_async / async for on the doorbell (loop.add_reader)
against a peer process using the blocking API, several channels in one
loop, cancellation at random points, a peer killed while a task waits, a
loop that keeps running (and does not spin) while a task waits; in one
process: timeouts, the send forms, close, two tasks on one end, and the
doorbell guards (a flooding peer, a peer that closes only its doorbell)."""

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

T = kids.TIMEOUT


async def collect(ch) -> list[bytes]:
    return [m.tobytes() async for m in ch]


# --- across processes ----------------------------------------------------------


def test_recv_async_and_async_for_from_a_blocking_sender(sock_path, child):
    n = 2000
    c = child(kids.aio_sender, sock_path, n, 97)

    async def main() -> None:
        with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
            ticker = Ticker()
            for i in range(n // 2):
                m = await bounded(ch.recv_async())
                assert m.tobytes() == kids.aio_msg(i)
            i = n // 2
            async for m in ch:
                assert m.tobytes() == kids.aio_msg(i), i
                i += 1
                if i == n:
                    break
            # The sender paused 20 ms every 97 messages: the loop ran
            # meanwhile.
            assert ticker.ticks > 0
            ticker.stop()
            await ch.send_async(b"done", timeout=T)
            # The child closes after "done": the iteration ends, nothing
            # more came.
            assert await bounded(collect(ch)) == []
            with pytest.raises(zcio.Disconnected):
                await bounded(ch.recv_async())

    asyncio.run(main())
    c.join_ok()


def test_send_async_waits_for_a_blocking_receiver(sock_path, child):
    # More messages than the ring has entries (1024), to a receiver that
    # starts 0.3 s late: the sends wait for room.
    n = 3000
    c = child(kids.aio_receiver, sock_path, n, 0.3, 251)

    async def main() -> None:
        pool = zcio.Pool("aio-send")
        with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
            ticker = Ticker()
            t0 = time.monotonic()
            for i in range(n):
                data = kids.aio_msg(i)
                if i % 3 == 0:
                    await ch.send_async(data, timeout=T)  # bytes: copied once
                elif i % 3 == 1:
                    pb = pool.alloc(len(data))  # no copy
                    memoryview(pb)[:] = data
                    await ch.send_async(pb, timeout=T)
                else:
                    await ch.send_async(bytearray(data), timeout=T, pool=pool)
            waited = time.monotonic() - t0
            assert waited >= 0.2, f"the ring never filled ({waited:.3f} s)"
            assert ticker.ticks > 20, f"the loop did not run while sends waited ({ticker.ticks})"
            ticker.stop()
            assert (await bounded(ch.recv_async())).tobytes() == b"ok"

    asyncio.run(main())
    c.join_ok()


def test_several_channels_in_one_loop(sock_path, child):
    k, n = 3, 300
    paths = [f"{sock_path}{j}" for j in range(k)]
    listeners = [zcio.Listener(p) for p in paths]
    kids_ = [child(kids.aio_sender, p, n, 23 + 7 * j) for j, p in enumerate(paths)]
    chans = [lst.accept(timeout=T) for lst in listeners]

    async def drain(ch, start: int, stop: int) -> int:
        for i in range(start, stop):
            m = await ch.recv_async(timeout=T)
            assert m.tobytes() == kids.aio_msg(i)
        return stop - start

    async def main() -> None:
        # First half: one task per channel, gathered.
        got = await bounded(asyncio.gather(*(drain(ch, 0, n // 2) for ch in chans)))
        assert got == [n // 2] * k
        # Second half: one pending receive per channel, asyncio.wait for
        # whichever completes first, then a new receive on that channel.
        nxt = [n // 2] * k
        pending = {asyncio.ensure_future(ch.recv_async(timeout=T)): j for j, ch in enumerate(chans)}
        while pending:
            done, _ = await asyncio.wait(pending, timeout=T, return_when=asyncio.FIRST_COMPLETED)
            assert done, "no channel delivered within the timeout"
            for t in done:
                j = pending.pop(t)
                assert t.result().tobytes() == kids.aio_msg(nxt[j])
                nxt[j] += 1
                if nxt[j] < n:
                    pending[asyncio.ensure_future(chans[j].recv_async(timeout=T))] = j
        assert nxt == [n] * k
        await bounded(asyncio.gather(*(ch.send_async(b"done") for ch in chans)))
        ends = await bounded(asyncio.gather(*(collect(ch) for ch in chans)))
        assert ends == [[]] * k

    try:
        asyncio.run(main())
    finally:
        for ch in chans:
            ch.close()
        for lst in listeners:
            lst.close()
    for c in kids_:
        c.join_ok()


def test_cancelled_recv_async_loses_no_message(sock_path, child):
    n = 1500
    c = child(kids.aio_sender, sock_path, n, 13)
    rng = random.Random(20240)

    async def main() -> None:
        with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
            i = timeouts = cancels = 0
            while i < n:
                if rng.random() < 0.5:
                    # asyncio.wait_for with a tiny timeout (0: cancelled
                    # before it starts).
                    t = rng.choice([0.0, rng.uniform(0, 0.003)])
                    try:
                        m = await asyncio.wait_for(ch.recv_async(), t)
                    except TimeoutError:
                        timeouts += 1
                        continue
                else:
                    # task.cancel() after a random number of loop steps.
                    task = asyncio.ensure_future(ch.recv_async())
                    for _ in range(rng.randrange(4)):
                        await asyncio.sleep(0)
                    task.cancel()
                    try:
                        m = await task
                    except asyncio.CancelledError:
                        cancels += 1
                        continue
                assert m.tobytes() == kids.aio_msg(i), f"message {i} lost or out of order"
                i += 1
            assert timeouts > 0 and cancels > 0, (timeouts, cancels)
            # Nothing was taken twice or left over.
            with pytest.raises(zcio.Empty):
                ch.recv(timeout=0)
            await ch.send_async(b"done", timeout=T)
            assert await bounded(collect(ch)) == []

    asyncio.run(main())
    c.join_ok()


def test_cancelled_send_async_sends_all_or_nothing(sock_path, child):
    # The receiver starts late and pauses: sends wait for room, and are
    # cancelled at random points; each is repeated until it went through.
    # The receiver checks that every message came exactly once, in order.
    n = 2500
    c = child(kids.aio_receiver, sock_path, n, 0.2, 101)
    rng = random.Random(7)

    async def main() -> None:
        with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
            cancelled = 0
            for i in range(n):
                data = kids.aio_msg(i)
                while True:
                    try:
                        await asyncio.wait_for(ch.send_async(data), rng.uniform(0, 0.004))
                        break
                    except TimeoutError:
                        cancelled += 1
            assert cancelled > 0
            assert (await bounded(ch.recv_async())).tobytes() == b"ok"

    asyncio.run(main())
    c.join_ok()


def test_default_waits_end_at_the_configured_bounds(sock_path, child):
    """timeout=None (and `async for`) waits up to the channel's bound (0.2 s
    here), then raises TimedOut, against a peer process that never sends
    nor receives."""
    c = child(kids.chan_connect_and_idle, sock_path)

    async def main() -> None:
        with zcio.Listener(sock_path, send_timeout=0.2, recv_timeout=0.2) as lst, lst.accept(timeout=T) as ch:
            with pytest.raises(zcio.TimedOut):
                await bounded(ch.recv_async())
            with pytest.raises(zcio.TimedOut):
                async for _ in ch:
                    raise AssertionError("the peer sent nothing")
            sent = 0
            with pytest.raises(zcio.TimedOut):
                while sent < 100_000:  # the peer never receives: the ring fills
                    await bounded(ch.send_async(b"x" * 100))
                    sent += 1
            assert sent > 0

    asyncio.run(main())
    c.kill()


def test_peer_killed_while_a_receive_waits(sock_path, child):
    c = child(kids.aio_send_then_hang, sock_path, 3)

    async def main() -> None:
        with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
            for i in range(3):
                assert (await bounded(ch.recv_async())).tobytes() == kids.aio_msg(i)
            task = asyncio.ensure_future(ch.recv_async())
            await asyncio.sleep(0.2)
            assert not task.done()
            t0 = time.monotonic()
            os.kill(c.pid, signal.SIGKILL)
            with pytest.raises(zcio.Disconnected):
                await asyncio.wait_for(task, 10)
            # Bounded: the doorbell hangs up when the process dies.
            assert time.monotonic() - t0 < 10
            assert ch.disconnected

    asyncio.run(main())
    c.kill()


def test_peer_killed_while_a_send_waits(sock_path, child):
    c = child(kids.aio_send_then_hang, sock_path, 0)  # never receives

    async def main() -> None:
        with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
            sent = 0
            while True:
                try:
                    ch.send(b"x", timeout=0)
                    sent += 1
                except zcio.Full:
                    break
            assert sent > 0
            task = asyncio.ensure_future(ch.send_async(b"one more"))
            await asyncio.sleep(0.2)
            assert not task.done()
            os.kill(c.pid, signal.SIGKILL)
            with pytest.raises(zcio.Disconnected):
                await asyncio.wait_for(task, 10)

    asyncio.run(main())
    c.kill()


def test_peer_closing_cleanly_while_a_send_waits(sock_path, child):
    # The peer closes its end after 0.5 s but keeps running (its Channel
    # object, and so its doorbell, alive) for 5 s more.
    c = child(kids.aio_close_then_linger, sock_path, 0.5, 5.0)

    async def main() -> None:
        with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
            while True:
                try:
                    ch.send(b"x", timeout=0)
                except zcio.Full:
                    break
            with pytest.raises(zcio.Disconnected):
                await asyncio.wait_for(ch.send_async(b"one more"), 2.5)

    try:
        asyncio.run(main())
    finally:
        c.kill()


def test_the_loop_runs_and_does_not_spin_while_a_receive_waits(sock_path, child):
    c = child(kids.aio_send_then_hang, sock_path, 0)  # an idle peer

    async def main() -> None:
        with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
            ticker = Ticker()
            cpu0, t0 = time.thread_time(), time.monotonic()
            with pytest.raises(zcio.TimedOut) as e:
                await ch.recv_async(timeout=0.5)
            cpu, wall = time.thread_time() - cpu0, time.monotonic() - t0
            ticker.stop()
            assert isinstance(e.value, TimeoutError)
            assert wall >= 0.5
            assert ticker.ticks >= 20, f"the loop was blocked: {ticker.ticks} ticks in {wall:.3f} s"
            # Waiting costs no CPU (the ticker's own wakes aside): not a
            # poll loop.
            assert cpu < 0.25 * wall, f"{cpu:.3f} s of CPU in {wall:.3f} s of waiting"

    asyncio.run(main())
    c.kill()


# --- in one process ------------------------------------------------------------


def test_timeouts_forms_and_errors_in_one_process():
    a, b = zcio.Channel.pair()

    async def main() -> None:
        with pytest.raises(zcio.Empty):
            await b.recv_async(timeout=0)
        with pytest.raises(zcio.TimedOut):
            await b.recv_async(timeout=0.05)
        # Arguments are checked at the call, as the blocking calls do.
        with pytest.raises(ValueError):
            b.recv_async(timeout=-1)
        with pytest.raises(TypeError):
            b.send_async(b"x", timeout="soon")
        with pytest.raises(ValueError, match="empty"):
            await a.send_async(b"")
        # bytes, a PoolBuffer, a received Msg forwarded back.
        await a.send_async(b"hello")
        pb = a.pool.alloc(5)
        memoryview(pb)[:] = b"buf!!"
        await a.send_async(pb, timeout=1)
        assert pb.sent
        m = await b.recv_async(timeout=1)
        assert m.tobytes() == b"hello"
        assert (await b.recv_async(timeout=1)).tobytes() == b"buf!!"
        await b.send_async(m, timeout=1)
        assert (await a.recv_async(timeout=1)).tobytes() == b"hello"
        # A full ring: Full at once, TimedOut after a while, and a waiting
        # send goes once the receiver takes one.
        sent = 0
        while True:
            try:
                a.send(b"y", timeout=0)
                sent += 1
            except zcio.Full:
                break
        with pytest.raises(zcio.Full):
            await a.send_async(b"z", timeout=0)
        with pytest.raises(zcio.TimedOut):
            await a.send_async(b"z", timeout=0.05)
        task = asyncio.ensure_future(a.send_async(b"z"))
        await asyncio.sleep(0.05)
        assert not task.done()
        assert (await b.recv_async()).tobytes() == b"y"
        await bounded(task, 5)
        for _ in range(sent - 1):
            assert (await b.recv_async(timeout=1)).tobytes() == b"y"
        assert (await b.recv_async(timeout=1)).tobytes() == b"z"

    asyncio.run(main())
    a.close()
    b.close()


def test_close_ends_waits_and_iteration():
    a, b = zcio.Channel.pair()

    async def main() -> None:
        # Our own close wakes a task waiting on this end.
        task = asyncio.ensure_future(b.recv_async())
        await asyncio.sleep(0.05)
        assert not task.done()
        b.close()
        with pytest.raises(zcio.Disconnected):
            await bounded(task, 5)
        # The peer's close ends the other end's iteration (after what was
        # sent).
        c, d = zcio.Channel.pair()
        await c.send_async(b"last")
        it = asyncio.ensure_future(collect(d))
        await asyncio.sleep(0.05)
        c.close()
        assert await bounded(it, 5) == [b"last"]
        # A close from another thread wakes the loop's waiter too.
        e, f = zcio.Channel.pair()
        task = asyncio.ensure_future(f.recv_async())
        await asyncio.sleep(0.05)
        threading.Thread(target=f.close).start()
        with pytest.raises(zcio.Disconnected):
            await bounded(task, 5)
        for ch in (c, d, e):
            ch.close()

    asyncio.run(main())
    a.close()


def test_two_tasks_wait_on_one_end_at_once():
    """A send waiting for room and a receive waiting for a message share
    one doorbell (and one add_reader): each goes when its turn comes."""
    a, b = zcio.Channel.pair()

    async def main() -> None:
        sent = 0
        while True:
            try:
                a.send(b"y", timeout=0)
                sent += 1
            except zcio.Full:
                break
        send = asyncio.ensure_future(a.send_async(b"z"))
        recv = asyncio.ensure_future(a.recv_async())
        await asyncio.sleep(0.05)
        assert not send.done() and not recv.done()
        b.send(b"hi", timeout=1)  # wakes the receive (and the send, which waits on)
        assert (await bounded(recv, 5)).tobytes() == b"hi"
        await asyncio.sleep(0.05)
        assert not send.done()
        assert b.recv(timeout=1).tobytes() == b"y"  # room: the send goes
        await bounded(send, 5)
        # And the other way round: the send goes first, the receive waits on.
        assert b.recv(timeout=1).tobytes() == b"y"
        a.send(b"y", timeout=0)  # full again
        send = asyncio.ensure_future(a.send_async(b"z2"))
        recv = asyncio.ensure_future(a.recv_async())
        await asyncio.sleep(0.05)
        assert b.recv(timeout=1).tobytes() == b"y"
        await bounded(send, 5)
        await asyncio.sleep(0.05)
        assert not recv.done()
        b.send(b"hi2", timeout=1)
        assert (await bounded(recv, 5)).tobytes() == b"hi2"

    asyncio.run(main())
    a.close()
    b.close()


def peer_bell(ch) -> socket.socket:
    """A socket over a duplicate of `ch`'s doorbell: what it sends rings
    the *other* end's doorbell (a test stands in for a misbehaving peer)."""
    return socket.socket(fileno=os.dup(ch.doorbell()))


def test_a_peer_ringing_in_a_flood_neither_hangs_nor_spins_the_loop():
    a, b = zcio.Channel.pair()
    stop = threading.Event()
    bell = peer_bell(b)

    def flood() -> None:
        while not stop.is_set():
            try:
                bell.send(b"\1", socket.MSG_DONTWAIT)
            except BlockingIOError:
                time.sleep(0)

    async def main() -> None:
        flooder = threading.Thread(target=flood)
        flooder.start()
        try:
            cpu0, t0 = time.thread_time(), time.monotonic()
            with pytest.raises(zcio.TimedOut):
                await a.recv_async(timeout=0.5)
            cpu, wall = time.thread_time() - cpu0, time.monotonic() - t0
            # At most FLOOD_LIMIT futile wakes, then one look per 50 ms.
            assert cpu < 0.3 * wall, f"{cpu:.3f} s of CPU in {wall:.3f} s: the flood spun the loop"
            # A real message still arrives (by the timer).
            b.send(b"through", timeout=1)
            assert (await a.recv_async(timeout=5)).tobytes() == b"through"
        finally:
            stop.set()
            flooder.join()

    asyncio.run(main())
    bell.close()
    a.close()
    b.close()


def test_a_peer_that_closes_only_its_doorbell_is_looked_at_by_timer():
    a, b = zcio.Channel.pair()
    bell = peer_bell(b)
    bell.shutdown(socket.SHUT_RDWR)  # the peer lives on, its bell is dead

    async def main() -> None:
        cpu0, t0 = time.thread_time(), time.monotonic()
        with pytest.raises(zcio.TimedOut):
            await a.recv_async(timeout=0.3)
        cpu, wall = time.thread_time() - cpu0, time.monotonic() - t0
        assert cpu < 0.3 * wall, f"{cpu:.3f} s of CPU in {wall:.3f} s"
        assert not a.disconnected, "the peer still lives"
        b.send(b"late", timeout=1)  # rings nothing: seen by the timer
        assert (await a.recv_async(timeout=5)).tobytes() == b"late"

    asyncio.run(main())
    bell.close()
    a.close()
    b.close()


def recv_in_my_loop(ch, sel):
    """The example of docs/python.md ("A loop of your own"), as printed."""
    fd = ch.doorbell()
    sel.register(fd, selectors.EVENT_READ)
    hung_up = False
    try:
        while True:
            try:
                return ch.recv(timeout=0)  # 1. try (Disconnected once the peer is gone)
            except zcio.Empty:
                pass
            if not ch.prepare_recv_sleep():  # 2. a message came meanwhile
                continue
            if hung_up:
                time.sleep(0.05)  # a hung-up doorbell stays readable: use a timer
            else:
                sel.select()  # 3. wait (your loop serves its other fds here)
            hung_up |= ch.doorbell_rang()  # 4. take the rings, then try again
    finally:
        sel.unregister(fd)


def test_the_doorbell_calls_in_a_loop_of_your_own():
    a, b = zcio.Channel.pair()
    sel = selectors.DefaultSelector()
    fd = b.doorbell()
    assert fd == b.doorbell() and fd >= 0
    assert b.doorbell_rang() is False  # nothing rang: harmless
    threading.Timer(0.05, lambda: a.send(b"ring", timeout=1)).start()
    assert recv_in_my_loop(b, sel).tobytes() == b"ring"
    # A doorbell that hung up while the peer lives: the timer takes over.
    bell = peer_bell(a)
    bell.shutdown(socket.SHUT_RDWR)
    threading.Timer(0.1, lambda: a.send(b"late", timeout=1)).start()
    assert recv_in_my_loop(b, sel).tobytes() == b"late"
    assert b.doorbell_rang() is True and not b.disconnected
    # prepare_send_sleep: room now; once the peer closed, never.
    assert b.prepare_send_sleep(1) is False
    a.close()
    with pytest.raises(zcio.Disconnected):
        b.prepare_send_sleep(1)
    with pytest.raises(zcio.Disconnected):
        recv_in_my_loop(b, sel)
    sel.close()
    bell.close()
    b.close()
