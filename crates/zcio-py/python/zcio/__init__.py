"""zcio: zero-copy IPC between processes on one Linux host.

Send bytes and numpy arrays between processes without pickling and
without copies through a pipe: the receiver reads the sender's
shared-memory pages in place, through the buffer protocol
(``memoryview(msg)``, ``numpy.frombuffer(msg, ...)``,
``torch.frombuffer``), and the sender's buffer returns to its pool only
when the receiver's message and every view of it are gone.

    import zcio, numpy as np

    # process A
    with zcio.Listener("/tmp/demo.sock") as lst, lst.accept(timeout=10) as ch:
        ch.send_array(np.arange(1_000_000, dtype=np.float32))

    # process B
    with zcio.Channel.connect("/tmp/demo.sock", timeout=10) as ch:
        arr = ch.recv_array(timeout=10)   # read-only view of A's pages

Under asyncio, ``await ch.recv_async()``, ``await ch.send_async(data)``
and ``async for msg in ch`` wait on the channel's doorbell (a descriptor
registered with ``loop.add_reader``) without blocking the loop; all three
are cancel-safe (a cancelled call took or sent nothing). Rings
(``cons.read_async``, ``async for block in cons``, ``prod.write_async``)
and rendezvous endpoints (``ep.recv_async``, ``ep.send_async``,
``ep.call_async``, ``async for m in ep``) have the same forms; a
rendezvous send is the one that is not cancel-safe (see docs/python.md).

Small messages at the latency of a few cache-line transfers go over a
channel's lanes: ``ch.open_lane(slots, slot_size)`` / ``ch.accept_lane()``
give a ``LaneSender`` (``loan()`` a slot and fill it in place, or
``send(bytes)``) and a ``LaneReceiver`` (``recv()`` a ``LaneMsg`` read
in place).

Small control messages (a label and up to 8 words) go over the
rendezvous: ``RendezvousListener`` / ``Rendezvous`` (synchronous send, recv,
call) and ``ProxyEndpoint`` (send and call return at once; proxy threads
do the synchronous work).

Buffering semantics (Genie's eight: copy, emulated-copy, share,
emulated-share, move, emulated-move, weak-move, emulated-weak-move):
``ch.endpoint(output="emulated-copy")`` hands a channel to a
``SemanticEndpoint`` with ``output``/``input`` (shaped like write/read),
``send_array``/``recv_array(semantics=...)``, and arena buffers
(``arena_buffer``) — the only memory that goes without a copy.

Associations move data between I/O objects without a Python loop:
``zcio.splice(src, dst, modules=["crc32c", "zstd"]).run()`` or
``zcio.cp("in.log", "out.zst", ["zstd"])`` (files, pipes, sockets, rings;
the kernel's copy_file_range/sendfile/splice when nothing processes the
data).

Across hosts: ``zcio.bridge.export(...)`` / ``zcio.bridge.import_(...)``
run ``zcio bridge`` processes that carry a ring or channel path over Zenoh
(one copy per host boundary); ``peek.array()`` reads a ``send_array``
array out of an imported ring block in place.

See ``docs/python.md`` for the whole API, the buffer lifetime rules and
the volatile/secured distinction.
"""

from __future__ import annotations

