"""Type stubs of the extension module ``zcio._zcio`` (re-exported by
``zcio``). Timeouts everywhere: ``None`` waits up to the bound the call's
configuration sets (a channel's ``send_timeout``/``recv_timeout``, a ring
end's ``wait_bound``, a pool's ``alloc_timeout``, ...; ``TimedOut`` after
it), ``0`` does not wait, a number is seconds, ``math.inf`` waits without a
bound (only for peers you trust). Every wait is interruptible with
Ctrl-C."""

from __future__ import annotations

import os
from typing_extensions import Buffer  # collections.abc.Buffer from 3.12 on
from types import TracebackType
from typing import Any, Callable, Iterable, Literal, Protocol, Sequence, overload

from ._errors import ZcioError

import numpy as np
import numpy.typing as npt

__version__: str

#: Most slices one message may have (``Channel.sendv``).
MAX_SLICES: int
#: Most consumers one ring may have (Rust ``ring::Geometry::MAX_CONSUMERS``).
RING_MAX_CONSUMERS: int
#: Most source rings one index ring may point into (``Geometry::MAX_SOURCES``).
RING_MAX_SOURCES: int
#: Bytes of the header before each block of a variable ring (``Geometry::BLOCK_HEADER_LEN``).
RING_BLOCK_HEADER_LEN: int
#: Largest data area of a ring in bytes (``Geometry::MAX_DATA_LEN``).
RING_MAX_DATA_LEN: int
#: Most descriptor entries of a ring (``Geometry::MAX_DESCRIPTORS``).
RING_MAX_DESCRIPTORS: int
#: Largest slot of a slotted ring in bytes (``Geometry::MAX_SLOT_SIZE``).
RING_MAX_SLOT_SIZE: int
#: Most descriptors one rendezvous message may carry (``Rendezvous.send(fds=)``).
MAX_FDS: int

def page_size() -> int:
    """The system page size in bytes (the granularity of buffers and ring
    data areas)."""

def set_non_dumpable() -> None:
    """Mark this process non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): no
    core dump and no ptrace attach by other processes of the same user, so
    the bytes it maps from peers cannot be read through ``/proc/PID/mem``.
    Cannot be undone. ``OSError`` if the kernel refuses."""

class _Fileno(Protocol):
    def fileno(self) -> int: ...

class _IsSet(Protocol):
    def is_set(self) -> bool: ...

class ChannelPolicy:
    """How a channel end notifies, batches, spins, treats a full ring and
    bounds the peer's holds (Rust's ``zcio::ChannelPolicy``). Frozen;
    invalid values raise ``ValueError`` saying what is allowed."""

    def __init__(
        self,
        *,
        notify: Literal["now", "defer"] = "now",
        wake_batch: int = 1,
        max_age: float = 0.001,
        spin: float | None = None,
        full: Literal["block", "fail"] = "block",
        hold_limit: float | None = None,
        on_hold_expiry: Literal["reclaim", "abort"] = "reclaim",
        futile_wake_limit: int = 64,
    ) -> None:
        """``notify="defer"`` wakes a sleeping receiver once ``wake_batch``
        messages wait or the oldest is ``max_age`` seconds old (or on
        ``flush()``); ``spin``: seconds a wait spins before sleeping
        (``None``: the process's spin policy); ``full="fail"``: a send into
        a full ring raises ``Full`` at once whatever its timeout;
        ``hold_limit``: seconds the peer may hold a lent buffer (``None``:
        no limit), then ``on_hold_expiry`` reclaims it or aborts the
        channel; ``futile_wake_limit``: wakes that found nobody asleep
        before the peer's sleep flag is distrusted."""
    @property
    def notify(self) -> str: ...
    @property
    def wake_batch(self) -> int: ...
    @property
    def max_age(self) -> float: ...
    @property
    def spin(self) -> float: ...
    @property
    def full(self) -> str: ...
    @property
    def hold_limit(self) -> float | None: ...
    @property
    def on_hold_expiry(self) -> str: ...
    @property
    def futile_wake_limit(self) -> int: ...

class AccessPolicy:
    """Who may connect to a listener (Rust's ``zcio::AccessPolicy``): a
    process whose uid is in ``uids`` or whose gid is in ``gids``
    (``uids=None``: this process's effective uid, the default of every
    listener). A policy that admits nobody raises ``ValueError``."""

    def __init__(self, uids: Iterable[int] | None = None, gids: Iterable[int] = ()) -> None: ...
    @property
    def uids(self) -> list[int]: ...
    @property
    def gids(self) -> list[int]: ...
    def allows(self, uid: int, gid: int) -> bool: ...

class Pool:
    """A pool of shared-memory buffers that stay mapped in every process
    they were sent to, so reusing one costs no mapping work.

    ``secured=True``: each buffer is a fresh region sealed by the kernel
    when sent (receivers see ``msg.secured`` and can trust the bytes not to
    change); slower, never recycled in place.
    """

    def __init__(
        self,
        name: str | None = None,
        secured: bool = False,
        chunk_size: int = 16 << 20,
        max_chunks: int = 16,
        populate: bool = True,
        *,
        alloc_timeout: float | None = None,
    ) -> None:
        """``alloc_timeout``: the bound (seconds) of ``alloc`` and ``empty``
        with ``timeout=None`` (default 10 s; ``math.inf``: none)."""
    @property
    def name(self) -> str: ...
    @property
    def secured(self) -> bool: ...
    @property
    def alloc_timeout(self) -> float: ...
    def alloc(self, n: int, timeout: float | None = None) -> PoolBuffer:
        """A writable buffer of ``n`` bytes. Raises ``PoolExhausted``
        (``timeout=0``) or ``AllocTimedOut`` when the pool stays full
        (``timeout=None``: for ``alloc_timeout``, 10 s unless set)."""
    def empty(
        self,
        shape: int | Sequence[int],
        dtype: npt.DTypeLike = None,
        timeout: float | None = None,
    ) -> np.ndarray[Any, Any]:
        """An uninitialised C-ordered array (default float64) whose memory
        is a buffer of this pool: ``Channel.send_array`` sends it without a
        copy (and marks it read-only)."""
    def stats(self) -> dict[str, Any]:
        """chunks, bytes_total, bytes_free, buffers_in_use, bytes_in_use,
        allocs, quick_hits, exhausted, buffers_retired, bytes_retired,
        held_per_peer (list of (peer, count))."""
    def reclaim(self) -> int:
        """Process deallocation notices now; returns buffers freed."""
    def huge_pages(self) -> dict[str, Any]:
        """Whether the chunks are mapped with transparent huge pages: the
        system's setting for shared memory, the chunks' bytes and the bytes
        mapped with huge pages now."""

