"""Entry points of the children of test_msg_units.py (module-level so the
spawn start method can import them). Each child raises (exit code 1) on any
unexpected outcome; the parent asserts exit code 0."""

from __future__ import annotations

import ctypes
import signal

import zcio
from zcio_children import TIMEOUT, sized

PR_GET_DUMPABLE = 3


def lines_sender(path: str, parts: list[bytes]) -> None:
    """Send one message of `parts` (one pool buffer each), then wait for
    "done"."""
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        pool = zcio.Pool("units-child", chunk_size=1 << 20, max_chunks=4)
        bufs = []
        for part in parts:
            b = pool.alloc(len(part))
            with memoryview(b) as mv:
                mv[:] = part
            bufs.append(b)
        ch.sendv(bufs, timeout=TIMEOUT)
        assert ch.recv(timeout=TIMEOUT).tobytes() == b"done"


def reserve_cycles(name: str, layout: str) -> None:
    """Reserve -> cancel, reserve -> commit part, reserve -> drop, reserve ->
    commit, with a write refused between each reserve and its end, then a
    plain write and close. The consumer must see exactly what was committed."""
    with zcio.RingProducer(name, size=1 << 16, layout=layout) as p:
        assert p.wait_for_consumers(1, timeout=TIMEOUT) >= 1

        def refused() -> None:
            try:
                p.write(b"between", tag=99)
            except BufferError:
                return
            raise AssertionError("a write went through an open reservation")

        r = p.reserve(100, timeout=TIMEOUT)
        memoryview(r)[:] = b"A" * 100
        refused()
        r.cancel()
        r = p.reserve(40, timeout=TIMEOUT)
        with memoryview(r) as mv:
            mv[:] = sized(1, 40)
        refused()
        r.commit(30, tag=1)
        r = p.reserve(300, timeout=TIMEOUT)
        with memoryview(r) as mv:
            mv[:] = b"B" * 300
        refused()
        del r  # dropped open: cancelled
        with p.reserve(200, timeout=TIMEOUT) as r:
            with memoryview(r) as mv:
                mv[:] = sized(2, 200)
            r.commit(tag=2)
        p.write(b"end", tag=3)


def reserve_and_hang(name: str) -> None:
    """Write "ready", then hold a filled reservation until killed."""
    p = zcio.RingProducer(name, size=1 << 16, layout="variable")
    assert p.wait_for_consumers(1, timeout=TIMEOUT) >= 1
    r = p.reserve(64, timeout=TIMEOUT)
    memoryview(r)[:] = b"C" * 64
    r.cancel()
    p.write(b"ready", timeout=TIMEOUT)
    r = p.reserve(64, timeout=TIMEOUT)
    memoryview(r)[:] = b"D" * 64
    # Held until the parent kills this process (no event to wait for: pause, bounded by
    # the parent's watchdog, which kills it in any case).
    signal.pause()


def non_dumpable() -> None:
    """set_non_dumpable() turns PR_GET_DUMPABLE from 1 to 0."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 1
    zcio.set_non_dumpable()
    assert libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    zcio.set_non_dumpable()  # again: no error


class Frame(ctypes.Structure):
    """A header the elements follow (Rust: a `#[repr(C)]` type ending in
    `[Reading]`)."""

    _fields_ = [("frame", ctypes.c_uint64), ("valid", ctypes.c_bool), ("pad", ctypes.c_uint8 * 7)]


FRAMES = ("example.Frame", 1)


def typed_elems_sender(path: str) -> None:
    """Three Readings as a `[Reading]`; a Frame and two Readings; an empty
    `[Reading]`; a `[Reading]` whose second element's bool is 2 (hostile,
    tag valid); one of 24 payload bytes (not a whole element)."""
    from zcio._zcio import _typed_header
    from zcio_children import READING, Reading

    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        rs = (Reading * 3)(*(Reading(seq=i, ok=i % 2 == 1, kind=i, value=i / 2) for i in range(3)))
        zcio.send_typed_elems(ch, None, rs, tag=READING, timeout=TIMEOUT)
        zcio.send_typed_elems(ch, Frame(frame=7, valid=True), (Reading * 2)(rs[1], rs[2]), tag=FRAMES, timeout=TIMEOUT)
        zcio.send_typed_elems(ch, None, (Reading * 0)(), tag=READING, timeout=TIMEOUT)
        head = _typed_header(READING[0], READING[1], 0, 8, 16)
        raw = bytearray(bytes(rs))
        raw[16 + 4] = 2
        ch.send(head + bytes(raw), timeout=TIMEOUT)
        ch.send(head + bytes(24), timeout=TIMEOUT)
        assert ch.recv(timeout=TIMEOUT).tobytes() == b"done"