from ._errors import (
    AllocError,
    AllocTimedOut,
    BridgeError,
    BridgeUsageError,
    ConnectError,
    Disconnected,
    Empty,
    Full,
    Lapped,
    MalformedMessage,
    PeerFault,
    PoolExhausted,
    ModuleError,
    RingError,
    SpliceError,
    TimedOut,
    WouldBlock,
    ZcioError,
)
from ._typed import read_typed, read_typed_elems, read_typed_vec, send_typed, send_typed_elems
from . import bridge
from ._zcio import (
    DEFAULT,
    MAX_FDS,
    MAX_SLICES,
    RING_MAX_CONSUMERS,
    RING_MAX_SOURCES,
    RING_BLOCK_HEADER_LEN,
    RING_MAX_DATA_LEN,
    RING_MAX_DESCRIPTORS,
    RING_MAX_SLOT_SIZE,
    set_non_dumpable,
    AccessPolicy,
    ArenaBuffer,
    Association,
    Channel,
    ChannelPolicy,
    Completion,
    Envelope,
    LaneLoan,
    LaneMsg,
    LaneReceiver,
    LaneSender,
    Rendezvous,
    RendezvousListener,
    Listener,
    Msg,
    MsgView,
    OwnedBuffer,
    Peek,
    PeekView,
    Pool,
    PoolBuffer,
    Proxies,
    ProxyEndpoint,
    Received,
    Reply,
    RingConsumer,
    RingProducer,
    RingReservation,
    SemanticEndpoint,
    SpliceStatus,
    Ticket,
    __version__,
    cp,
    forward,
    load_module,
    module_names,
    page_size,
    recv_any,
    ring_dir,
    ring_list,
    ring_path,
    ring_stat,
    ring_unlink,
    semantics_names,
    CostModel,
    calibrate,
    calibration_path,
    set_spin_policy,
    spin_policy,
    splice,
)

__all__ = [
    "__version__",
    "send_typed",
    "read_typed",
    "send_typed_elems",
    "read_typed_elems",
    "read_typed_vec",
    "Channel",
    "ChannelPolicy",
    "AccessPolicy",
    "LaneSender",
    "LaneLoan",
    "LaneReceiver",
    "LaneMsg",
    "Listener",
    "Msg",
    "MsgView",
    "Pool",
    "PoolBuffer",
    "RingProducer",
    "RingConsumer",
    "Peek",
    "PeekView",
    "ring_unlink",
    "ring_list",
    "ring_stat",
    "ring_dir",
    "ring_path",
    "RingReservation",
    "forward",
    "page_size",
    "MAX_SLICES",
    "RING_MAX_CONSUMERS",
    "RING_MAX_SOURCES",
    "RING_BLOCK_HEADER_LEN",
    "RING_MAX_DATA_LEN",
    "RING_MAX_DESCRIPTORS",
    "RING_MAX_SLOT_SIZE",
    "set_non_dumpable",
    "MAX_FDS",
    "Envelope",
    "RendezvousListener",
    "Rendezvous",
    "recv_any",
    "set_spin_policy",
    "spin_policy",
    "Proxies",
    "ProxyEndpoint",
    "Ticket",
    "Reply",
    "splice",
    "cp",
    "load_module",
    "module_names",
    "Association",
    "Completion",
    "SpliceStatus",
    "DEFAULT",
    "SemanticEndpoint",
    "ArenaBuffer",
    "OwnedBuffer",
    "Received",
    "semantics_names",
    "CostModel",
    "calibrate",
    "calibration_path",
    "is_volatile",
    "ZcioError",
    "Disconnected",
    "TimedOut",
    "WouldBlock",
    "Full",
    "Empty",
    "MalformedMessage",
    "PeerFault",
    "ConnectError",
    "AllocError",
    "PoolExhausted",
    "AllocTimedOut",
    "RingError",
    "Lapped",
    "SpliceError",
    "ModuleError",
    "BridgeError",
    "BridgeUsageError",
    "bridge",
]


def is_volatile(obj: object) -> bool:
    """Whether ``obj`` (a Msg, MsgView, Peek, PeekView, or a numpy array / memoryview
    over one of them) shows bytes another process may still write.

    Follows ``.base`` (numpy) and ``.obj`` (memoryview) links to the zcio
    object that owns the memory; objects not backed by zcio are not
    volatile.
    """
    seen = 0
    while obj is not None and seen < 256:
        if isinstance(obj, (Msg, MsgView, Peek, PeekView)):
            return bool(obj.volatile)
        if isinstance(obj, memoryview):
            obj = obj.obj
        else:
            obj = getattr(obj, "base", None)
        seen += 1
    return False