class PoolBuffer(Buffer):
    """A pool buffer: writable through the buffer protocol until sent;
    ``Channel.send`` freezes it (read-only from then on, sendable again
    without a copy). Its memory is never reused while this object lives."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def truncate(self, n: int) -> None:
        """Shorten the buffer to ``n`` bytes before sending it (reserve a
        large buffer, fill part of it, send that part); no effect if ``n >=
        len``. ``BufferError`` once sent or while memoryviews of it exist."""
    @property
    def sent(self) -> bool: ...
    @property
    def secured(self) -> bool: ...

class Msg(Buffer):
    """A received message, read in place through the buffer protocol
    (read-only; a writable request raises ``BufferError``). The sender's
    buffer is freed only when this object and every view of it are gone.
    A message of several slices exports one contiguous private copy, made
    once."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    @property
    def volatile(self) -> bool:
        """True when the originator kept a writable mapping: the bytes
        could still change while read. Use ``secure()`` before validating."""
    @property
    def secured(self) -> bool:
        """True when every byte is in kernel-sealed memory."""
    @property
    def nslices(self) -> int: ...
    @property
    def released(self) -> bool: ...
    def slices(self) -> list[MsgView]:
        """Each slice as a read-only range in place (several for a
        ``Channel.sendv`` message); each keeps the message from being
        released while it lives."""
    def write_to(self, fd: int | _Fileno) -> int:
        """``writev(2)`` straight from the shared pages to ``fd`` (an int or
        an object with ``fileno()``); the bytes written, possibly short.
        The GIL is released."""
    def tobytes(self) -> bytes: ...
    def secure(self) -> Msg:
        """Bytes that cannot change: shared in place when already immutable
        (sealed, or made by this process), else one private copy."""
    def split(self, at: int) -> tuple[Msg, Msg]:
        """``[0, at)`` and ``[at, len)`` as two messages over the same
        buffers (no byte copied); this one stays. ``ValueError`` past the
        end."""
    def clip(self, front: int = 0, back: int = 0) -> Msg:
        """This message without its first ``front`` and last ``back`` bytes,
        over the same buffers (no byte copied); this one stays."""
    def units(
        self, size: int | None = None, delim: bytes | None = None
    ) -> list[MsgView | bytes]:
        """The application data units (Rust ``Msg::units``): records of
        ``size`` bytes or lines ending in the one byte ``delim``, then the
        tail that is no whole unit. A unit inside one buffer is a
        ``MsgView`` (in place); one straddling buffers is ``bytes``."""
    def copy_into(self, pool: Pool, timeout: float | None = None) -> Msg | None:
        """The bytes in one fresh buffer of ``pool`` (Rust
        ``forward::copy_into``); ``None`` if no buffer came within
        ``timeout`` (the pool's ``alloc_timeout`` by default), the message
        is empty or too large for the pool."""
    def array(self) -> npt.NDArray[Any]:
        """The array of a ``send_array`` message (what ``recv_array`` gives),
        read-only, in place; ``MalformedMessage`` if it holds none."""
    def release(self) -> None:
        """Give the buffers back now. ``BufferError`` while views exist."""
    def __enter__(self) -> Msg: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...

class MsgView(Buffer):
    """A read-only range of a received message in place: the ``.base`` of
    the arrays ``Channel.recv_array`` returns."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    @property
    def msg(self) -> Msg: ...
    @property
    def volatile(self) -> bool: ...

class Listener:
    """Accepts channels on a Unix socket path (replaced if stale; the file
    is removed on close)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        send_timeout: float | None = None,
        recv_timeout: float | None = None,
        accept_timeout: float | None = None,
        access: AccessPolicy | None = None,
        policy: ChannelPolicy | None = None,
        ring_entries: int | None = None,
        notice_entries: int | None = None,
        connect_timeout: float | None = None,
        max_in_flight: int | None = None,
        max_bytes_in_flight: int | None = None,
        populate: bool | None = None,
        liveness_interval: float | None = None,
        max_region_len: int | None = None,
        lane_slots: int | None = None,
        lane_slot_size: int | None = None,
    ) -> None:
        """The bounds (seconds) of the default waits (``timeout=None``) of
        ``accept`` and of the channels it accepts: ``send_timeout`` (10 s),
        ``recv_timeout`` (one hour), ``accept_timeout`` (one hour);
        ``math.inf``: no bound. ``access``: who may connect (default: this
        uid). The other options are the rest of the accepted channels'
        configuration (Rust's ``ChannelConfig``; ``None``: its default):
        ``ring_entries``/``notice_entries`` (powers of two, 8 to 2**20; a
        connector's may be at most 4x the listener's), ``max_in_flight``,
        ``max_bytes_in_flight``, ``populate``, ``liveness_interval``,
        ``max_region_len``, the small-message lane (``lane_slots``,
        ``lane_slot_size``; 0 turns it off). Unknown keywords raise
        ``TypeError``, invalid values ``ValueError``."""
    @property
    def path(self) -> str: ...
    @property
    def accept_timeout(self) -> float: ...
    def accept(self, timeout: float | None = None, pool: Pool | None = None) -> Channel: ...
    def close(self) -> None: ...
    def __enter__(self) -> Listener: ...
    def __exit__(self, *args: object) -> bool: ...

