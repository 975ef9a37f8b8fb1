"""Rendezvous endpoints under asyncio (every test runs its body under
asyncio.run): recv_async / send_async / call_async / async for on the
endpoint's doorbell (loop.add_reader) against partner processes using the
blocking API, both ways; receives cancelled at random points; sends that
time out taken back; a partner killed while a task waits; a loop that
keeps running (and does not spin) while a task waits; in one process:
timeouts, forms, close, the send's turn and the doorbell calls in a loop of
one's own."""

from __future__ import annotations

import asyncio
import os
import random
import selectors
import signal
import threading
import time

import pytest

import zcio
import zcio_children as kids
from aio_helpers import Ticker, bounded

T = kids.TIMEOUT
NOTE, CALL, REPLY, SUM = kids.NOTE, kids.CALL, kids.REPLY, kids.SUM


async def accept(lst: zcio.RendezvousListener) -> zcio.Rendezvous:
    return await asyncio.to_thread(lst.accept, T)


def pair(path: str) -> tuple[zcio.Rendezvous, zcio.Rendezvous]:
    """Two connected endpoints in this process."""
    lst = zcio.RendezvousListener(path)
    got: list[zcio.Rendezvous] = []
    th = threading.Thread(target=lambda: got.append(zcio.Rendezvous.connect(path, timeout=T)))
    th.start()
    a = lst.accept(timeout=T)
    th.join()
    lst.close()
    return a, got[0]


# --- across processes ----------------------------------------------------------


def test_an_async_server_answers_a_blocking_caller(sock_path, child):
    n = 1000
    c = child(kids.aio_rdv_caller, sock_path, n, 97)

    async def main() -> None:
        with zcio.RendezvousListener(sock_path) as lst, await accept(lst) as ep:
            ticker = Ticker()
            i = 0
            async for m in ep:  # until the caller hangs up
                assert (m.label, m.words) == (CALL, (i,)), m
                await ep.send_async(REPLY, (2 * m.words[0],), timeout=T)
                i += 1
            assert i == n
            # The caller paused 20 ms every 97 calls: the loop ran meanwhile.
            assert ticker.ticks > 0
            ticker.stop()
            with pytest.raises(zcio.Disconnected):
                await bounded(ep.recv_async())

    asyncio.run(main())
    c.join_ok()


def test_call_async_against_a_blocking_server(sock_path, child):
    c = child(kids.rdv_server, sock_path)

    async def main() -> None:
        ep = await asyncio.to_thread(zcio.Rendezvous.connect, sock_path, T)
        with ep:
            total = 0
            for i in range(300):
                if i % 3 == 0:
                    await ep.send_async(NOTE, (i,), timeout=T)
                    total += i
                elif i % 3 == 1:
                    r = await ep.call_async(CALL, (i,), timeout=T)
                    assert (r.label, r.words) == (REPLY, (2 * i, total))
                else:
                    r = await ep.call_async(SUM, [i, 1, 2], timeout=T)
                    assert (r.label, r.words) == (REPLY, (i + 3,))
        # Our hang-up ends the server.

    asyncio.run(main())
    c.join_ok()


def test_cancelled_recv_async_loses_no_message(sock_path, child):
    n = 1000
    c = child(kids.aio_rdv_sender, sock_path, n, 13)
    rng = random.Random(20242)

    async def main() -> None:
        with zcio.RendezvousListener(sock_path) as lst, await accept(lst) as ep:
            i = timeouts = cancels = 0
            while i < n:
                if rng.random() < 0.5:
                    t = rng.choice([0.0, rng.uniform(0, 0.003)])
                    try:
                        m = await asyncio.wait_for(ep.recv_async(), t)
                    except TimeoutError:
                        timeouts += 1
                        continue
                else:
                    aw = ep.recv_async() if rng.random() < 0.5 else anext(ep)
                    task = asyncio.ensure_future(aw)
                    for _ in range(rng.randrange(4)):
                        await asyncio.sleep(0)
                    task.cancel()
                    try:
                        m = await task
                    except asyncio.CancelledError:
                        cancels += 1
                        continue
                assert (m.label, m.words) == (NOTE, (i,)), f"message {i} lost or out of order: {m!r}"
                i += 1
            assert timeouts > 0 and cancels > 0, (timeouts, cancels)
            # Nothing was taken twice or left over.
            with pytest.raises(zcio.Empty):
                ep.recv(timeout=0)
            r = await ep.call_async(CALL, (n,), timeout=T)
            assert (r.label, r.words) == (REPLY, (n,))

    asyncio.run(main())
    c.join_ok()


