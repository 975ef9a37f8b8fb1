"""The exceptions of zcio, one per family of failure.

Every exception zcio raises for a failed operation is a :class:`ZcioError`;
the subclasses also derive from the built-in exception a Python programmer
would catch for that situation (``TimeoutError``, ``ConnectionError``,
``ValueError``, ``BlockingIOError``), so generic code keeps working.
``errno`` carries the kernel's error number where one caused the failure;
:class:`WouldBlock` and the family classes (:class:`RingError`,
:class:`ConnectError`, :class:`SpliceError` …) otherwise carry the one C
returns for the situation (``EAGAIN``, ``EINVAL`` …); else ``None``.

The words are the ones of every zcio transport and of the Rust and C
APIs (``zcio::ErrorKind``): :class:`WouldBlock` is "nothing available
now" (Rust ``WouldBlock``, C ``-EAGAIN``), :class:`Disconnected` "the peer
is gone" (Rust ``Disconnected``, C ``-EPIPE``).

Misuse of the API (a wrong type, a negative size, releasing a buffer that
still has views) raises the usual ``TypeError``, ``ValueError`` or
``BufferError`` instead.
"""

from __future__ import annotations

__all__ = [
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
]


class ZcioError(Exception):
    """Base class of every zcio failure. ``errno`` is the kernel's error
    number when a system call caused it, the code C returns for the
    situation where the class says it (``EAGAIN`` for :class:`WouldBlock`),
    else ``None``."""

    errno: int | None = None


class Disconnected(ZcioError, ConnectionError):
    """The peer is gone (or the channel was closed) and nothing is left to
    receive; for rings, the producer died or closed the ring with an error
    code (``code``) after everything it wrote was read. For rendezvous
    endpoints: the partner hung up or died; for a ``ProxyEndpoint``, also
    a message or reply the endpoint was closed before it was handled."""


class TimedOut(ZcioError, TimeoutError):
    """A bounded wait (``timeout=`` seconds) ended before the operation
    could complete."""


class WouldBlock(ZcioError, BlockingIOError):
    """Nothing available now and the call was not allowed to wait
    (``timeout=0``); trying again later can succeed. ``errno`` is
    ``EAGAIN`` (``None`` for a block a ring dropped under a tail-drop
    policy, raised as :class:`Full`). Raised as one of its subclasses, which say which way:
    :class:`Full` (no room to send or write), :class:`Empty` (nothing to
    receive or read), :class:`PoolExhausted` (no free buffer; also a
    ``Full``). Catch
    ``WouldBlock`` for all three."""


class Full(WouldBlock):
    """No room right now: the channel ring, the peer's in-flight allowance,
    a ring's data area (also a block dropped under a tail-drop policy). Also
    a rendezvous ``send(timeout=0)`` the partner did not take at once, and an
    ``ProxyEndpoint.send``/``call`` whose partner queue is at its quota."""


class Empty(WouldBlock):
    """Nothing to receive or read right now (``timeout=0``)."""


class MalformedMessage(ZcioError, ValueError):
    """The peer sent something that failed validation: a channel message
    the library rejected (the channel stays usable), or an array header
    that ``recv_array`` could not accept (the message is dropped)."""


class PeerFault(ZcioError):
    """The peer broke the protocol: it corrupted shared state, or held a
    lent buffer past the hold limit. The channel or ring is closed. For a
    rendezvous endpoint: the partner broke the slot protocol (what it said
    is untrustworthy)."""


class ConnectError(ZcioError, ConnectionError):
    """Setting up a channel failed: nobody listens at the path, the
    listener's access policy refused us, or the handshake broke. Also a
    listener that cannot take its path: ``errno`` says why (``ENOENT``:
    the directory does not exist, ``EADDRINUSE``: a live listener is there,
    ``EINVAL``: the path is empty)."""


class AllocError(ZcioError):
    """A pool could not hand out a buffer (or a region could not be
    created)."""


class PoolExhausted(AllocError, Full):
    """The pool (or a semantic endpoint's arena) has no free buffer of that
    size now, and the call was not allowed to wait (``timeout=0``).
    Receivers free buffers by dropping their messages and views. (A
    :class:`Full`, as it always was, and so a :class:`WouldBlock`.)"""


class AllocTimedOut(AllocError, TimedOut):
    """The pool stayed exhausted for the whole ``timeout``."""


class RingError(ZcioError):
    """Creating, opening, writing or reading a ring failed."""


class Lapped(RingError):
    """A peeked ring block was overwritten by the producer while it was
    being read (overwriting rings): what was read from it is not valid. The
    consumer has skipped forward."""


class SpliceError(ZcioError, OSError):
    """An association failed: an endpoint that cannot be opened or used
    (a bad spec, a refused connection, a directory), a failed move, or a
    call that needs the association while an increment runs (``errno``
    ``EBUSY``). ``errno`` is the kernel's error number where one caused
    it."""


class ModuleError(SpliceError, ValueError):
    """A processing module failed: no module of that name, bad arguments,
    a control request it does not understand, malformed input, or a
    shared object that is not a loadable zcio module."""


class BridgeError(ZcioError):
    """A ``zcio bridge`` process (``zcio.bridge``) failed: it exited before
    it was ready (it could not open its local end or its Zenoh session), or
    it ended with exit status 1 (the stream failed: the remote producer
    failed or died, the exporting bridge vanished, a local error).
    ``returncode`` is the process's exit status (``None`` if it was still
    running), ``stderr`` its error output (what went wrong, in words)."""

    returncode: int | None = None
    stderr: str = ""


class BridgeUsageError(BridgeError, ValueError):
    """``zcio bridge`` refused its arguments (exit status 2): a malformed
    key or endpoint, an unknown source or sink, a size out of range.
    ``stderr`` says which."""
