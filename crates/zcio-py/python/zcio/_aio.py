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

:class:`Bell` is one end's doorbell in the loop (the Python twin of the
Rust ``zcio::tokio`` doorbell, ``crates/zcio/src/tokio/doorbell.rs``, with
the same rules): any number of tasks may wait on one end at once (one
``add_reader`` for all of them; a wake wakes them all, since
``doorbell_rang()`` clears every flag of the end), and it guards the loop
against the peer. A wake that finds nothing is *futile*; after
:data:`FLOOD_LIMIT` futile wakes in a row (a peer ringing in a flood), or
once the doorbell hung up while the peer lives on (it closed only its
bell), the waiters look every :data:`LIVENESS` seconds on a timer instead:
the loop neither spins nor hangs. A wake that finds something restores
trust (unless the bell is dead).

Rings and rendezvous endpoints get the same shape: an end with
``doorbell()``, ``doorbell_rang()``, ``disconnected`` and its
``prepare_*_sleep`` calls, driven by :func:`until_done` with its own
``attempt`` and ``prepare``.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Callable, Protocol

from ._errors import Disconnected, Empty, Full, PoolExhausted, TimedOut

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


class End(Protocol):
    """What :class:`Bell` needs of a transport end."""

    def doorbell(self) -> int: ...
    def doorbell_rang(self) -> bool: ...
    @property
    def disconnected(self) -> bool: ...


class Bell:
    """One end's doorbell in an asyncio loop: who waits, and whether the
    bell is trusted. Used from the loop's thread, except :meth:`closed`.

    Attributes: ``futile`` (futile wakes in a row), ``dead`` (the doorbell
    hung up while the peer lived on: never trusted again), ``wakes`` (every
    wake so far, doorbell or timer; for tests).
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
        "_timer",
    )

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
        self._timer: asyncio.TimerHandle | None = None

    def distrusted(self) -> bool:
        """Whether waits go by the timer instead of the doorbell."""
        return self.dead or self.futile >= FLOOD_LIMIT

    def record(self, found: bool) -> None:
        """After a wake: whether the retry found anything (a message, room,
        an error to report)."""
        self.futile = 0 if found else self.futile + 1

    async def wait(self, end: End) -> None:
        """Sleep until the doorbell rings or hangs up (or one
        :data:`LIVENESS` passes, when it is not trusted), then take the
        rings (``end.doorbell_rang()``). Call it after a ``prepare_*_sleep``
        said to sleep. Cancel-safe: a cancelled wait changes nothing but the
        registration (the last waiter to leave removes it)."""
        loop = asyncio.get_running_loop()
        if self._waiters and self._loop is not loop:
            if self._loop is not None and not self._loop.is_closed():
                raise RuntimeError("a zcio end is awaited from two event loops at once")
            # A loop closed with tasks still waiting: forget it.
            self._waiters = set()
            self._fd, self._timer, self._end = -1, None, None
        fut: asyncio.Future[None] = loop.create_future()
        if not self._waiters:
            self._register(loop, end)
        self._waiters.add(fut)
        if self.is_closed:
            # Closed (from another thread) while we set up: no hook will
            # come for this round.
            self._fire(False)
        try:
            await fut
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
        else:
            self._fd = end.doorbell()
            loop.add_reader(self._fd, self._fire, True)

    def _unregister(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._fd >= 0 and self._loop is not None:
            self._loop.remove_reader(self._fd)
        self._fd = -1
        self._end = None

    def _fire(self, from_fd: bool) -> None:
        """The doorbell is readable (`from_fd`), the timer ran out or the
        end was closed: take the rings once, wake every waiter."""
        end = self._end() if self._end is not None else None
        waiters = self._waiters
        self._waiters = set()
        self._unregister()
        self.wakes += 1
        try:
            if end is not None and end.doorbell_rang() and from_fd and not end.disconnected:
                # Hung up, yet the peer lives: it closed only its bell.
                self.dead = True
        except Exception:  # noqa: BLE001 -- the waiters' retry reports it
            pass
        finally:
            for f in waiters:
                if not f.done():
                    f.set_result(None)


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
    woke = False
    immediate = 0
    pause = 0.001
    while True:
        try:
            r = attempt()
        except BaseException:
            if woke:
                bell.record(True)
            raise
        if r is LATER:
            woke = False
            await asyncio.sleep(pause)
            pause = min(pause * 2, LIVENESS)
            continue
        if r is not AGAIN:
            if woke:
                bell.record(True)
            return r
        if woke:
            bell.record(False)
        woke = False
        if prepare():
            immediate = 0
            await bell.wait(end)
            woke = True
        else:
            immediate += 1
            if immediate % YIELD_EVERY == 0:
                # The end keeps saying "go now" and the operation keeps
                # saying "would block": do not hold the loop meanwhile.
                await asyncio.sleep(0)


async def with_timeout(timeout: float | None, what: str, coro: Any) -> Any:
    """Await `coro`, raising ``TimedOut`` after `timeout` seconds (None:
    no limit)."""
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


async def channel_next(ch: Any, bell: Bell) -> Any:
    """``Channel.__anext__``: the next message; the end of the iteration
    once the peer is gone and everything was received."""
    try:
        return await channel_recv(ch, bell, None)
    except Disconnected:
        raise StopAsyncIteration from None


async def channel_send(ch: Any, bell: Bell, data: Any, timeout: float | None, pool: Any) -> None:
    """``Channel.send_async``: `pool` is where a bytes-like `data` is
    copied to."""
    if timeout == 0.0:
        return ch.send(data, timeout=0, pool=pool)
    from ._zcio import _sendable

    sendable: list[Any] = []  # [object, slices, nbytes] once made

    def attempt() -> Any:
        if not sendable:
            try:
                sendable.extend(_sendable(data, pool))
            except PoolExhausted:
                return LATER
        try:
            ch.send(sendable[0], timeout=0)
        except Full:
            return AGAIN
        return None

    def prepare() -> bool:
        return ch.prepare_send_sleep(sendable[1], sendable[2])

    await with_timeout(timeout, "send_async", until_done(bell, ch, attempt, prepare))
