"""Entry points of the child processes the tests spawn (module-level so the
spawn start method can import them). Each child raises (exit code 1) on any
unexpected outcome; the parent asserts exit code 0."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import numpy as np

import zcio

TIMEOUT = 30.0


def pattern(i: int, n: int) -> bytes:
    """Message i of a test stream: n bytes that depend on i."""
    return bytes((i * 7 + k) & 0xFF for k in range(min(n, 4096))) * (n // 4096 + 1)


def sized(i: int, n: int) -> bytes:
    return pattern(i, n)[:n]


def test_arrays() -> list[np.ndarray]:
    """Arrays of several dtypes and shapes, the same in every process."""
    rng = np.random.default_rng(1234)
    base = np.arange(2 * 3 * 4 * 5, dtype=np.int64).reshape(2, 3, 4, 5)
    return [
        np.arange(10, dtype=np.uint8),
        rng.standard_normal((16, 17)).astype(np.float32),
        rng.standard_normal(1000),
        (rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))).astype(np.complex128),
        np.arange(12, dtype=">i2").reshape(3, 4),  # big-endian
        np.array([True, False, True]),
        np.array(["2020-01-01", "2024-02-29"], dtype="datetime64[ns]"),
        np.array(["ab", "cde"], dtype="<U5"),
        np.array(3.25),  # 0-d
        np.zeros((0, 7), dtype=np.float64),  # empty
        np.zeros((4, 0, 2), dtype=np.int32),
        base[:, ::2, 1:, ::-2],  # non-contiguous, negative stride
        np.asfortranarray(base[0]),  # Fortran order
        base.transpose(3, 1, 0, 2),
        np.broadcast_to(np.arange(4, dtype=np.int16), (3, 4)),  # zero strides
    ]


def send_bytes(path: str, sizes: list[int]) -> None:
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        for i, n in enumerate(sizes):
            ch.send(sized(i, n), timeout=TIMEOUT)
        # Wait for the parent's "done" so our buffers are not torn down
        # under it (they would stay readable anyway).
        assert ch.recv(timeout=TIMEOUT).tobytes() == b"done"


def send_arrays(path: str) -> None:
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        for a in test_arrays():
            ch.send_array(a, timeout=TIMEOUT)
        assert ch.recv(timeout=TIMEOUT).tobytes() == b"done"


def send_pool_array(path: str) -> None:
    """Zero-copy path: the array is the pool buffer; report the pool's
    counters to the parent on request."""
    pool = zcio.Pool("zero-copy", chunk_size=8 << 20, max_chunks=2)
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        x = pool.empty((512, 256), dtype=np.float64)
        x[:] = np.arange(512 * 256, dtype=np.float64).reshape(512, 256)
        before = pool.stats()
        ch.send_array(x, timeout=TIMEOUT)
        assert not x.flags.writeable, "a sent pool array must be read-only"
        after = pool.stats()
        assert after["allocs"] == before["allocs"] == 1, (before, after)
        # Only a header buffer came from the channel's pool (one page).
        assert ch.pool.stats()["bytes_in_use"] <= 4096, ch.pool.stats()
        names = {"x": x}
        del x
        serve_stats(ch, pool, names)


def serve_stats(ch, pool, names) -> None:
    """Answer the parent's commands: 'stats' (reclaim, then the pool's
    counters as JSON), 'drop NAME' (delete a local), 'done'."""
    held = names
    while True:
        cmd = ch.recv(timeout=TIMEOUT).tobytes().decode()
        if cmd == "done":
            return
        if cmd.startswith("drop "):
            held.pop(cmd[5:], None)
            import gc

            gc.collect()
            ch.send(b"ok", timeout=TIMEOUT)
        elif cmd == "stats":
            ch.reclaim()
            ch.send(json.dumps(pool.stats()).encode(), timeout=TIMEOUT)
        else:
            raise AssertionError(f"unknown command {cmd!r}")


def send_and_serve(path: str, n: int) -> None:
    """Send one n-byte message from the channel's pool, then serve stats."""
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        ch.send(sized(0, n), timeout=TIMEOUT)
        serve_stats(ch, ch.pool, {})


