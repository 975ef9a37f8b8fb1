"""asyncio on zcio's doorbells: the waits behind ``Channel.recv_async``,
``Channel.send_async`` and ``async for msg in ch``.

A transport end in *bell mode* has a doorbell: a descriptor (one end of a
``SOCK_SEQPACKET`` pair) that becomes readable when the peer rang it -- which
it does only after this end set its sleep flag -- or when the peer hung up.
Every async call here runs the same loop, all of it in the event loop's
thread, with nothing but non-blocking calls into the library:

1. try the operation without waiting (``recv(timeout=0)``,
   ``send(…, timeout=0)``); done unless it would block;
2. set the sleep flag (``prepare_recv_sleep()``, ``prepare_send_sleep(n)``);
   if that says the operation can go now, go to 1;
3. wait until the doorbell is readable (``loop.add_reader``), then
   ``doorbell_rang()`` (drain, clear the flags, check a peer that hung up);
   go to 1.

Step 1 is the only place a message changes hands, and it has no ``await``
in it: a task cancelled anywhere (``asyncio.wait_for``, ``task.cancel()``)
took nothing and sent nothing. That is the cancel safety the methods
promise.

The ``timeout`` these coroutines get was checked and resolved by the
method that made them: a ``timeout=None`` of the caller is already the
bound the end's configuration sets (its ``recv_timeout``, ``wait_bound``
...), so here ``None`` means no limit (the caller's ``math.inf``), ``0.0``
do not wait, and a number that many seconds. ``async for`` waits for each
item as long as that bound (``TimedOut`` ends the loop).

:class:`Bell` is one end's doorbell in the loop (the Python twin of the
Rust ``zcio::tokio`` doorbell, ``crates/zcio-core/src/tokio/doorbell.rs``, with
the same rules): any number of tasks may wait on one end at once (one
``add_reader`` for all of them; a wake wakes them all, since
``doorbell_rang()`` clears every flag of the end), and it guards the loop
against the peer. A wake that finds nothing is *futile*; after
:data:`FLOOD_LIMIT` futile wakes in a row (a peer ringing in a flood), or
once the doorbell hung up while the peer lives on (it closed only its
bell), the waiters look every :data:`LIVENESS` seconds on a timer instead:
the loop neither spins nor hangs. A wake that finds something restores
trust (unless the bell is dead).

Rings and rendezvous endpoints run the same loop with their own
``attempt`` and ``prepare`` (:func:`ring_wait`, :func:`ring_write`,
:func:`rdv_recv`, :func:`rdv_send`) on a :class:`RingBell` or a
:class:`RendezvousBell`. Their doorbells belong to objects that ``close()``
destroys, so these bells register a duplicate of the descriptor (closed when
the wait ends): a close never leaves a dead number in the loop's selector. A
ring cannot hang up on a dead peer, so a :class:`RingBell` also wakes every
:data:`LIVENESS` seconds and calls ``doorbell_rang()``, which reports a
producer that died in the middle of the stream (the waiters get its
``Disconnected``) and evicts a consumer that died while a producer waited
for it. Such timer wakes are not futile: only wakes of the descriptor count
towards :data:`FLOOD_LIMIT`.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any, Callable, Protocol

from ._errors import Disconnected, Empty, Full, Lapped, PoolExhausted, TimedOut

#: Futile wakes in a row after which a doorbell is not trusted
#: (``zcio::tokio``'s ``FLOOD_LIMIT``).
FLOOD_LIMIT = 32

#: Seconds between looks while a doorbell is not trusted, and the longest
#: pause while a pool has no free buffer (``zcio::wait::LIVENESS``).
LIVENESS = 0.05

#: Immediate retries (step 2 said "go now", step 1 still would block) after
#: which a call lets the loop run other tasks before it retries again.
YIELD_EVERY = 32

#: ``attempt()`` results: wait on the doorbell / look again after a pause.
AGAIN = object()
LATER = object()

#: ``attempt()`` result of a ring iteration: the end of the stream.
END = object()


class End(Protocol):
    """What :class:`Bell` needs of a transport end."""

    def doorbell(self) -> int: ...
    def doorbell_rang(self) -> Any: ...


class Bell:
    """One end's doorbell in an asyncio loop: who waits, and whether the
    bell is trusted. Used from the loop's thread, except :meth:`closed`.

    Attributes: ``futile`` (futile wakes of the descriptor in a row),
    ``dead`` (the doorbell hung up while the peer lived on: never trusted
    again), ``wakes`` (every wake so far, doorbell or timer; for tests).

    Subclasses set :attr:`LOOK` (seconds: also wake on a timer while the
    doorbell is trusted, for peers that cannot hang up when they die) and
    :attr:`DUP` (register a duplicate of the descriptor, for ends whose
    ``close()`` closes it), and override :meth:`_rang`.
    """

    __slots__ = (
        "futile",
        "dead",
        "wakes",
        "is_closed",
        "_loop",
        "_waiters",
        "_end",
        "_fd",
        "_owned_fd",
        "_timer",
    )

    #: Seconds after which a trusted wait wakes anyway (None: never).
    LOOK: float | None = None
    #: Whether to register a duplicate of the doorbell (closed after the wait).
    DUP = False

    def __init__(self) -> None:
        self.futile = 0
        self.dead = False
        self.wakes = 0
        self.is_closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # The futures of the tasks waiting now: non-empty exactly while the
        # doorbell (or the timer) is registered with `_loop`.
        self._waiters: set[asyncio.Future[None]] = set()
        # The end while someone waits, weakly (the end holds its bell).
        self._end: weakref.ref[End] | None = None
        self._fd = -1
        self._owned_fd = False
        self._timer: asyncio.TimerHandle | None = None

    def distrusted(self) -> bool:
        """Whether waits go by the timer instead of the doorbell."""
        return self.dead or self.futile >= FLOOD_LIMIT

    def record(self, found: bool) -> None:
        """After a wake: whether the retry found anything (a message, room,
        an error to report)."""
        self.futile = 0 if found else self.futile + 1

    async def wait(self, end: End) -> bool:
        """Sleep until the doorbell rings or hangs up (or one
        :data:`LIVENESS` passes, when it is not trusted; or :attr:`LOOK`
        passes), then take the rings (``end.doorbell_rang()``). Call it
        after a ``prepare_*_sleep`` said to sleep. Returns whether the
        descriptor woke it (not a timer or a close). Raises what
        ``doorbell_rang()`` raised, for bells whose :meth:`_rang` lets it
        through (a ring's dead producer). Cancel-safe: a cancelled wait
        changes nothing but the registration (the last waiter to leave
        removes it)."""
        loop = asyncio.get_running_loop()
        if self._waiters and self._loop is not loop:
            if self._loop is not None and not self._loop.is_closed():
                raise RuntimeError("a zcio end is awaited from two event loops at once")
            # A loop closed with tasks still waiting: forget it (a
            # descriptor of our own is closed; the dead loop's selector
            # does not use it any more).
            self._waiters = set()
            if self._owned_fd and self._fd >= 0:
                os.close(self._fd)
            self._fd, self._owned_fd, self._timer, self._end = -1, False, None, None
        fut: asyncio.Future[bool] = loop.create_future()
        if not self._waiters:
            self._register(loop, end)
        self._waiters.add(fut)
        if self.is_closed:
            # Closed (from another thread) while we set up: no hook will
            # come for this round.
            self._fire(False)
        try:
            return await fut
        finally:
            if fut in self._waiters:  # left before the wake (cancelled)
                self._waiters.discard(fut)
                if not self._waiters:
                    self._unregister()

    def closed(self) -> None:
        """The end was closed (any thread): wake its waiters, which then
        see it closed. Called by ``Channel.close()``."""
        self.is_closed = True
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._wake_all)
        except RuntimeError:  # the loop closed meanwhile
            pass

    def _wake_all(self) -> None:
        if self._waiters:
            self._fire(False)

    def _register(self, loop: asyncio.AbstractEventLoop, end: End) -> None:
        self._loop, self._end = loop, weakref.ref(end)
        if self.distrusted():
            self._timer = loop.call_later(LIVENESS, self._fire, False)
            return
        fd = end.doorbell()
        if self.DUP:
            fd = os.dup(fd)
            self._owned_fd = True
        self._fd = fd
        try:
            loop.add_reader(fd, self._fire, True)
        except BaseException:
            self._unregister()
            raise
        if self.LOOK is not None:
            self._timer = loop.call_later(self.LOOK, self._fire, False)

    def _unregister(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._fd >= 0:
            try:
                if self._loop is not None and not self._loop.is_closed():
                    self._loop.remove_reader(self._fd)
            finally:
                if self._owned_fd:
                    os.close(self._fd)
        self._fd = -1
        self._owned_fd = False
        self._end = None

    def _rang(self, end: Any, from_fd: bool) -> None:
        """Take the rings after a wake (a channel: a hang-up while the peer
        lives kills the bell). Errors are left to the waiters' retry."""
        try:
            if end.doorbell_rang() and from_fd and not end.disconnected:
                # Hung up, yet the peer lives: it closed only its bell.
                self.dead = True
        except Exception:  # noqa: BLE001 -- the waiters' retry reports it
            pass

    def _fire(self, from_fd: bool) -> None:
        """The doorbell is readable (`from_fd`), a timer ran out or the
        end was closed: take the rings once, wake every waiter (with what
        :meth:`_rang` raised, if anything)."""
        end = self._end() if self._end is not None else None
        waiters = self._waiters
        self._waiters = set()
        self._unregister()
        self.wakes += 1
        err: BaseException | None = None
        try:
            if end is not None:
                self._rang(end, from_fd)
        except Exception as e:  # noqa: BLE001 -- handed to the waiters
            err = e
        finally:
            for f in waiters:
                if f.done():
                    continue
                if err is not None:
                    f.set_exception(err)
                else:
                    f.set_result(from_fd)


class RingBell(Bell):
    """A ring end's named bell in the loop: also wakes every
    :data:`LIVENESS` seconds (a ring has no connection that hangs up when
    its peer dies), and ``doorbell_rang()``'s error -- a consumer's
    producer that died in the middle of the stream -- goes to every
    waiter."""

    __slots__ = ()
    LOOK = LIVENESS
    DUP = True

    def _rang(self, end: Any, from_fd: bool) -> None:
        end.doorbell_rang()


class RendezvousBell(Bell):
    """A rendezvous endpoint's doorbell in the loop, and the turn of its
    async sends (one message in flight per direction)."""

    __slots__ = ("_send_lock",)
    DUP = True

    def __init__(self) -> None:
        super().__init__()
        self._send_lock: asyncio.Lock | None = None

    def send_lock(self) -> asyncio.Lock:
        """Serialises this endpoint's async sends (made on first use)."""
        if self._send_lock is None:
            self._send_lock = asyncio.Lock()
        return self._send_lock

    def _rang(self, end: Any, from_fd: bool) -> None:
        try:
            if end.doorbell_rang() and from_fd:
                # Hung up: the partner is gone (the retry says
                # Disconnected) or it closed only its bell. Either way the
                # descriptor stays readable: look on a timer from now on.
                self.dead = True
        except Exception:  # noqa: BLE001 -- the waiters' retry reports it
            pass


async def until_done(
    bell: Bell,
    end: End,
    attempt: Callable[[], Any],
    prepare: Callable[[], bool],
) -> Any:
    """The loop of every async call (module docs): ``attempt()`` returns the
    result, :data:`AGAIN` (it would block: ``prepare()`` then wait on the
    doorbell when it says so) or :data:`LATER` (look again after a pause:
    nothing rings for it), or raises."""
    # After a wake: True (the descriptor) or False (a timer, a close);
    # None: no wake since the last attempt. Only a descriptor's wake that
    # finds nothing is futile; any wake that finds something restores
    # trust.
    woke: bool | None = None
    immediate = 0
    pause = 0.001
    while True:
        try:
            r = attempt()
        except BaseException:
            if woke is not None:
                bell.record(True)
            raise
        if r is LATER:
            woke = None
            await asyncio.sleep(pause)
            pause = min(pause * 2, LIVENESS)
            continue
        if r is not AGAIN:
            if woke is not None:
                bell.record(True)
            return r
        if woke:
            bell.record(False)
        woke = None
        if prepare():
            immediate = 0
            woke = await bell.wait(end)
        else:
            immediate += 1
            if immediate % YIELD_EVERY == 0:
                # The end keeps saying "go now" and the operation keeps
                # saying "would block": do not hold the loop meanwhile.
                await asyncio.sleep(0)


async def with_timeout(timeout: float | None, what: str, coro: Any) -> Any:
    """Await `coro`, raising ``TimedOut`` after `timeout` seconds (None:
    no limit: the caller asked for ``math.inf``)."""
    if timeout is None:
        return await coro
    try:
        async with asyncio.timeout(timeout) as cm:
            return await coro
    except TimeoutError:
        if cm.expired():
            raise TimedOut(f"{what}: timed out after {timeout} s") from None
        raise


# --- channels --------------------------------------------------------------


async def channel_recv(ch: Any, bell: Bell, timeout: float | None) -> Any:
    """``Channel.recv_async``: `timeout` checked already (0.0: do not wait)."""
    if timeout == 0.0:
        return ch.recv(timeout=0)

    def attempt() -> Any:
        try:
            return ch.recv(timeout=0)
        except Empty:
            return AGAIN

    return await with_timeout(
        timeout,
        "recv_async",
        until_done(bell, ch, attempt, ch.prepare_recv_sleep),
    )


async def channel_next(ch: Any, bell: Bell, timeout: float | None) -> Any:
    """``Channel.__anext__``: the next message, waiting at most `timeout`
    (the channel's ``recv_timeout``; ``TimedOut`` after it); the end of
    the iteration once the peer is gone and everything was received."""
    try:
        return await channel_recv(ch, bell, timeout)
    except Disconnected:
        raise StopAsyncIteration from None


async def channel_send(
    ch: Any, bell: Bell, data: Any, timeout: float | None, pool: Any, parts: bool = False
) -> None:
    """``Channel.send_async`` (``sendv_async`` with `parts`: `data` is the
    list of parts): `pool` is where bytes-like data is copied to."""
    if timeout == 0.0:
        if parts:
            return ch.sendv(data, timeout=0, pool=pool)
        return ch.send(data, timeout=0, pool=pool)
    from ._zcio import _sendable, _sendable_parts

    make = _sendable_parts if parts else _sendable
    sendable: list[Any] = []  # [object, slices, nbytes] once made

    def attempt() -> Any:
        if not sendable:
            try:
                sendable.extend(make(data, pool))
            except PoolExhausted:
                return LATER
        try:
            ch.send(sendable[0], timeout=0)
        except Full:
            return AGAIN
        return None

    def prepare() -> bool:
        return ch.prepare_send_sleep(sendable[1], sendable[2])

    what = "sendv_async" if parts else "send_async"
    await with_timeout(timeout, what, until_done(bell, ch, attempt, prepare))


async def channel_sendv(ch: Any, bell: Bell, parts: Any, timeout: float | None, pool: Any) -> None:
    """``Channel.sendv_async``."""
    await channel_send(ch, bell, parts, timeout, pool, parts=True)


# --- rings -----------------------------------------------------------------


async def ring_wait(c: Any, bell: Bell, op: Callable[[], Any], timeout: float | None, what: str) -> Any:
    """``RingConsumer.read_async`` / ``readinto_async`` / ``peek_async``:
    `op` is the non-waiting read (``timeout=0``: ``Empty`` when there is
    nothing yet)."""
    if timeout == 0.0:
        return op()

    def attempt() -> Any:
        try:
            return op()
        except Empty:
            return AGAIN

    return await with_timeout(timeout, what, until_done(bell, c, attempt, c.prepare_read_sleep))


def _next_block(c: Any) -> Any:
    """The next block as bytes (a copy, taken in place and released: one
    block of a block ring, what is contiguous of a byte stream), END at
    the end of the stream, AGAIN when there is nothing yet. A block an
    overwriting producer lapped while it was copied is skipped, as
    ``read`` skips it."""
    while True:
        try:
            pk = c.peek(None, 0)
        except Empty:
            return AGAIN
        if pk is None:
            return END
        try:
            data = pk.tobytes()
            pk.release()
        except Lapped:
            continue
        finally:
            del pk
        return data


async def ring_next(c: Any, bell: Bell, timeout: float | None) -> bytes:
    """``RingConsumer.__anext__``: the next block, waiting at most
    `timeout` (the consumer's ``wait_bound``; ``TimedOut`` after it); the
    end of the iteration at the end of the stream (a producer that died or
    failed raises ``Disconnected``, after everything it wrote)."""
    r = await with_timeout(
        timeout,
        "async for",
        until_done(bell, c, lambda: _next_block(c), c.prepare_read_sleep),
    )
    if r is END:
        raise StopAsyncIteration
    return r


async def ring_reserve(p: Any, bell: Bell, n: int, timeout: float | None) -> Any:
    """``RingProducer.reserve_async`` on a ``block`` ring: the reservation
    is taken synchronously (cancel-safe: a cancelled call holds none)."""
    if timeout == 0.0:
        return p.reserve(n, timeout=0)

    def attempt() -> Any:
        try:
            return p.reserve(n, timeout=0)
        except Full:
            return AGAIN

    def prepare() -> bool:
        return p.prepare_write_sleep(n)

    return await with_timeout(timeout, "reserve_async", until_done(bell, p, attempt, prepare))


async def ring_write(p: Any, bell: Bell, data: Any, timeout: float | None, tag: int = 0) -> int:
    """``RingProducer.write_async`` on a ``block`` ring (the other
    policies never wait). A byte stream goes in pieces of at most half the
    ring, each whole or not at all; `timeout` ending part-way returns the
    bytes written, as ``write`` does."""
    mv = memoryview(data)
    try:
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        total = mv.nbytes
        if timeout == 0.0 or total == 0:
            return p.write(mv, timeout=0, tag=tag)
        done = 0

        def attempt() -> Any:
            nonlocal done
            try:
                done += p.write(mv[done:], timeout=0, tag=tag)
            except Full:
                return AGAIN
            return done if done >= total else AGAIN

        def prepare() -> bool:
            return p.prepare_write_sleep(total - done)

        try:
            return await with_timeout(timeout, "write_async", until_done(bell, p, attempt, prepare))
        except TimedOut:
            if done > 0:
                return done
            raise
    finally:
        mv.release()


# --- rendezvous ------------------------------------------------------------


def _closed_endpoint() -> Disconnected:
    return Disconnected("the rendezvous endpoint was closed")


async def rdv_recv(ep: Any, bell: Bell, timeout: float | None) -> Any:
    """``Rendezvous.recv_async``: `timeout` checked already (0.0: do not
    wait). An endpoint closed while the call waits raises
    ``Disconnected``."""
    if timeout == 0.0:
        return ep.recv(timeout=0)

    def attempt() -> Any:
        if ep.closed:
            raise _closed_endpoint()
        try:
            return ep.recv(timeout=0)
        except Empty:
            return AGAIN

    def prepare() -> bool:
        if ep.closed:
            return False
        return ep.prepare_recv_sleep()

    return await with_timeout(timeout, "recv_async", until_done(bell, ep, attempt, prepare))


async def rdv_next(ep: Any, bell: Bell, timeout: float | None) -> Any:
    """``Rendezvous.__anext__``: the next message, waiting at most
    `timeout` (the endpoint's ``recv_timeout``; ``TimedOut`` after it);
    the end of the iteration once the partner is gone (or the endpoint was
    closed)."""
    try:
        return await rdv_recv(ep, bell, timeout)
    except Disconnected:
        raise StopAsyncIteration from None


async def rdv_send(
    ep: Any, bell: RendezvousBell, label: int, words: Any, timeout: float | None, fds: Any = ()
) -> None:
    """``Rendezvous.send_async``: put the message in the slot
    (``send_begin``), wait on the doorbell until the partner took it
    (``send_poll``). `timeout` running out retracts it (``send_cancel``):
    ``TimedOut`` if it was taken back, success if the partner had taken it
    after all. A cancelled call retracts it too; if the partner had taken
    it, it was delivered (the cancellation cannot say which)."""
    if timeout == 0.0:
        return ep.send(label, words, timeout=0, fds=fds)
    seq: int | None = None

    def attempt() -> Any:
        nonlocal seq
        if seq is None:
            if ep.closed:
                raise _closed_endpoint()
            try:
                seq = ep.send_begin(label, words, fds=fds)
            except Full:
                # Another send of this endpoint (a blocking one in another
                # thread) is under way: nothing rings for its end.
                return LATER
        try:
            taken = ep.send_poll(seq)
        except BaseException:
            # Disconnected: send_poll took it back; PeerFault: the slot is
            # corrupt. Either way this send is over.
            seq = None
            raise
        if taken:
            seq = None
            return None
        return AGAIN

    async def turn() -> None:
        async with bell.send_lock():
            await until_done(bell, ep, attempt, lambda: True)

    try:
        await with_timeout(timeout, "send_async", turn())
    except TimedOut:
        if seq is not None:
            s, seq = seq, None
            if not ep.send_cancel(s):
                return  # taken after all: delivered
        raise
    except BaseException:
        if seq is not None:
            s, seq = seq, None
            ep.send_cancel(s)
        raise


#: ``rdv_call``'s `recv_timeout` when `timeout` bounds both halves together.
TOGETHER = object()


async def rdv_call(
    ep: Any,
    bell: RendezvousBell,
    label: int,
    words: Any,
    timeout: float | None,
    recv_timeout: Any = TOGETHER,
) -> Any:
    """``Rendezvous.call_async`` / ``reply_and_recv_async``: send, then
    the partner's next message; `timeout` bounds both together, unless
    `recv_timeout` is given (the caller's ``timeout=None``: `timeout` is
    the send bound, `recv_timeout` the receive bound, each on its own, as
    the blocking ``call`` does)."""
    if recv_timeout is not TOGETHER:
        await rdv_send(ep, bell, label, words, timeout)
        return await rdv_recv(ep, bell, recv_timeout)
    if timeout == 0.0:
        ep.send(label, words, timeout=0)
        return ep.recv(timeout=0)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await rdv_send(ep, bell, label, words, timeout)
    if timeout is None:
        return await rdv_recv(ep, bell, None)
    left = timeout - (loop.time() - t0)
    if left <= 0:
        try:
            return ep.recv(timeout=0)
        except Empty:
            raise TimedOut(f"call_async: timed out after {timeout} s") from None
    return await rdv_recv(ep, bell, left)