def test_send_async_timeouts_take_the_message_back(sock_path, child):
    """Sends with tiny timeouts to a receiver that pauses: one that raised
    TimedOut was taken back (retried), one that returned was delivered --
    the receiver checks every message came exactly once, in order."""
    n = 600
    c = child(kids.aio_rdv_receiver, sock_path, n, 0.2, 5)
    rng = random.Random(9)

    async def main() -> None:
        with zcio.RendezvousListener(sock_path) as lst, await accept(lst) as ep:
            retracted = 0
            for i in range(n):
                while True:
                    try:
                        await ep.send_async(NOTE, (i,), timeout=rng.uniform(0.0001, 0.004))
                        break
                    except zcio.TimedOut:
                        retracted += 1
            assert retracted > 0
            r = await bounded(ep.recv_async())
            assert (r.label, r.words) == (REPLY, (n,))

    asyncio.run(main())
    c.join_ok()


@pytest.mark.parametrize("how", ["timeout", "wait_for"])
def test_a_send_async_that_timed_out_is_never_seen(sock_path, child, how):
    # The partner sleeps 0.5 s before it receives: a send that gives up
    # after 0.1 s is retracted; the partner sees (and echoes) the next one.
    c = child(kids.aio_rdv_echo_late, sock_path, 0.5, 1)

    async def main() -> None:
        with zcio.RendezvousListener(sock_path) as lst, await accept(lst) as ep:
            if how == "timeout":
                with pytest.raises(zcio.TimedOut):
                    await ep.send_async(1, (111,), timeout=0.1)
            else:
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(ep.send_async(1, (111,)), 0.1)
            await ep.send_async(2, (222,), timeout=T)
            m = await bounded(ep.recv_async())
            assert (m.label, m.words) == (2, (222,))

    asyncio.run(main())
    c.join_ok()


@pytest.mark.parametrize("waiting", ["recv_async", "send_async", "async for", "call_async"])
def test_partner_killed_while_a_task_awaits(sock_path, child, waiting):
    c = child(kids.rdv_connect_and_hang, sock_path, False)  # never receives

    async def main() -> None:
        with zcio.RendezvousListener(sock_path) as lst, await accept(lst) as ep:
            if waiting == "recv_async":
                aw = ep.recv_async()
            elif waiting == "send_async":
                aw = ep.send_async(NOTE, (1,))
            elif waiting == "call_async":
                aw = ep.call_async(CALL, (1,))
            else:

                async def drain() -> list:
                    return [m async for m in ep]

                aw = drain()
            task = asyncio.ensure_future(aw)
            await asyncio.sleep(0.2)
            assert not task.done()
            t0 = time.monotonic()
            os.kill(c.pid, signal.SIGKILL)
            if waiting == "async for":
                assert await asyncio.wait_for(task, 10) == []  # the end
            else:
                with pytest.raises(zcio.Disconnected):
                    await asyncio.wait_for(task, 10)
            # The doorbell hangs up when the process dies.
            took = time.monotonic() - t0
            assert took < 3, f"the dead partner was noticed after {took:.3f} s"
            with pytest.raises(zcio.Disconnected):
                await bounded(ep.send_async(NOTE, (2,)))

    asyncio.run(main())
    c.kill()