class Channel:
    """One end of a channel between two processes."""

    @staticmethod
    def connect(
        path: str | os.PathLike[str],
        timeout: float | None = None,
        pool: Pool | None = None,
        *,
        send_timeout: float | None = None,
        recv_timeout: float | None = None,
        policy: ChannelPolicy | None = None,
        ring_entries: int | None = None,
        notice_entries: int | None = None,
        connect_timeout: float | None = None,
        max_in_flight: int | None = None,
        max_bytes_in_flight: int | None = None,
        populate: bool | None = None,
        liveness_interval: float | None = None,
        max_region_len: int | None = None,
        lane_slots: int | None = None,
        lane_slot_size: int | None = None,
    ) -> Channel:
        """Connect, retrying while nobody listens at ``path`` (bounded by
        ``timeout``; ``None``: 5 s). ``send_timeout``, ``recv_timeout`` and
        the options: the channel's configuration, as for ``Listener``."""
    @staticmethod
    def pair(
        *,
        send_timeout: float | None = None,
        recv_timeout: float | None = None,
        policy: ChannelPolicy | None = None,
        ring_entries: int | None = None,
        notice_entries: int | None = None,
        connect_timeout: float | None = None,
        max_in_flight: int | None = None,
        max_bytes_in_flight: int | None = None,
        populate: bool | None = None,
        liveness_interval: float | None = None,
        max_region_len: int | None = None,
        lane_slots: int | None = None,
        lane_slot_size: int | None = None,
    ) -> tuple[Channel, Channel]: ...
    def config(self) -> dict[str, Any]:
        """The configuration in effect: ``policy`` (a ``ChannelPolicy``),
        ``access`` (an ``AccessPolicy``), the bounds in seconds and the
        other options of ``Listener``."""
    def expire_holds(self) -> int:
        """Enforce the policy's ``hold_limit`` now: how many lent buffers
        were reclaimed; ``PeerFault`` once the channel was aborted. Also
        done by every send, ``reclaim()`` and ``flush()``."""
    def health(self) -> dict[str, Any] | None:
        """The first misbehaviour of the peer detected (as in
        ``faults()``), or ``None``."""
    def faults(self) -> list[dict[str, Any]]:
        """Every kind of misbehaviour of the peer detected so far: dicts of
        ``kind`` (``"futile_wakes"``, ``"not_consuming"``,
        ``"not_releasing"``, ``"hold_expired"``, ``"holds_reclaimed"``,
        ``"corrupt"``, ``"malformed"``), ``value`` and ``message``."""
    def share_pool(self, pool: Pool) -> None:
        """Announce every current region of ``pool`` to the peer now."""
    def trust_peer(self) -> None:
        """UNSAFE opt-in: treat the peer's buffers as if they could not
        change while read. Only for peers that never write a buffer after
        sending it; never for untrusted peers (use secured pools)."""
    @property
    def peer_trusted(self) -> bool: ...
    @property
    def send_timeout(self) -> float:
        """The bound (seconds) of the default wait of the sends (``send``,
        ``send_array``, ``send_async``, a lane's ``loan``/``send``)."""
    @property
    def recv_timeout(self) -> float:
        """The bound (seconds) of the default wait of the receives
        (``recv``, ``recv_array``, ``recv_async``, ``async for``,
        ``accept_lane``, a lane's ``recv``)."""
    @property
    def pool(self) -> Pool:
        """The pool copying sends write into."""
    @property
    def peer(self) -> dict[str, int]:
        """pid, uid, gid of the peer (from the kernel)."""
    @property
    def disconnected(self) -> bool: ...
    def send(
        self,
        data: Buffer | PoolBuffer | Msg,
        timeout: float | None = None,
        pool: Pool | None = None,
    ) -> None:
        """Send bytes (copied once into a pool buffer), a PoolBuffer (no
        copy; frozen) or a received Msg (forwarded, no copy)."""
    def sendv(
        self,
        parts: Iterable[Buffer | PoolBuffer | Msg],
        timeout: float | None = None,
        pool: Pool | None = None,
    ) -> None:
        """Send several buffers as ONE message (the receiver's ``Msg`` has
        them as ``slices()``): PoolBuffers (no copy), received Msgs
        (forwarded) and bytes-like parts (copied once). At most
        ``MAX_SLICES`` slices (``ValueError``)."""
    def send_array(
        self,
        arr: npt.ArrayLike,
        timeout: float | None = None,
        pool: Pool | None = None,
    ) -> None:
        """Send an array with its dtype, shape and strides: one copy into a
        pool buffer, or none for an array from ``Pool.empty`` (then marked
        read-only). Never pickled; object and structured dtypes are
        refused (TypeError)."""
    def recv(self, timeout: float | None = None) -> Msg: ...
    def recv_array(self, timeout: float | None = None) -> np.ndarray[Any, Any]:
        """A read-only array over the received bytes in place; its
        ``.base`` (a MsgView) keeps the message. ``MalformedMessage`` if the
        header does not validate."""
    def reclaim(self) -> int: ...
    def flush(self) -> None: ...
    def stats(self) -> dict[str, Any]: ...
    def fileno(self) -> int: ...
    def endpoint(
        self,
        output: SemanticsName = "emulated-copy",
        input: SemanticsName = "emulated-copy",
        arena_capacity: int = 64 << 20,
        hello_timeout: float = 10.0,
        trust_peer: bool = False,
        ignore_cost_model: bool = False,
        rewrite_tolerance: float | None = None,
    ) -> SemanticEndpoint:
        """Hand this channel to a SemanticEndpoint (the same as
        ``SemanticEndpoint(self, ...)``); the Channel object is unusable
        afterwards (ValueError)."""
    def open_lane(self, slots: int = 64, slot_size: int = 4096) -> LaneSender:
        """Open a lane to the peer: ``slots`` slots of ``slot_size`` bytes in
        memory only this process can write — the channel's fast path for
        small messages. The peer takes it with ``accept_lane``."""
    def accept_lane(self, timeout: float | None = None) -> LaneReceiver:
        """Take the next lane the peer opened."""
    async def recv_async(self, timeout: float | None = None) -> Msg:
        """The next message, waiting in the running asyncio loop on the
        doorbell (``loop.add_reader``) without blocking it; ``timeout`` and
        exceptions as for ``recv``. Cancel-safe: a cancelled call took no
        message (the next call gets it)."""
    async def send_async(
        self,
        data: Buffer | PoolBuffer | Msg,
        timeout: float | None = None,
        pool: Pool | None = None,
    ) -> None:
        """Send as ``send`` does, waiting in the running asyncio loop while
        the ring is full or the peer holds as much as it may. Cancel-safe:
        sent if the await returned, not sent at all if it was cancelled or
        raised."""
    async def sendv_async(
        self,
        parts: Iterable[Buffer | PoolBuffer | Msg],
        timeout: float | None = None,
        pool: Pool | None = None,
    ) -> None:
        """``sendv`` in the running asyncio loop, as ``send_async``."""
    def __aiter__(self) -> Channel: ...
    async def __anext__(self) -> Msg:
        """``async for msg in ch``: ends once the peer is gone and
        everything it sent was received; each message waits up to
        ``recv_timeout`` (``TimedOut`` ends the loop). Cancel-safe."""
    def doorbell(self) -> int:
        """This end's doorbell (readable when the peer rang it or hung
        up), for your own event loop; switches the end to bell mode. Do
        not close it."""
    def prepare_recv_sleep(self) -> bool:
        """Set the sleep flag before waiting on the doorbell; False: a
        message is pending, receive it instead."""
    def prepare_send_sleep(self, slices: int = 1, nbytes: int = 0) -> bool:
        """Set the sleep flag before waiting for room for a message of
        ``slices`` slices; False: it may be sent now. ``Disconnected`` when
        it never can."""
    def doorbell_rang(self) -> bool:
        """After the doorbell was readable: drain it, clear the sleep
        flags, check a peer that hung up. True: it hung up (look again on a
        timer from then on, not on the descriptor)."""
    def close(self) -> None: ...
    def __enter__(self) -> Channel: ...
    def __exit__(self, *args: object) -> bool: ...

class LaneSender:
    """The sending end of a lane. One loan at a time: a new ``loan`` (or
    ``send``) gives an unsent one back."""

    def loan(self, timeout: float | None = None) -> LaneLoan:
        """A free slot to fill in place (waits for the receiver to release
        one)."""
    def send(self, data: Buffer, timeout: float | None = None) -> None:
        """Copy ``data`` into a slot and send it."""
    @property
    def slot_size(self) -> int: ...
    @property
    def slots(self) -> int: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...
    def __enter__(self) -> LaneSender: ...
    def __exit__(self, *args: object) -> bool: ...

class LaneLoan(Buffer):
    """A slot lent for filling: writable through the buffer protocol
    (``slot_size`` bytes) until sent or cancelled; not sent while a
    memoryview of it is alive."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def send(self, n: int) -> None:
        """Send the first ``n`` bytes."""
    def cancel(self) -> None: ...
    @property
    def active(self) -> bool: ...

class LaneReceiver:
    """The receiving end of a lane. One message at a time: ``recv``
    releases the one before (refused while memoryviews of it are alive)."""

    def recv(self, timeout: float | None = None) -> LaneMsg: ...
    @property
    def slot_size(self) -> int: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...
    def __enter__(self) -> LaneReceiver: ...
    def __exit__(self, *args: object) -> bool: ...

class LaneMsg(Buffer):
    """A received lane message, read in place (read-only buffer over the
    sender's slot; the sender could still write it: copy out what you
    validate). ``release()`` (or leaving its ``with``) gives the slot back."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __bytes__(self) -> bytes: ...
    def release(self) -> None: ...
    @property
    def held(self) -> bool: ...
    def __enter__(self) -> LaneMsg: ...
    def __exit__(self, *args: object) -> bool: ...