def send_forever(path: str) -> None:
    """Stream until killed."""
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        i = 0
        while True:
            ch.send(sized(i, 1000), timeout=TIMEOUT)
            i += 1
            if i % 64 == 0:
                time.sleep(0.001)


def chan_connect_and_idle(path: str) -> None:
    """Connect and neither send nor receive; stay alive until killed (a
    silent peer)."""
    ch = zcio.Channel.connect(path, timeout=TIMEOUT)
    while ch is not None:
        time.sleep(1)


def send_secured(path: str) -> None:
    pool = zcio.Pool("sealed", secured=True)
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        b = pool.alloc(10)
        memoryview(b)[:] = b"sealed!!!!"
        ch.send(b, timeout=TIMEOUT)
        x = pool.empty(8, dtype=np.uint8)
        x[:] = 9
        ch.send_array(x, timeout=TIMEOUT)
        # Still readable here after sealing (same address, read-only now).
        assert int(x.sum()) == 72
        assert ch.recv(timeout=TIMEOUT).tobytes() == b"done"


def ring_produce(name: str, count: int, size: int, then: str) -> None:
    """Create ring `name`, wait for one consumer, write `count` blocks
    (block i: `size` bytes of pattern i), then 'close' or 'hang'."""
    p = zcio.RingProducer(name, size=64 << 10, layout="variable", policy="block")
    if p.wait_for_consumers(1, timeout=TIMEOUT) < 1:
        raise AssertionError("no consumer attached")
    for i in range(count):
        assert p.write(sized(i, size), timeout=TIMEOUT) == size
    if then == "close":
        p.close()
        return
    # 'hang': stay alive until killed (the parent SIGKILLs us).
    while True:
        time.sleep(1)


def ring_stream(name: str, total: int) -> None:
    """A continuous ring: `total` bytes of a counting pattern, then close."""
    p = zcio.RingProducer(name, size=16 << 10, layout="continuous", policy="block")
    if p.wait_for_consumers(1, timeout=TIMEOUT) < 1:
        raise AssertionError("no consumer attached")
    data = bytes(k & 0xFF for k in range(total))
    done = 0
    while done < total:
        done += p.write(data[done : done + 5000], timeout=TIMEOUT)
    p.close()


# --- rendezvous (zcio.Rendezvous) -------------------------------------------

NOTE, CALL, REPLY, SUM = 1, 2, 3, 4


def rdv_server(path: str) -> None:
    """A synchronous rendezvous server, as in examples/proxy.rs: sums
    NOTE words, answers CALL [x] with REPLY [2x, sum so far] (through
    reply_and_recv), answers SUM [a, b, ...] with their sum; ends when the
    client hangs up."""
    with zcio.RendezvousListener(path) as lst, lst.accept(timeout=TIMEOUT) as ep:
        total = 0
        # Open wait over our one partner (exercises recv_any).
        idx, m = zcio.recv_any([ep], timeout=TIMEOUT)
        assert idx == 0
        while True:
            if m.label == NOTE:
                total += m.words[0]
                nxt = ep.recv
                args: tuple = ()
            elif m.label == CALL:
                nxt = ep.reply_and_recv
                args = (REPLY, (m.words[0] * 2, total))
            elif m.label == SUM:
                nxt = ep.reply_and_recv
                args = (REPLY, (sum(m.words) % (1 << 64),))
            else:
                raise AssertionError(f"unexpected {m!r}")
            try:
                m = nxt(*args, timeout=TIMEOUT)
            except zcio.Disconnected:
                return