def test_the_loop_runs_and_does_not_spin_while_a_receive_waits(sock_path, child):
    c = child(kids.rdv_connect_and_hang, sock_path, False)  # an idle partner

    async def main() -> None:
        with zcio.RendezvousListener(sock_path) as lst, await accept(lst) as ep:
            for aw in (lambda: ep.recv_async(timeout=0.5), lambda: ep.send_async(NOTE, (1,), timeout=0.5)):
                ticker = Ticker()
                cpu0, t0 = time.thread_time(), time.monotonic()
                with pytest.raises(zcio.TimedOut) as e:
                    await aw()
                cpu, wall = time.thread_time() - cpu0, time.monotonic() - t0
                ticker.stop()
                assert isinstance(e.value, TimeoutError)
                assert wall >= 0.5
                assert ticker.ticks >= 20, f"the loop was blocked: {ticker.ticks} ticks in {wall:.3f} s"
                assert cpu < 0.25 * wall, f"{cpu:.3f} s of CPU in {wall:.3f} s of waiting"

    asyncio.run(main())
    c.kill()


# --- in one process ------------------------------------------------------------


def test_timeouts_forms_and_errors_in_one_process(sock_path):
    a, b = pair(sock_path)

    async def main() -> None:
        with pytest.raises(zcio.Empty):
            await a.recv_async(timeout=0)
        with pytest.raises(zcio.TimedOut):
            await a.recv_async(timeout=0.05)
        with pytest.raises(zcio.Full):
            await a.send_async(1, (2,), timeout=0)
        with pytest.raises(zcio.TimedOut):
            await a.send_async(1, (2,), timeout=0.05)
        # Arguments are checked at the call, as the blocking calls do.
        with pytest.raises(ValueError):
            a.recv_async(timeout=-1)
        with pytest.raises(ValueError, match="at most 8 words"):
            a.send_async(1, range(9))
        with pytest.raises(OverflowError):
            a.call_async(-1)
        # A blocking partner in a thread: a waiting receive gets its send,
        # a waiting send is taken by its receive.
        task = asyncio.ensure_future(a.recv_async())
        await asyncio.sleep(0.05)
        assert not task.done()
        threading.Thread(target=lambda: b.send(7, (1, 2, 3), timeout=5)).start()
        m = await bounded(task, 5)
        assert (m.label, m.words) == (7, (1, 2, 3))
        got = []
        th = threading.Thread(target=lambda: (time.sleep(0.05), got.append(b.recv(timeout=5))))
        th.start()
        await a.send_async(8, timeout=5)
        th.join()
        assert (got[0].label, got[0].words) == (8, ())
        # Both endpoints in this loop: a call and a server's steps.
        server = asyncio.ensure_future(b.recv_async())
        call = asyncio.ensure_future(a.call_async(5, (6,)))
        m = await bounded(server, 5)
        assert (m.label, m.words) == (5, (6,))
        nxt = asyncio.ensure_future(b.reply_and_recv_async(0, (m.words[0] + 1,)))
        r = await bounded(call, 5)
        assert (r.label, r.words) == (0, (7,))
        await a.send_async(9, timeout=5)
        assert (await bounded(nxt, 5)).label == 9
        # Our own close wakes a waiting task: Disconnected; async for ends.
        task = asyncio.ensure_future(a.recv_async())
        it = asyncio.ensure_future(collect(b))
        await asyncio.sleep(0.05)
        threading.Thread(target=a.close).start()
        with pytest.raises(zcio.Disconnected):
            await bounded(task, 5)
        assert await bounded(it, 5) == []  # the partner hung up
        with pytest.raises(ValueError, match="closed"):
            a.recv_async()
        assert [m async for m in a] == []  # closed: nothing to iterate

    asyncio.run(main())
    b.close()


async def collect(ep) -> list:
    return [m async for m in ep]