class RingProducer:
    """The producer of a named ring (a file under /dev/shm, or
    ``$ZCIO_RING_DIR``), one per ring at a time."""

    def __init__(
        self,
        name: str,
        size: int = 1 << 20,
        create: bool = True,
        mode: int = 0o600,
        policy: Literal["block", "srp", "frp", "mrp"] = "block",
        layout: Literal["continuous", "slotted", "variable", "descriptors", "index"] = "continuous",
        slot_size: int = 2048,
        entries: int = 4096,
        exclusive: bool = False,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def layout(self) -> str: ...
    @property
    def policy(self) -> str: ...
    @property
    def wait_bound(self) -> float:
        """The bound (seconds) of the default wait (``timeout=None``) of
        ``write``, ``write_async`` and ``wait_for_consumers``: 10 s unless
        set (``math.inf``: none, for consumers you trust)."""
    @wait_bound.setter
    def wait_bound(self, seconds: float) -> None: ...
    def write(self, data: Buffer, timeout: float | None = None, *, tag: int = 0) -> int:
        """Write one block (continuous rings: a stream chunk; a short
        count when the timeout ends part-way); ``tag`` classifies it
        (``Peek.tag``). Index rings take only ``splice``."""
    def write_gather(
        self, parts: Iterable[Buffer], timeout: float | None = None, *, tag: int = 0
    ) -> int:
        """Write ``parts`` one after the other as ONE block; its length."""
    def splice(self, peek: Peek, timeout: float | None = None) -> None:
        """Write the block ``peek`` holds (from a consumer of another ring)
        here: a pointer to it in an ``"index"`` ring (no copy), a copy with
        its tag in any other. The peek stays held."""
    def reserve(self, n: int, timeout: float | None = None) -> RingReservation:
        """Room for a block of up to ``n`` bytes straight in the ring, to
        fill through the buffer protocol and ``commit``. While it is open,
        writes and ``close()`` raise ``BufferError``. Not for index rings."""
    async def reserve_async(self, n: int, timeout: float | None = None) -> RingReservation:
        """``reserve`` in the running asyncio loop, as ``write_async``
        waits. Cancel-safe."""
    async def write_async(
        self, data: Buffer, timeout: float | None = None, *, tag: int = 0
    ) -> int:
        """``write`` in the running asyncio loop: a ``block`` ring without
        room waits on the producer's named bell (``loop.add_reader``, and a
        look every 50 ms that evicts a consumer that died) without blocking
        the loop; the other policies never wait. Cancel-safe for one piece
        (a block, or at most half of a continuous ring); a longer stream
        write cancelled part-way has written its first pieces."""
    def doorbell(self) -> int:
        """The producer's named bell, for your own event loop (readable
        when a consumer made room after ``prepare_write_sleep``); wait for
        it or 50 ms, whichever first. Do not close it."""
    def prepare_write_sleep(self, nbytes: int) -> bool:
        """Flag the slowest consumer before waiting for room for
        ``nbytes``; False: it fits now (or the policy never waits)."""
    def doorbell_rang(self) -> None:
        """After the bell was readable or 50 ms passed: drain it, clear the
        flag, evict the consumer waited for if it died."""
    @property
    def _aio_bell(self) -> Any: ...
    def consumers(self) -> int: ...
    def wait_for_consumers(self, n: int, timeout: float | None = None) -> int: ...
    def stats(self) -> dict[str, int]:
        """The live counters (what ``zcio ls`` shows): blocks, bytes,
        would_block, timed_out, consumers, head, capacity_bytes."""
    def fileno(self) -> int: ...
    def close(self) -> None: ...
    def close_with_error(self, code: int) -> None: ...
    def unlink(self) -> None: ...
    def __enter__(self) -> RingProducer: ...
    def __exit__(self, *args: object) -> bool: ...

class RingConsumer:
    """A consumer of a named ring, with its own cursor."""

    def __init__(
        self,
        name: str,
        start: Literal["newest", "oldest"] = "newest",
        timeout: float | None = 0.0,
    ) -> None:
        """``timeout``: how long to wait for the ring to appear (default:
        not at all; ``None``: up to a consumer's default bound, one
        hour)."""
    @property
    def name(self) -> str: ...
    @property
    def position(self) -> int: ...
    @property
    def wait_bound(self) -> float:
        """The bound (seconds) of the default wait (``timeout=None``) of
        ``read``, ``readinto``, ``peek``, their async forms and ``async
        for``: one hour unless set (``math.inf``: none, for a producer you
        trust)."""
    @wait_bound.setter
    def wait_bound(self, seconds: float) -> None: ...
    def read(self, n: int, timeout: float | None = None) -> bytes:
        """The next block (continuous rings: up to ``n`` bytes); ``b""`` at
        the end of the stream."""
    def readinto(self, buf: Buffer, timeout: float | None = None) -> int: ...
    def peek(self, max: int | None = None, timeout: float | None = None) -> Peek | None:
        """The next block in place (``None`` at the end of the stream);
        release it before reading on."""
    def seek(self, to: Literal["newest", "oldest"] | int) -> int:
        """Move the cursor: to an end, or by a relative distance (blocks,
        or bytes for continuous rings; negative goes back), clamped to the
        data the ring holds. ``OverflowError`` beyond 2**64 - 1 either
        way."""
    def stats(self) -> dict[str, int]: ...
    def fileno(self) -> int:
        """The consumer's doorbell, readable while news waits (data or the
        end of the stream): poll it, then read with ``timeout=0`` until
        ``Empty``, which re-arms it. The same fd as ``doorbell()``."""
    async def read_async(self, n: int, timeout: float | None = None) -> bytes:
        """``read`` in the running asyncio loop, waiting on the consumer's
        named bell (``loop.add_reader``) without blocking it; every 50 ms it
        also looks for a producer that died (``Disconnected``). Cancel-safe:
        a cancelled call consumed nothing."""
    async def readinto_async(self, buf: Buffer, timeout: float | None = None) -> int:
        """``readinto`` in the running asyncio loop; as ``read_async``."""
    async def peek_async(self, max: int | None = None, timeout: float | None = None) -> Peek | None:
        """``peek`` in the running asyncio loop; as ``read_async``."""
    def __aiter__(self) -> RingConsumer: ...
    async def __anext__(self) -> bytes:
        """``async for block in cons``: each block as bytes until the end
        of the stream; a producer that died or failed raises
        ``Disconnected`` after its data. Each block waits up to
        ``wait_bound`` (``TimedOut`` ends the loop). Cancel-safe."""
    def doorbell(self) -> int:
        """The consumer's named bell, for your own event loop (readable
        when the producer published after ``prepare_read_sleep``); wait for
        it or 50 ms, whichever first. Do not close it."""
    def prepare_read_sleep(self) -> bool:
        """Arm the bell before waiting; False: data came, read it."""
    def doorbell_rang(self) -> None:
        """After the bell was readable or 50 ms passed: drain it; raises
        ``Disconnected`` if the producer died in the middle of the
        stream."""
    @property
    def _aio_bell(self) -> Any: ...
    def close(self) -> None: ...
    def __enter__(self) -> RingConsumer: ...
    def __exit__(self, *args: object) -> bool: ...

class Peek(Buffer):
    """A ring block read in place (read-only, always volatile). After
    ``release()`` the block is no longer yours: ``len()``, the buffer
    protocol (``bytes(pk)``, ``memoryview(pk)``), ``tobytes()`` and
    ``is_intact()`` raise ``ValueError``. ``release()`` raises
    ``BufferError`` while views taken before it are alive."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    @property
    def tag(self) -> int: ...
    @property
    def volatile(self) -> bool: ...
    @property
    def released(self) -> bool: ...
    def is_intact(self) -> bool: ...
    def tobytes(self) -> bytes: ...
    def array(self) -> npt.NDArray[Any]:
        """The ``send_array`` array this block holds (a Zenoh bridge imports
        one as header + payload), read-only, in place: the header is copied
        out and validated (``MalformedMessage`` if invalid). Its ``.base`` is
        a ``PeekView`` that counts as a view of the block: ``release()`` is
        refused while the array lives."""
    def release(self) -> None:
        """Move past the block; ``Lapped`` if it was overwritten meanwhile,
        ``BufferError`` while views exist."""
    def __enter__(self) -> Peek: ...
    def __exit__(self, *args: object) -> bool: ...

class PeekView(Buffer):
    """A read-only range of a peeked ring block in place: the ``.base`` of
    the arrays ``Peek.array()`` returns. Keeps its ``Peek`` (and the ring's
    mapping) alive and the block held while it lives."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    @property
    def peek(self) -> Peek: ...
    @property
    def volatile(self) -> bool: ...

class RingReservation(Buffer):
    """Room reserved in a ring (``RingProducer.reserve``): writable through
    the buffer protocol until ``commit`` or ``cancel``, which are refused
    (``BufferError``) while views of it exist; afterwards the buffer
    protocol and ``commit`` raise ``ValueError``. Leaving its ``with``
    block cancels it if it was not committed."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    @property
    def capacity(self) -> int: ...
    @property
    def committed(self) -> bool: ...
    def commit(self, nbytes: int | None = None, tag: int = 0) -> None:
        """Publish the first ``nbytes`` bytes (default all) as one block."""
    def cancel(self) -> None:
        """Give the room back, publishing nothing."""
    def __enter__(self) -> RingReservation: ...
    def __exit__(self, *args: object) -> bool: ...

def ring_unlink(name: str) -> None: ...
def ring_list() -> list[str]: ...
def ring_stat(name: str) -> dict[str, Any]:
    """A snapshot of a ring without attaching (``zcio ring stat``): name,
    layout, policy, size, slot_size, max_block, uid, gid, mode, producer
    (pid, state, error, other_pid_namespace), head, fill, blocks, bytes,
    dropped_blocks, dropped_bytes, consumers (list of dicts)."""
def ring_dir() -> str:
    """The directory of ring files (``$ZCIO_RING_DIR``, else /dev/shm)."""
def ring_path(name: str) -> str:
    """The file of ring ``name``; ``ValueError`` for an invalid name."""

# --- rendezvous and asynchronous IPC --------------------------------------

class Envelope:
    """A rendezvous message: a label and up to 8 words, each an unsigned
    64-bit int. Immutable, hashable, picklable (label and words; equality
    ignores descriptors). More than 8 words raise ``ValueError``; negative
    or too large ints raise ``OverflowError``. Descriptors a partner
    attached stay in the envelope until ``take_fds()``; the ones not taken
    close with it (never leaked)."""

    def __init__(self, label: int, words: Iterable[int] = ()) -> None: ...
    @property
    def label(self) -> int: ...
    @property
    def words(self) -> tuple[int, ...]: ...
    @property
    def fds(self) -> tuple[int, ...]:
        """The descriptors not taken yet (still the envelope's)."""
    def take_fds(self) -> list[int]:
        """The descriptors, now the caller's (``os.close`` each)."""
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class RendezvousListener:
    """Accepts rendezvous connections on a Unix socket path (same uid only;
    a stale socket file is replaced; removed on close)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        send_timeout: float | None = None,
        recv_timeout: float | None = None,
        accept_timeout: float | None = None,
        access: AccessPolicy | None = None,
    ) -> None:
        """The bounds (seconds) of the default waits (``timeout=None``) of
        ``accept`` and of the endpoints it accepts: ``send_timeout`` (10 s),
        ``recv_timeout`` (one hour), ``accept_timeout`` (one hour);
        ``math.inf``: no bound. ``access``: who may connect (default: this
        uid)."""
    @property
    def path(self) -> str: ...
    @property
    def accept_timeout(self) -> float: ...
    def accept(self, timeout: float | None = None) -> Rendezvous: ...
    def close(self) -> None: ...
    def stats(self) -> dict[str, int]:
        """accepted, peers (and the traffic fields, 0: endpoints count their own)."""
    def __enter__(self) -> RendezvousListener: ...
    def __exit__(self, *args: object) -> bool: ...

class Rendezvous:
    """One end of a rendezvous connection. ``send`` returns once the
    partner has *taken* the message (unbuffered); a send that fails
    (``Full``, ``TimedOut``, ``Disconnected``) did not deliver it.
    ``timeout=0`` is the ``try_`` form (``Full`` / ``Empty``), a number the
    ``_timeout`` form (``TimedOut``), ``None`` waits up to the endpoint's
    bound (``send_timeout``, 10 s; ``recv_timeout``, one hour),
    ``math.inf`` as long as it takes. A partner that hung up or died raises
    ``Disconnected``; one that broke the protocol ``PeerFault``."""

    @staticmethod
    def connect(
        path: str | os.PathLike[str],
        timeout: float | None = None,
        *,
        send_timeout: float | None = None,
        recv_timeout: float | None = None,
    ) -> Rendezvous:
        """Connect, retrying while nobody listens at ``path`` (bounded by
        ``timeout``; ``None``: 5 s). ``send_timeout``, ``recv_timeout``: the
        endpoint's bounds, as for ``RendezvousListener``."""
    @property
    def send_timeout(self) -> float: ...
    @property
    def recv_timeout(self) -> float: ...
    def send(
        self,
        label: int,
        words: Iterable[int] = (),
        timeout: float | None = None,
        *,
        fds: Iterable[int | _Fileno] = (),
    ) -> None:
        """``fds``: descriptors to pass (at most ``MAX_FDS``; the partner
        gets duplicates, the caller keeps its own)."""
    def recv(self, timeout: float | None = None) -> Envelope: ...
    def recv_into(self, buf: Buffer, timeout: float | None = None) -> tuple[int, int]:
        """Receive into ``buf`` (writable, at least 64 bytes): the words in
        native byte order; returns ``(label, nwords)``. Descriptors that
        come with it are closed."""
    def call(self, label: int, words: Iterable[int] = (), timeout: float | None = None) -> Envelope:
        """Send, then receive the partner's answer; ``timeout`` bounds both
        together (``None``: each half by its bound)."""
    @overload
    def reply_and_recv(
        self, label: int, words: Iterable[int] = (), timeout: float | None = None
    ) -> Envelope:
        """A server's step: reply, then receive the partner's next message."""
    @overload
    def reply_and_recv(
        self,
        label: int,
        words: Iterable[int] = (),
        timeout: float | None = None,
        *,
        endpoints: Sequence[Rendezvous],
    ) -> tuple[int, Envelope]:
        """Reply, then receive from any of ``endpoints`` (as
        :func:`recv_any`)."""
    async def recv_async(self, timeout: float | None = None) -> Envelope:
        """``recv`` in the running asyncio loop, waiting on the doorbell
        (``loop.add_reader``) without blocking it. Cancel-safe: a cancelled
        call took no message."""
    async def send_async(
        self,
        label: int,
        words: Iterable[int] = (),
        timeout: float | None = None,
        *,
        fds: Iterable[int | _Fileno] = (),
    ) -> None:
        """``send`` in the running asyncio loop (``fds`` as for ``send``). When ``timeout`` runs out
        the message is taken back (``TimedOut``) unless the partner took it
        meanwhile (then it returns: delivered). Not cancel-safe: a cancelled
        call takes the message back if it was not taken yet, else it was
        delivered -- the cancellation cannot say which."""
    async def call_async(
        self, label: int, words: Iterable[int] = (), timeout: float | None = None
    ) -> Envelope:
        """Send, then the partner's answer; ``timeout`` bounds both
        (``None``: each half by its bound). Not cancel-safe (as
        ``send_async``)."""
    async def reply_and_recv_async(
        self, label: int, words: Iterable[int] = (), timeout: float | None = None
    ) -> Envelope:
        """A server's step in the asyncio loop, as ``call_async``."""
    def __aiter__(self) -> Rendezvous: ...
    async def __anext__(self) -> Envelope:
        """``async for m in ep``: until the partner is gone (or this
        endpoint is closed); each message waits up to ``recv_timeout``
        (``TimedOut`` ends the loop). Cancel-safe."""
    def doorbell(self) -> int:
        """The doorbell, for your own event loop (readable when the
        partner rang it, or hung up); switches to bell mode. Do not close
        it."""
    def prepare_recv_sleep(self) -> bool:
        """Set the flag before waiting; False: a message is there."""
    def doorbell_rang(self) -> bool:
        """After the doorbell was readable: drain it. True: it hung up
        (look on a timer from then on)."""
    def send_begin(
        self, label: int, words: Iterable[int] = (), *, fds: Iterable[int | _Fileno] = ()
    ) -> int:
        """A send's first step: the message in the slot; its number.
        ``Full`` while another send of this endpoint is in progress."""
    def send_poll(self, seq: int) -> bool:
        """Whether the partner took send ``seq`` (True: over). False: wait
        for the doorbell, poll again. ``Disconnected``: taken back, over."""
    def send_cancel(self, seq: int) -> bool:
        """Give up on send ``seq``: True if taken back undelivered, False
        if it had been delivered."""
    @property
    def _aio_bell(self) -> Any: ...
    @property
    def peer(self) -> dict[str, int]:
        """pid, uid, gid of the partner (from the kernel)."""
    @property
    def closed(self) -> bool:
        """Closed, or handed to a :class:`ProxyEndpoint`."""
    def close(self) -> None:
        """Hang up: the partner's waits end with ``Disconnected``."""
    def stats(self) -> dict[str, int]:
        """peers, sent_messages, sent_bytes, received_messages,
        received_bytes, descriptors, timed_out, disconnected, malformed."""
    def __enter__(self) -> Rendezvous: ...
    def __exit__(self, *args: object) -> bool: ...

def forward(
    up: Channel,
    down: Channel,
    *,
    pool: Pool | None = None,
    batch: int = 64,
    idle_wait: float = 0.02,
    max_idle: float | None = None,
    alloc_timeout: float = 10.0,
    liveness_interval: float | None = None,
    timeout: float | None = None,
    stop: _IsSet | None = None,
) -> dict[str, Any]:
    """Forward every message of ``up`` to ``down`` until one closes
    (``zcio::forward::run``): by reference, or copied into ``pool``. The
    GIL is released. Stops early on ``stop.is_set()``, after ``timeout``
    seconds or on Ctrl-C, by closing ``up``. The report: msgs, bytes,
    errors, batches, end (``"upstream-disconnected"``,
    ``"downstream-disconnected"``, ``"idle"``, ``"failed"``,
    ``"stopped"``), error."""

def recv_any(endpoints: Sequence[Rendezvous], timeout: float | None = None) -> tuple[int, Envelope]:
    """The first message from any of ``endpoints``, with its index.
    Partners that hung up are skipped; ``Disconnected`` once all have.
    ``timeout=None`` waits up to the shortest ``recv_timeout`` of them."""

def set_spin_policy(max: float | None = None, task_max: float | None = None) -> None:
    """Set the process's spin policy, in seconds: how long a blocking wait
    spins before it sleeps (``max``, default 0.0005) and how long a wait
    inside an event loop spins before it returns to the loop (``task_max``,
    default 0.00005, capped by ``max``); ``None`` keeps that setting, ``0``
    sleeps at once. Read when a channel, ring end or rendezvous endpoint is
    made: set it before opening them. Process-wide."""

def spin_policy() -> tuple[float, float]:
    """The process's spin policy ``(max, task_max)`` in seconds."""

class Proxies:
    """A capped pool of proxy threads shared by proxy endpoints
    (``None``: the library's default for that setting; durations in
    seconds). Endpoints made without ``proxies=`` share one default
    pool."""

    def __init__(
        self,
        max_proxies: int | None = None,
        quota: int | None = None,
        spin: float | None = None,
        linger: float | None = None,
        idle_exit: float | None = None,
    ) -> None: ...
    def stats(self) -> dict[str, int]:
        """threads, idle, waiting_jobs, spawned, reused."""
    def config(self) -> dict[str, float]:
        """max_proxies, quota, spin, linger, idle_exit."""

class Ticket:
    """Where one asynchronously sent message stands."""

    @property
    def status(self) -> Literal["pending", "delivered", "failed"]: ...
    @property
    def done(self) -> bool: ...
    @property
    def error(self) -> ZcioError | ValueError | None:
        """The exception delivery failed with (``status == "failed"``)."""
    def wait(self, timeout: float | None = None) -> None:
        """Return once delivered; raise why it failed (``Disconnected``,
        ``TimedOut`` for a delivery the partner did not take within the
        endpoint's ``delivery_timeout``), or ``TimedOut`` if still pending
        after ``timeout`` (``None``: the ``delivery_timeout``)."""

class Reply:
    """A receive under way (the reply of :meth:`ProxyEndpoint.call`, or
    :meth:`ProxyEndpoint.post`). The outcome is kept once collected."""

    def ready(self) -> bool: ...
    def try_take(self) -> Envelope | None:
        """The message if it is there, else ``None``; raises if receiving
        failed."""
    def wait(self, timeout: float | None = None) -> Envelope:
        """The message; ``timeout=None`` waits up to the endpoint's receive
        bound (one hour)."""

class ProxyEndpoint:
    """A rendezvous endpoint driven asynchronously: ``send`` and ``call``
    return at once, proxy threads do the synchronous rendezvous; the
    partner keeps using a plain :class:`Rendezvous`. Takes ``endpoint`` over
    (it reads as closed afterwards). ``quota``: messages that may wait per
    direction (default: the pool's, 4096); ``delivery_timeout``: how long
    a proxy waits for the partner to take each message (default 10 s)."""

    def __init__(
        self,
        endpoint: Rendezvous,
        proxies: Proxies | None = None,
        *,
        quota: int | None = None,
        delivery_timeout: float | None = None,
    ) -> None: ...
    def send(self, label: int, words: Iterable[int] = ()) -> Ticket:
        """Queue and return at once. If the message cannot be queued
        (``Full``: quota reached; ``Disconnected``: partner gone or endpoint
        closed; ``ValueError``: more than 8 words) it is dropped and the
        call raises."""
    def call(self, label: int, words: Iterable[int] = ()) -> Reply:
        """Queue a request; the partner's next message is its reply.
        Raises (the request dropped) as :meth:`send`."""
    def post(self) -> Reply: ...
    def recv(self, timeout: float | None = None) -> Envelope:
        """The next message no call claimed (``Empty`` for ``timeout=0``)."""
    def stats(self) -> dict[str, int]:
        """send_queued, delivered, failed, received, recv_queued."""
    @property
    def peer(self) -> dict[str, int]: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None:
        """Fail messages still queued and outstanding replies
        (``Disconnected``), stop receiving, hang up."""
    def __enter__(self) -> ProxyEndpoint: ...
    def __exit__(self, *args: object) -> bool: ...

# ------------------------------------------------------------ associations

class _Default:
    """The type of :data:`DEFAULT`."""

DEFAULT: _Default
"""The default increment for :meth:`Association.run` / ``start`` (4 MiB)."""

#: An endpoint: a descriptor (duplicated), an object with ``fileno()``
#: (duplicated), or a spec: a path, ``"-"``, ``"fd:N"``, ``"tcp:HOST:PORT"``,
#: ``"tcp-listen:HOST:PORT"``, ``"udp:HOST:PORT"``, ``"unix:PATH"``,
#: ``"ring:NAME"``; or a :class:`Channel` (taken over).
_EndpointArg = int | str | os.PathLike[str] | Channel | Any

class Completion:
    """The end of one increment."""

    @property
    def moved(self) -> int: ...
    @property
    def eof(self) -> bool: ...
    @property
    def stopped(self) -> bool: ...
    @property
    def error(self) -> ZcioError | None:
        """The (unraised) ``SpliceError`` that ended the increment."""
    @property
    def callback_error(self) -> BaseException | None:
        """What the ``on_complete`` callback raised for this completion."""

class SpliceStatus:
    """Status bits and counters of an association."""

    @property
    def active(self) -> bool: ...
    @property
    def wanted(self) -> bool: ...
    @property
    def error(self) -> bool: ...
    @property
    def eof(self) -> bool: ...
    @property
    def moved(self) -> int: ...
    @property
    def mover(self) -> Literal["copy_file_range", "sendfile", "splice", "buffer"]: ...
    @property
    def fell_back(self) -> list[tuple[str, int]]:
        """Movers the kernel refused for this pair: (mover, errno)."""
    @property
    def modules(self) -> list[str]: ...
    @property
    def copied(self) -> int: ...
    @property
    def dropped(self) -> int: ...
    @property
    def dropped_bytes(self) -> int: ...
    @property
    def lost(self) -> int: ...
    @property
    def source(self) -> str: ...
    @property
    def sink(self) -> str: ...

_Increment = int | _Default | None

class Association:
    """A standing association between a source and a sink
    (:func:`splice`). ``stop``, ``status``, ``wait``, ``fileno`` and
    ``module_stats`` work from any thread at any time; the other calls
    raise ``SpliceError`` (errno ``EBUSY``) while a ``run`` in another
    thread has the association."""

    def run(self, nbytes: _Increment = None) -> Completion:
        """Move an increment (None: until the source ends) and block without
        the GIL until it is moved, the source ends, an error or ``stop()``."""
    def start(self, nbytes: _Increment = None) -> None:
        """Start an increment on the worker thread and return at once."""
    def wait(self, timeout: float | None = None) -> Completion | None:
        """The next asynchronous completion, or None (none in time, or
        nothing running). ``timeout=None`` waits up to one hour (the
        default bound), ``math.inf`` until it comes."""
    def fileno(self) -> int:
        """Readable while a completion waits for :meth:`wait`."""
    def stop(self) -> None: ...
    def status(self) -> SpliceStatus: ...
    def stats(self) -> dict[str, int | bool]:
        """The live counters (what ``zcio ls`` shows): started, completed,
        failed, moved_bytes, running."""
    def push(self, spec: str) -> None: ...
    def pop(self) -> str | None: ...
    def finish(self) -> None:
        """End the stream here: the modules flush what they hold to the sink."""
    def control(self, which: int | str, key: str, value: str | None = None) -> str: ...
    def module_stats(self) -> list[tuple[str, dict[str, int]]]: ...
    def on_complete(self, callback: Any | None) -> None:
        """``callback(completion)`` on the worker thread; returns None/False
        (stop), True (repeat), ``DEFAULT`` or a byte count (start that)."""
    def on_quench(self, callback: Callable[[bool], object] | None) -> None:
        """``callback(quenched)`` on the worker thread when the sink stops
        taking data at once (True) and takes it again (False); buffer path
        only. Exceptions go to ``sys.unraisablehook``."""
    def set_drop_when_behind(self, on: bool) -> None: ...
    def close(self) -> SpliceStatus: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Association: ...
    def __exit__(self, *args: object) -> bool: ...

def splice(
    src: _EndpointArg, dst: _EndpointArg, modules: Sequence[str] | None = None
) -> Association:
    """Associate ``src`` with ``dst`` and push ``modules`` (data order)."""

def cp(
    src: _EndpointArg, dst: _EndpointArg, modules: Sequence[str] | None = None
) -> SpliceStatus:
    """Copy ``src`` to ``dst`` through ``modules`` until the source ends."""

def load_module(path: str | os.PathLike[str]) -> str:
    """Load a user module from a shared object (it runs in this process:
    load only code you trust); returns its name."""

def module_names() -> list[str]:
    """The module names ``push``, ``splice`` and ``cp`` can open, sorted."""

# --- buffering semantics --------------------------------------------------

SemanticsName = Literal[
    "copy",
    "emulated-copy",
    "share",
    "emulated-share",
    "move",
    "emulated-move",
    "weak-move",
    "emulated-weak-move",
]
Delivery = Literal["copied", "protected", "hidden", "lent", "sealed"]

def _sendable(data: Buffer | PoolBuffer | Msg, pool: Pool) -> tuple[PoolBuffer | Msg, int, int]:
    """Internal (``Channel.send_async``): ``data`` as ``send`` takes it on
    every attempt (a bytes-like copied once into ``pool``, never waiting)
    and its slice count."""

def semantics_names() -> list[str]:
    """The eight semantics names, in the paper's order."""

class CostModel:
    """The cost model: what each primitive operation costs on this machine,
    from which endpoints choose their mechanisms per size (copy below a
    threshold, lend or swap pages above it). ``zcio calibrate`` (or
    ``calibrate()``) measures it; endpoints read the file at
    ``calibration_path()`` once per process. Immutable."""

    OPS: list[str]
    """The operation names ``cost`` takes (``"copy_in"``, ``"ref_pass"``,
    ``"tcow_fault"``, ``"swap"``, ...)."""
    @staticmethod
    def current() -> CostModel:
        """The model endpoints made now decide with: the calibration file's,
        read once per process, else the built-in defaults."""
    @staticmethod
    def builtin() -> CostModel:
        """The built-in defaults."""
    @staticmethod
    def load(path: str | os.PathLike[str]) -> CostModel:
        """Read and check a calibration file (this format version, this
        machine, bounded numbers). ``OSError`` (``FileNotFoundError``, ...)
        if it cannot be read, ``ValueError`` if it is not usable."""
    @staticmethod
    def from_json(text: str) -> CostModel:
        """Parse and check a calibration file's JSON (``ValueError``)."""
    def to_json(self) -> str:
        """The JSON of a calibration file."""
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write it as a calibration file (atomically; directories are
        created). ``OSError`` on failure."""
    @property
    def source(self) -> str:
        """``"builtin"``, ``"file"`` or ``"measured"``."""
    def cost(self, op: str, nbytes: int) -> float:
        """Nanoseconds of one primitive operation on ``nbytes`` bytes (page
        operations: pages x page size). ``ValueError`` for an unknown name."""
    def predict(self, semantics: SemanticsName, nbytes: int, aligned: bool = True) -> float:
        """Nanoseconds of one transfer of ``nbytes`` under ``semantics`` end
        to end, page-aligned buffers or not: what an endpoint compares."""

def calibration_path() -> str | None:
    """Where the calibration file is: ``$ZCIO_CALIBRATION``, else
    ``$XDG_CONFIG_HOME/zcio/calibration.json``, else
    ``~/.config/zcio/calibration.json``; ``None`` without any of these."""

def calibrate(quick: bool = True) -> CostModel:
    """Measure this machine's costs (``zcio calibrate``), blocking without
    the GIL. Bounded: ``quick`` at most 21 runs within 50 ms per point (well
    under a second idle, at most 20 s loaded); ``quick=False`` the full set
    (a few seconds, at most 2 minutes). Save the model with ``save`` to
    ``calibration_path()`` for endpoints of later processes.
    ``ZcioError`` (``.errno`` set for a failed system call) on failure."""

class ArenaBuffer(Buffer):
    """Registered memory of a SemanticEndpoint (``arena_buffer``), exported
    writable through the buffer protocol (``memoryview``,
    ``numpy.frombuffer``). The only memory ``output`` can lend without a
    copy, and the only memory ``input`` can swap pages into. Write it at
    any time, also right after ``output``: pages still in flight get a
    private copy (TCOW). Freed when the last reference goes."""

    def __len__(self) -> int: ...
    @property
    def page_offset(self) -> int: ...

class OwnedBuffer(Buffer):
    """A system-allocated buffer (``alloc``, ``input_owned``), writable
    through the buffer protocol until handed over (``output_owned``) or
    freed (``free``); both refuse (BufferError) while memoryviews or arrays
    of it exist, since its memory goes away."""

    def __len__(self) -> int: ...
    @property
    def released(self) -> bool: ...

class Received:
    """How one ``input`` arrived."""

    len: int
    swapped_pages: int
    copied: int
    sender: str | None

class SemanticEndpoint:
    """One end of a channel with buffering semantics (Genie). Both ends of
    a channel must make one (they exchange a hello). Semantics are chosen
    per endpoint (``output``, ``input``) and may be overridden per call;
    the two ends may choose differently.

    Guarantees (who owns the buffer after the call; what a later write can
    affect): ``copy`` / ``emulated-copy``: the caller keeps its buffer,
    later writes by either side change nothing the other sees.
    ``share`` / ``emulated-share``: the caller keeps its buffer; its later
    writes may change what the peer reads. ``move`` / ``emulated-move``:
    the buffer goes to the peer (sealed / hidden), nobody can change it.
    ``weak-move`` / ``emulated-weak-move``: the buffer goes to the peer but
    stays mapped; do not write it (the peer would see it).

    Only ``ArenaBuffer`` memory (and arrays over it) goes without a copy;
    ``bytes``, ``bytearray`` and ordinary numpy arrays are copied.
    Blocking calls release the GIL."""

    def __init__(
        self,
        channel: Channel,
        output: SemanticsName = "emulated-copy",
        input: SemanticsName = "emulated-copy",
        arena_capacity: int = 64 << 20,
        hello_timeout: float = 10.0,
        trust_peer: bool = False,
        ignore_cost_model: bool = False,
        rewrite_tolerance: float | None = None,
    ) -> None:
        """Take over ``channel`` (ValueError for an unknown name, before
        the channel is taken). ``trust_peer=True`` is the unsafe opt-in of
        ``trust_peer()``. ``rewrite_tolerance`` (0.0 - 1.0, None: the cost
        model's per size) is how much of a buffer you rewrote while its
        previous emulated-copy output was in flight before the next output
        copies it instead of lending it again."""
    def rewrite_tolerance(self, n: int) -> float:
        """The fraction of an ``n``-byte buffer's pages that may have been
        rewritten during its previous emulated-copy output for the next to
        lend it again (else copied: ``stats()["out_rewrite_copies"]``)."""
    @property
    def semantics(self) -> tuple[str, str]:
        """(output, input) semantics of this endpoint."""
    @property
    def peer(self) -> tuple[str, bool]:
        """The peer's input semantics and whether it trusts us."""
    @property
    def disconnected(self) -> bool: ...
    def output(self, buffer: Buffer, semantics: SemanticsName | None = None) -> Delivery:
        """Output the bytes of ``buffer`` (like write): when it returns,
        the buffer is yours again. Returns how it travelled. Do not write
        the buffer from another thread during the call."""
    def input(
        self,
        buffer: Buffer,
        semantics: SemanticsName | None = None,
        timeout: float | None = None,
    ) -> Received:
        """Input the next message into the writable ``buffer`` (like read,
        message-oriented). A buffer shorter than the message raises
        ValueError with ``.needed`` (the message is kept). ``Disconnected``
        when the peer is gone; ``TimedOut`` after ``timeout``. With
        ``timeout=None`` (up to the channel's receive bound, one hour) the
        wait (GIL released) is not interrupted by Ctrl-C; with a timeout it
        polls and handles signals, and sees a peer that died but not one
        that closed its end cleanly while still running (that shows as
        ``TimedOut``; a receive without timeout raises ``Disconnected``)."""
    def poll(self, timeout: float | None = 0) -> tuple[int, int] | None:
        """(length, page_offset) of the next message without taking it, or
        None. Allocate ``arena_buffer(length, page_offset)`` and input into
        it to have whole pages swapped in. Raises ``Disconnected`` for a
        peer that died; a peer that closed cleanly is seen by ``input``."""
    def arena_buffer(self, n: int, page_offset: int = 0) -> ArenaBuffer: ...
    def alloc(self, n: int) -> OwnedBuffer:
        """A system-allocated buffer for the endpoint's output semantics
        (a fresh sealed-on-send region under ``move``, arena pages
        otherwise)."""
    def output_owned(self, buf: OwnedBuffer, semantics: SemanticsName | None = None) -> Delivery:
        """Hand ``buf`` to the peer; it is consumed (``buf.released``). On
        failure it stays yours when it could be given back."""
    def input_owned(
        self, semantics: SemanticsName | None = None, timeout: float | None = None
    ) -> OwnedBuffer: ...
    def free(self, buf: OwnedBuffer) -> None:
        """Give a system-allocated buffer back for reuse."""
    def send_array(
        self,
        arr: npt.ArrayLike,
        semantics: SemanticsName | None = None,
        timeout: float | None = None,
    ) -> Delivery:
        """Send an array (dtype, shape) under ``semantics``: a header
        message, then the payload. An array whose data lives in this
        endpoint's arena (``np.frombuffer(ep.arena_buffer(n), ...)``) goes
        without a copy under the zero-copy semantics; others are copied
        (the move family copies into a system-allocated buffer). Returns
        how the payload travelled."""
    def recv_array(
        self, semantics: SemanticsName | None = None, timeout: float | None = None
    ) -> np.ndarray[Any, Any]:
        """Receive a ``send_array`` array: a writable array over an
        ArenaBuffer (copy/share family, pages swapped in where allowed) or
        an OwnedBuffer (move family). ``MalformedMessage`` if the header
        does not validate."""
    def stats(self) -> dict[str, int]: ...
    def trust_peer(self) -> None:
        """Unsafe opt-in: declare that the peer never writes pages it lent
        (it runs zcio's TCOW). Emulated-copy input then swaps its pages in
        instead of copying; a peer that does write them can change what
        you received. Only for processes you trust like your own code."""
    def close(self) -> None: ...
    def __enter__(self) -> SemanticEndpoint: ...
    def __exit__(self, *args: object) -> bool: ...