def rdv_connect_and_hang(path: str, take_one: bool) -> None:
    """Connect; if `take_one`, receive one message (and never answer); then
    stay alive until killed."""
    ep = zcio.Rendezvous.connect(path, timeout=TIMEOUT)
    if take_one:
        ep.recv(timeout=TIMEOUT)
    while True:
        time.sleep(1)


def lane_echo(path: str, n: int) -> None:
    """Take the parent's lane, open one back, echo n messages (through a
    loan filled in place), then wait for the parent's lane to end."""
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        tx = ch.open_lane(slots=8, slot_size=4096)
        rx = ch.accept_lane(timeout=TIMEOUT)
        for _ in range(n):
            m = rx.recv(timeout=TIMEOUT)
            loan = tx.loan(timeout=TIMEOUT)
            with memoryview(loan) as w, memoryview(m) as r:
                w[: len(r)] = r
            k = len(m)
            m.release()
            loan.send(k)
        try:
            rx.recv(timeout=TIMEOUT)
            raise AssertionError("expected the parent's lane to end")
        except zcio.Disconnected:
            pass
        tx.close()
        rx.close()


def lane_send_and_die(path: str, n: int) -> None:
    """Open a lane, send n messages, and die by SIGKILL without closing."""
    ch = zcio.Channel.connect(path, timeout=TIMEOUT)
    tx = ch.open_lane(slots=8, slot_size=4096)
    for i in range(n):
        tx.send(sized(i, 100 + i), timeout=TIMEOUT)
    os.kill(os.getpid(), signal.SIGKILL)


# --- asyncio peers (test_asyncio.py): the blocking API on the other end ------