def test_sends_take_turns(sock_path):
    """A begun send is the endpoint's one message in flight: another
    send_begin is refused (Full), a blocking send in another thread waits
    behind it, and two tasks' send_async go one after the other."""
    a, b = pair(sock_path)
    seq = a.send_begin(1, (1,))
    with pytest.raises(zcio.Full, match="in progress"):
        a.send_begin(2)
    with pytest.raises(ValueError, match="not in progress"):
        a.send_poll(seq + 1)
    assert a.send_poll(seq) is False  # not taken yet
    # A blocking send waits for its turn (it never overwrites our message).
    done = threading.Event()
    th = threading.Thread(target=lambda: (a.send(2, (2,), timeout=5), done.set()))
    th.start()
    time.sleep(0.1)
    assert not done.is_set()
    with pytest.raises(zcio.Full):
        a.send(3, timeout=0)
    m = b.recv(timeout=5)
    assert (m.label, m.words) == (1, (1,))
    assert a.send_poll(seq) is True  # taken: over
    with pytest.raises(ValueError, match="not in progress"):
        a.send_poll(seq)
    m = b.recv(timeout=5)
    assert (m.label, m.words) == (2, (2,))
    th.join()
    # send_cancel: taken back before the partner looked; after it took it,
    # False (delivered).
    seq = a.send_begin(4)
    assert a.send_cancel(seq) is True
    with pytest.raises(zcio.Empty):
        b.recv(timeout=0)
    seq = a.send_begin(5)
    m = b.recv(timeout=5)
    assert m.label == 5
    assert a.send_cancel(seq) is False

    async def main() -> None:
        s1 = asyncio.ensure_future(a.send_async(10))
        s2 = asyncio.ensure_future(a.send_async(11))
        await asyncio.sleep(0.05)
        assert not s1.done() and not s2.done()
        labels = [(await asyncio.to_thread(b.recv, 5)).label for _ in range(2)]
        await bounded(asyncio.gather(s1, s2), 5)
        assert labels == [10, 11]

    asyncio.run(main())
    a.close()
    b.close()


def recv_in_my_loop(ep, sel):
    """The example of docs/python.md ("A loop of your own", rendezvous), as
    printed."""
    fd = ep.doorbell()
    sel.register(fd, selectors.EVENT_READ)
    hung_up = False
    try:
        while True:
            try:
                return ep.recv(timeout=0)  # 1. try (Disconnected once the partner is gone)
            except zcio.Empty:
                pass
            if not ep.prepare_recv_sleep():  # 2. a message came meanwhile
                continue
            if hung_up:
                time.sleep(0.05)  # a hung-up doorbell stays readable: use a timer
            else:
                sel.select()  # 3. wait (your loop serves its other fds here)
            hung_up |= ep.doorbell_rang()  # 4. take the rings, then try again
    finally:
        sel.unregister(fd)


def send_in_my_loop(ep, sel, label, words=()):
    """A send in three steps, as docs/python.md prints it."""
    fd = ep.doorbell()
    seq = ep.send_begin(label, words)  # 1. the message in the slot
    sel.register(fd, selectors.EVENT_READ)
    try:
        while not ep.send_poll(seq):  # 2. taken? (Disconnected: taken back)
            sel.select(timeout=0.05)  # 3. wait for the doorbell
            ep.doorbell_rang()
    except BaseException:
        ep.send_cancel(seq)  # give up: taken back unless it was delivered
        raise
    finally:
        sel.unregister(fd)


def test_the_doorbell_calls_in_a_loop_of_your_own(sock_path):
    a, b = pair(sock_path)
    sel = selectors.DefaultSelector()
    fd = a.doorbell()
    assert fd == a.doorbell() and fd >= 0
    assert a.doorbell_rang() is False  # nothing rang: harmless
    threading.Timer(0.05, lambda: b.send(1, (2,), timeout=5)).start()
    m = recv_in_my_loop(a, sel)
    assert (m.label, m.words) == (1, (2,))
    got = []
    threading.Timer(0.05, lambda: got.append(b.recv(timeout=5))).start()
    send_in_my_loop(a, sel, 3, (4, 5))
    time.sleep(0.05)
    assert (got[0].label, got[0].words) == (3, (4, 5))
    b.close()
    with pytest.raises(zcio.Disconnected):
        recv_in_my_loop(a, sel)
    with pytest.raises(zcio.Disconnected):
        send_in_my_loop(a, sel, 6)
    sel.close()
    a.close()
