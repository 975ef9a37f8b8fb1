"""Buffer lifetime: the sender's buffer stays in use while the receiver's
Msg or any view of it exists, and is freed after the last one goes."""

from __future__ import annotations

import ctypes
import gc
import io
import json
import os
import time

import numpy as np
import pytest

import zcio
import zcio_children as kids

T = kids.TIMEOUT


def sender_in_use(ch) -> int:
    """Ask the sending child to reclaim and report its pool's buffers in use."""
    ch.flush()  # publish our batched deallocation notices now
    ch.send(b"stats", timeout=T)
    return json.loads(ch.recv(timeout=T).tobytes())["buffers_in_use"]


def wait_freed(ch) -> None:
    """Bounded poll: the sender sees its buffer freed (notices are async)."""
    for _ in range(200):
        gc.collect()
        if sender_in_use(ch) == 0:
            return
    pytest.fail("the sender never saw its buffer freed")


def test_views_outlive_the_msg(sock_path, child):
    c = child(kids.send_and_serve, sock_path, 100_000)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        m = ch.recv(timeout=T)
        mv = memoryview(m)
        arr = np.frombuffer(m, dtype=np.uint8)
        del m
        gc.collect()
        assert sender_in_use(ch) == 1, "views keep the sender's buffer"
        del mv
        gc.collect()
        assert sender_in_use(ch) == 1, "the numpy view alone keeps it too"
        assert arr.tobytes() == kids.sized(0, 100_000)
        del arr
        wait_freed(ch)
        ch.send(b"done", timeout=T)
        c.join_ok()


def test_recv_array_view_keeps_message(sock_path, child):
    c = child(kids.send_pool_array, sock_path)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        arr = ch.recv_array(timeout=T)
        part = arr[10:20]  # a view of the view
        del arr
        gc.collect()
        assert sender_in_use(ch) == 1
        # The sender still holds its own array too: drop it, still in use.
        ch.send(b"drop x", timeout=T)
        assert ch.recv(timeout=T).tobytes() == b"ok"
        assert sender_in_use(ch) == 1, "our view still holds the buffer"
        assert part[0, 0] == 10 * 256
        del part
        wait_freed(ch)
        ch.send(b"done", timeout=T)
        c.join_ok()


def test_release_refuses_while_views_exist():
    a, b = zcio.Channel.pair()
    a.send(b"abc", timeout=5)
    m = b.recv(timeout=5)
    mv = memoryview(m)
    with pytest.raises(BufferError):
        m.release()
    mv.release()
    m.release()
    assert m.released
    with pytest.raises(ValueError):
        memoryview(m)
    a.reclaim()
    assert a.pool.stats()["buffers_in_use"] == 0
    # As a context manager: released at the end of the block.
    a.send(b"def", timeout=5)
    with b.recv(timeout=5) as m2:
        assert bytes(m2) == b"def"
    assert m2.released


def get_writable_buffer(obj) -> None:
    """PyObject_GetBuffer(obj, PyBUF_WRITABLE), as a C extension would."""
    view = ctypes.create_string_buffer(256)  # >= sizeof(Py_buffer)
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
    get.restype = ctypes.c_int
    PyBUF_WRITABLE = 0x0001
    if get(obj, ctypes.addressof(view), PyBUF_WRITABLE) == 0:
        ctypes.pythonapi.PyBuffer_Release.argtypes = [ctypes.c_void_p]
        ctypes.pythonapi.PyBuffer_Release(ctypes.addressof(view))


def test_writable_buffer_request_is_buffer_error():
    a, b = zcio.Channel.pair()
    a.send(b"read only", timeout=5)
    m = b.recv(timeout=5)
    with pytest.raises(BufferError):
        get_writable_buffer(m)
    assert memoryview(m).readonly
    with pytest.raises(TypeError):
        io.BytesIO(b"xx").readinto(m)  # CPython reports the BufferError as TypeError
    a.send_array(np.arange(4), timeout=5)
    arr = b.recv_array(timeout=5)
    with pytest.raises(BufferError):
        get_writable_buffer(arr.base)
    assert bytes(m) == b"read only"


def test_multi_slice_message_exports_one_copy():
    a, b = zcio.Channel.pair()
    pool = zcio.Pool("ms")
    x = pool.empty(4, dtype=np.int32)
    x[:] = [1, 2, 3, 4]
    a.send_array(x, timeout=5)
    m = b.recv(timeout=5)  # header slice + payload slice
    assert m.nslices == 2
    mv1 = memoryview(m)
    mv2 = memoryview(m)
    assert bytes(mv1) == bytes(mv2) == m.tobytes()
    assert mv1.tobytes()[-16:] == np.array([1, 2, 3, 4], dtype=np.int32).tobytes()


def _resources() -> tuple[int, int, int]:
    """This process's open descriptors, shared mappings and their bytes."""
    fds = len(os.listdir("/proc/self/fd"))
    n = size = 0
    with open("/proc/self/maps") as f:
        for line in f:
            rng, perms = line.split()[:2]
            if perms.endswith("s"):
                a, b = (int(x, 16) for x in rng.split("-"))
                n += 1
                size += b - a
    return fds, n, size


def _settled(want=None) -> tuple[int, int, int]:
    """The same figures twice 100 ms apart (closed ends go on their own
    thread), and at most `want`; bounded."""
    last = _resources()
    for _ in range(200):
        time.sleep(0.1)
        now = _resources()
        if now == last and (want is None or all(x <= w for x, w in zip(now, want))):
            return now
        last = now
    pytest.fail(f"not settled: now {last}, wanted at most {want}")


def test_closing_channels_with_messages_in_flight_leaks_nothing(sock_path, child):
    # 300 channels, each: connect, send 8 × 1 KiB from a pool of its own,
    # close channel and pool without waiting for the reader, who reads
    # them before or after the close: descriptors and shared mappings of
    # this process come back to where they were.
    n, warm, msgs = 300, 5, 8
    c = child(kids.recv_channels, sock_path, n + warm, msgs)

    def one() -> None:
        ch = zcio.Channel.connect(sock_path, timeout=T)
        pool = zcio.Pool("leak", chunk_size=64 << 10, max_chunks=1, populate=False)
        for i in range(msgs):
            buf = pool.alloc(1024, timeout=T)
            memoryview(buf)[:] = bytes([i]) * 1024
            ch.send(buf, timeout=T)
            del buf
        ch.close()
        del ch, pool
        gc.collect()

    for _ in range(warm):
        one()
    base = _settled()
    for _ in range(n):
        one()
    c.join_ok()
    after = _settled(base)
    print(f"fds, shared mappings, mapped bytes: before {base}, after {after}")