def aio_msg(i: int) -> bytes:
    """Message i of an asyncio test stream: 4..3003 bytes, its index
    repeated (cheap to make and to check)."""
    n = 4 + (i * 131) % 3000
    return (i.to_bytes(4, "little") * (n // 4 + 1))[:n]


def aio_sender(path: str, n: int, pause_every: int) -> None:
    """Send aio_msg(0..n) with the blocking API, pausing 20 ms after every
    `pause_every`-th message (so the receiver waits now and then); then
    wait for the parent's b"done" and close."""
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        for i in range(n):
            ch.send(aio_msg(i), timeout=TIMEOUT)
            if pause_every and i % pause_every == pause_every - 1:
                time.sleep(0.02)
        assert ch.recv(timeout=TIMEOUT).tobytes() == b"done"


def aio_receiver(path: str, n: int, delay: float, pause_every: int) -> None:
    """Connect, sleep `delay` (the parent's sends fill the ring meanwhile),
    receive aio_msg(0..n) in order with the blocking API (pausing 20 ms
    after every `pause_every`-th), answer b"ok", then wait for the parent
    to close."""
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        time.sleep(delay)
        for i in range(n):
            got = ch.recv(timeout=TIMEOUT).tobytes()
            if got != aio_msg(i):
                raise AssertionError(f"message {i}: got {got[:8]!r}… ({len(got)} bytes)")
            if pause_every and i % pause_every == pause_every - 1:
                time.sleep(0.02)
        ch.send(b"ok", timeout=TIMEOUT)
        try:
            ch.recv(timeout=TIMEOUT)
            raise AssertionError("expected the parent to close")
        except zcio.Disconnected:
            pass


def aio_send_then_hang(path: str, n: int) -> None:
    """Send aio_msg(0..n), then receive nothing and stay alive until
    killed."""
    ch = zcio.Channel.connect(path, timeout=TIMEOUT)
    for i in range(n):
        ch.send(aio_msg(i), timeout=TIMEOUT)
    while True:
        time.sleep(1)


def aio_close_then_linger(path: str, delay: float, seconds: float) -> None:
    """Connect, receive nothing, close the channel after `delay`, then stay
    alive `seconds` with the Channel object (and so its doorbell) still
    referenced."""
    ch = zcio.Channel.connect(path, timeout=TIMEOUT)
    time.sleep(delay)
    ch.close()
    time.sleep(seconds)
    del ch


# --- asyncio peers for rings and rendezvous endpoints (test_asyncio_ring.py,
# test_asyncio_rendezvous.py): the blocking API on the other end -------------


def aio_ring_producer(name: str, n: int, pause_every: int, then: str) -> None:
    """Create the block ring `name` (64 KiB, policy block), wait for one
    consumer, write aio_msg(0..n) with the blocking API (pausing 20 ms
    after every `pause_every`-th block); then by `then`: "close" (the end
    of the stream), "fail" (close_with_error(7)) or "hang" (stay alive
    until killed)."""
    p = zcio.RingProducer(name, size=64 << 10, layout="variable", policy="block")
    if p.wait_for_consumers(1, timeout=TIMEOUT) < 1:
        raise AssertionError("no consumer attached")
    for i in range(n):
        m = aio_msg(i)
        if p.write(m, timeout=TIMEOUT) != len(m):
            raise AssertionError(f"block {i}: short write")
        if pause_every and i % pause_every == pause_every - 1:
            time.sleep(0.02)
    if then == "close":
        p.close()
    elif then == "fail":
        p.close_with_error(7)
    else:
        while True:
            time.sleep(1)


def aio_ring_consumer(name: str, n: int, delay: float, pause_every: int) -> None:
    """Attach to the block ring `name` (from its oldest data), sleep
    `delay` (the parent's writes fill the ring meanwhile), read
    aio_msg(0..n) in order with the blocking API (pausing 20 ms after every
    `pause_every`-th), then expect the end of the stream."""
    with zcio.RingConsumer(name, start="oldest", timeout=TIMEOUT) as c:
        time.sleep(delay)
        for i in range(n):
            got = c.read(4096, timeout=TIMEOUT)
            if got != aio_msg(i):
                raise AssertionError(f"block {i}: got {got[:8]!r}… ({len(got)} bytes)")
            if pause_every and i % pause_every == pause_every - 1:
                time.sleep(0.02)
        end = c.read(4096, timeout=TIMEOUT)
        if end != b"":
            raise AssertionError(f"expected the end of the stream, got {len(end)} bytes")


def aio_stream(total: int) -> bytes:
    """The byte stream of the continuous-ring tests."""
    return bytes((k * 7 + k // 251) & 0xFF for k in range(total))


def aio_stream_consumer(name: str, total: int, delay: float) -> None:
    """Attach to the continuous ring `name`, sleep `delay`, read `total`
    bytes of aio_stream in small reads with pauses, then expect the end."""
    want = aio_stream(total)
    got = bytearray()
    with zcio.RingConsumer(name, start="oldest", timeout=TIMEOUT) as c:
        time.sleep(delay)
        k = 0
        while len(got) < total:
            b = c.read(3000, timeout=TIMEOUT)
            if not b:
                raise AssertionError(f"the stream ended after {len(got)} bytes")
            got += b
            k += 1
            if k % 17 == 0:
                time.sleep(0.01)
        if bytes(got) != want:
            raise AssertionError("the stream arrived corrupt or out of order")
        if c.read(3000, timeout=TIMEOUT) != b"":
            raise AssertionError("expected the end of the stream")


def aio_ring_idle_consumer(name: str) -> None:
    """Attach to ring `name` and read nothing; stay alive until killed."""
    c = zcio.RingConsumer(name, start="oldest", timeout=TIMEOUT)
    while c is not None:
        time.sleep(1)


def aio_rdv_caller(path: str, n: int, pause_every: int) -> None:
    """Connect and call CALL [i] for i in 0..n with the blocking API,
    expecting REPLY [2i] (pausing 20 ms after every `pause_every`-th call);
    then hang up."""
    with zcio.Rendezvous.connect(path, timeout=TIMEOUT) as ep:
        for i in range(n):
            r = ep.call(CALL, (i,), timeout=TIMEOUT)
            if (r.label, r.words) != (REPLY, (2 * i,)):
                raise AssertionError(f"call {i}: got {r!r}")
            if pause_every and i % pause_every == pause_every - 1:
                time.sleep(0.02)


def aio_rdv_sender(path: str, n: int, pause_every: int) -> None:
    """Connect and send NOTE [i] for i in 0..n with the blocking API
    (pausing 20 ms after every `pause_every`-th); then wait for the
    parent's CALL [n] and answer REPLY [n]; then wait for it to hang up."""
    with zcio.Rendezvous.connect(path, timeout=TIMEOUT) as ep:
        for i in range(n):
            ep.send(NOTE, (i,), timeout=TIMEOUT)
            if pause_every and i % pause_every == pause_every - 1:
                time.sleep(0.02)
        m = ep.recv(timeout=TIMEOUT)
        if (m.label, m.words) != (CALL, (n,)):
            raise AssertionError(f"expected CALL [{n}], got {m!r}")
        ep.send(REPLY, (n,), timeout=TIMEOUT)
        try:
            ep.recv(timeout=TIMEOUT)
            raise AssertionError("expected the parent to hang up")
        except zcio.Disconnected:
            pass


def aio_rdv_receiver(path: str, n: int, delay: float, seed: int) -> None:
    """Connect, sleep `delay`, then receive NOTE [i] for i in 0..n with the
    blocking API, each exactly once and in order, pausing a random 0..3 ms
    before each receive; then answer REPLY [n] and wait for the hang-up."""
    import random

    rng = random.Random(seed)
    with zcio.Rendezvous.connect(path, timeout=TIMEOUT) as ep:
        time.sleep(delay)
        for i in range(n):
            time.sleep(rng.uniform(0, 0.003))
            m = ep.recv(timeout=TIMEOUT)
            if (m.label, m.words) != (NOTE, (i,)):
                raise AssertionError(f"message {i}: got {m!r}")
        ep.send(REPLY, (n,), timeout=TIMEOUT)
        try:
            ep.recv(timeout=TIMEOUT)
            raise AssertionError("expected the parent to hang up")
        except zcio.Disconnected:
            pass


def aio_rdv_echo_late(path: str, delay: float, n: int) -> None:
    """Connect, sleep `delay`, then echo n messages back (label and words)
    with the blocking API; then wait for the hang-up."""
    with zcio.Rendezvous.connect(path, timeout=TIMEOUT) as ep:
        time.sleep(delay)
        for _ in range(n):
            m = ep.recv(timeout=TIMEOUT)
            ep.send(m.label, m.words, timeout=TIMEOUT)
        try:
            ep.recv(timeout=TIMEOUT)
            raise AssertionError("expected the parent to hang up")
        except zcio.Disconnected:
            pass


class Reading(__import__("ctypes").Structure):
    """The typed-message test type: the layout of the Rust `Reading` of
    crates/zcio-c/src/typed.rs and the C `struct reading` (16 bytes,
    align 8)."""

    import ctypes as _c

    _fields_ = [
        ("seq", _c.c_uint32),
        ("ok", _c.c_bool),
        ("kind", _c.c_uint8),
        ("reserved", _c.c_uint8 * 2),
        ("value", _c.c_double),
    ]


READING = ("example.Reading", 1)


def typed_sender(path: str) -> None:
    """A tagged Reading; one of schema 2; one untagged; one whose bool byte
    is 2 (hostile, tag valid); one tagged with 8 bytes of payload."""
    from zcio._zcio import _typed_header

    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        r = Reading(seq=1, ok=True, kind=3, value=2.5)
        zcio.send_typed(ch, r, tag=READING, timeout=TIMEOUT)
        zcio.send_typed(ch, r, tag=("example.Reading", 2), timeout=TIMEOUT)
        zcio.send_typed(ch, r, timeout=TIMEOUT)
        head = _typed_header("example.Reading", 1, 16, 8)
        raw = bytearray(bytes(r))
        raw[4] = 2
        ch.send(head + bytes(raw), timeout=TIMEOUT)
        ch.send(head + bytes(8), timeout=TIMEOUT)
        assert ch.recv(timeout=TIMEOUT).tobytes() == b"done"


def recv_channels(path: str, n: int, msgs: int) -> None:
    """Accept `n` channels one after the other; read each one's `msgs`
    messages (whenever they come: before or after the sender closed), then
    its end (Disconnected), then close it."""
    with zcio.Listener(path) as lst:
        for _ in range(n):
            with lst.accept(timeout=TIMEOUT) as ch:
                for i in range(msgs):
                    assert ch.recv(timeout=TIMEOUT).tobytes() == bytes([i]) * 1024
                try:
                    ch.recv(timeout=TIMEOUT)
                    raise AssertionError("more messages than sent")
                except zcio.Disconnected:
                    pass


def connect_and_idle(path: str, go, options: dict) -> None:
    """Connect (with these channel options), receive nothing until `go` is
    set, then close."""
    with zcio.Channel.connect(path, timeout=TIMEOUT, **options):
        assert go.wait(TIMEOUT), "parent never said go"


def connect_expect_refused(path: str) -> None:
    """Connect to a listener whose access policy excludes us: refused."""
    try:
        zcio.Channel.connect(path, timeout=TIMEOUT)
    except zcio.ConnectError as e:
        assert "refused" in str(e).lower() or "access" in str(e).lower(), str(e)
        return
    raise AssertionError("connect was admitted")


def recv_and_hold(path: str, n: int, got, go) -> None:
    """Receive `n` messages, set `got`, and hold them until `go` is set."""
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        held = [ch.recv(timeout=TIMEOUT) for _ in range(n)]
        got.set()
        assert go.wait(TIMEOUT), "parent never said go"
        del held


def sendv_parts(path: str) -> None:
    """Send one message of three parts (a filled-and-truncated pool buffer,
    bytes, another pool buffer), then wait for "done"."""
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        pool = zcio.Pool("sendv-child", chunk_size=1 << 20, max_chunks=4)
        a = pool.alloc(64 << 10)  # reserve more than needed
        with memoryview(a) as mv:
            mv[:5000] = sized(1, 5000)  # fill part of it
        a.truncate(5000)  # send only that part
        b = pool.alloc(8192)
        with memoryview(b) as mv:
            mv[:] = sized(3, 8192)
        ch.sendv([a, sized(2, 300), b], timeout=TIMEOUT)
        assert a.sent and b.sent
        assert ch.recv(timeout=TIMEOUT).tobytes() == b"done"


def ring_write_kinds(name: str) -> None:
    """Write a tagged block, a gathered block and a reserved-and-committed
    block into a variable ring, checking the reservation rules on the way."""
    with zcio.RingProducer(name, size=1 << 16, layout="variable") as p:
        assert p.wait_for_consumers(1, timeout=TIMEOUT) >= 1
        p.write(b"tagged", tag=7)
        assert p.write_gather([b"he", memoryview(b"ll"), bytearray(b"o!")], tag=8) == 6
        r = p.reserve(100)
        assert len(r) == 100 and not r.committed
        for bad in (lambda: p.write(b"x"), lambda: p.write_gather([b"x"]), p.close):
            try:
                bad()
            except BufferError:
                pass
            else:
                raise AssertionError("a write or close went through a reservation")
        mv = memoryview(r)
        mv[:50] = sized(9, 50)
        try:
            r.commit(50, tag=9)
        except BufferError:
            pass  # the view is still out
        else:
            raise AssertionError("commit went through with a view out")
        mv.release()
        r.commit(50, tag=9)
        assert r.committed
        for bad in (lambda: memoryview(r), lambda: r.commit(1)):
            try:
                bad()
            except ValueError:
                pass
            else:
                raise AssertionError("a committed reservation was used")
        with p.reserve(10) as r2:
            memoryview(r2)[:3] = b"xyz"
        # Leaving the block cancelled it: writes go again.
        p.write(b"last", tag=10)


def send_then_close(path: str, sizes: list[int]) -> None:
    """Send message i of sizes[i] bytes, then close at once."""
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        for i, n in enumerate(sizes):
            ch.send(sized(i, n), timeout=TIMEOUT)


def recv_expect_then_end(path: str, sizes: list[int]) -> None:
    """Receive message i of sizes[i] bytes, then see the channel end."""
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        for i, n in enumerate(sizes):
            assert ch.recv(timeout=TIMEOUT).tobytes() == sized(i, n), i
        try:
            ch.recv(timeout=TIMEOUT)
        except zcio.Disconnected:
            return
        raise AssertionError("a message after the last one")


def rdv_fd_peer(path: str) -> None:
    """Pass a pipe's read end (with bytes waiting in it) to the parent, then
    take a descriptor from the parent and write into it."""
    with zcio.Rendezvous.connect(path, timeout=TIMEOUT) as ep:
        r, w = os.pipe()
        os.write(w, b"through the pipe")
        os.close(w)
        ep.send(1, (16,), timeout=TIMEOUT, fds=[r])
        os.close(r)  # the parent has its own duplicate
        m = ep.recv(timeout=TIMEOUT)
        assert m.label == 2 and len(m.fds) == 1
        (fd,) = m.take_fds()
        assert m.fds == ()
        with os.fdopen(fd, "wb") as f:
            f.write(b"and back")
        ep.send(3, timeout=TIMEOUT)
        # The parent's recv_into test.
        ep.send(5, tuple(range(1, 9)), timeout=TIMEOUT)
        ep.send(6, (7,), timeout=TIMEOUT)
        assert ep.recv(timeout=TIMEOUT).label == 99  # done


def rdv_caller(path: str, i: int) -> None:
    """Call twice with our number; the answer is ten times it."""
    with zcio.Rendezvous.connect(path, timeout=TIMEOUT) as ep:
        for x in (i, i + 100):
            m = ep.call(2, (x,), timeout=TIMEOUT)
            assert (m.label, m.words) == (3, (x * 10,)), m


def rdv_connect_expect_refused(path: str) -> None:
    try:
        zcio.Rendezvous.connect(path, timeout=TIMEOUT)
    except zcio.ConnectError:
        return
    raise AssertionError("connect was admitted")


def ring_read_tags(name: str, go, out_path: str) -> None:
    """Attach, wait for `go`, read every block (tag, bytes) until the end of
    the stream and write them as JSON to `out_path`."""
    with zcio.RingConsumer(name, start="oldest", timeout=TIMEOUT) as cons:
        assert go.wait(TIMEOUT), "parent never said go"
        got = []
        while True:
            pk = cons.peek(timeout=TIMEOUT)
            if pk is None:
                break
            with pk:
                got.append((pk.tag, pk.tobytes().decode()))
    with open(out_path, "w") as f:
        json.dump(got, f)


def recv_parts_and_end(path: str, want: list[bytes]) -> None:
    """Receive one message of len(want) slices with these bytes."""
    with zcio.Channel.connect(path, timeout=TIMEOUT) as ch:
        m = ch.recv(timeout=TIMEOUT)
        assert m.nslices == len(want), m
        assert [bytes(s) for s in m.slices()] == want
        assert ch.recv(timeout=TIMEOUT).tobytes() == b"done"


def rdv_take_fd_and_write(path: str) -> None:
    """Receive a descriptor and write into it, then answer."""
    with zcio.Rendezvous.connect(path, timeout=TIMEOUT) as ep:
        m = ep.recv(timeout=TIMEOUT)
        (fd,) = m.take_fds()
        with os.fdopen(fd, "wb") as f:
            f.write(b"async fd")
        ep.send(m.label + 1, timeout=TIMEOUT)
