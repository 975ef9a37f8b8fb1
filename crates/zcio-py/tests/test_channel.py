"""Channels across real processes: bytes, arrays, the zero-copy pool path,
a sender killed mid-stream, forwarding, secured buffers."""

from __future__ import annotations

import errno
import gc
import math
import os
import signal

import numpy as np
import pytest

import zcio
import zcio_children as kids
from test_ipc import in_process_pair

T = kids.TIMEOUT


def test_version_and_exceptions():
    assert isinstance(zcio.__version__, str) and zcio.__version__
    assert issubclass(zcio.Disconnected, ConnectionError)
    assert issubclass(zcio.TimedOut, TimeoutError)
    assert issubclass(zcio.PoolExhausted, zcio.Full)
    assert issubclass(zcio.PoolExhausted, zcio.AllocError)
    assert issubclass(zcio.AllocTimedOut, zcio.TimedOut)
    assert issubclass(zcio.Lapped, zcio.RingError)
    assert issubclass(zcio.MalformedMessage, ValueError)
    for e in (zcio.Disconnected, zcio.Full, zcio.Lapped, zcio.ConnectError):
        assert issubclass(e, zcio.ZcioError)
    for e in (zcio.Full, zcio.Empty, zcio.PoolExhausted):
        assert issubclass(e, zcio.WouldBlock)
    assert issubclass(zcio.WouldBlock, BlockingIOError)


def test_nothing_available_now_is_one_exception_on_every_transport(ring_name, sock_path):
    """Channel, ring, rendezvous, proxy endpoint and pool all say
    WouldBlock (errno EAGAIN, as C's -EAGAIN) when a call may not wait."""

    raised = []

    def catch(f):
        with pytest.raises(zcio.WouldBlock) as e:
            f()
        raised.append(e.value)

    a, b = zcio.Channel.pair()
    with a, b:
        catch(lambda: b.recv(timeout=0))
    prod = zcio.RingProducer(ring_name, size=4096, layout="variable")
    cons = zcio.RingConsumer(ring_name)
    catch(lambda: cons.read(64, timeout=0))
    pool = zcio.Pool("wb", chunk_size=64 << 10, max_chunks=1, populate=False)
    held = [pool.alloc(64 << 10, timeout=0)]
    catch(lambda: pool.alloc(4096, timeout=0))
    lst, srv, cli = in_process_pair(sock_path)
    with lst, srv, cli:
        catch(lambda: cli.recv(timeout=0))
        catch(lambda: cli.send(1, (2,), timeout=0))
        aep = zcio.ProxyEndpoint(srv)
        catch(lambda: aep.recv(timeout=0))
    assert len(raised) == 6 and held and prod
    for e in raised:
        assert isinstance(e, zcio.ZcioError) and e.errno == errno.EAGAIN, repr(e)


def test_bytes_round_trip_across_processes(sock_path, child):
    sizes = [1, 2, 100, 4095, 4096, 4097, 65536, 1 << 20, 3 << 20]
    c = child(kids.send_bytes, sock_path, sizes)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        assert ch.peer["pid"] == c.pid
        for i, n in enumerate(sizes):
            m = ch.recv(timeout=T)
            assert len(m) == n
            assert m.volatile, "another process's pool buffer is volatile"
            assert not m.secured
            assert bytes(m) == kids.sized(i, n)
            assert m.tobytes() == kids.sized(i, n)
            assert memoryview(m).readonly
        st = ch.stats()
        assert st["msgs_received"] == len(sizes)
        ch.send(b"done", timeout=T)
        c.join_ok()


def test_spin_policy_reads_back_and_a_channel_without_spinning_still_moves_everything(
    sock_path, child
):
    before = zcio.spin_policy()
    assert before == pytest.approx((0.0005, 0.00005))
    with pytest.raises(ValueError):
        zcio.set_spin_policy(max=-1)
    try:
        zcio.set_spin_policy(max=0, task_max=0)
        assert zcio.spin_policy() == (0.0, 0.0)
        sizes = [1, 4096, 65536]
        c = child(kids.send_bytes, sock_path, sizes)
        with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
            for i, n in enumerate(sizes):
                assert bytes(ch.recv(timeout=T)) == kids.sized(i, n)
            ch.send(b"done", timeout=T)
            c.join_ok()
    finally:
        zcio.set_spin_policy(*before)
    assert zcio.spin_policy() == before


def test_connect_waits_for_the_listener_and_times_out(sock_path):
    with pytest.raises(zcio.TimedOut):
        zcio.Channel.connect(sock_path, timeout=0.2)
    with zcio.Listener(sock_path) as lst:
        assert lst.path == sock_path
        with pytest.raises(zcio.TimedOut):
            lst.accept(timeout=0.1)


def test_default_waits_end_at_the_configured_bounds(sock_path, child):
    """timeout=None waits up to the bound the channel's configuration sets
    (0.2 s here), then raises TimedOut: a listener nobody connects to, a
    peer in another process that never sends nor receives."""
    short = 0.2
    with zcio.Listener(sock_path, send_timeout=short, recv_timeout=short, accept_timeout=short) as lst:
        assert lst.accept_timeout == short
        with pytest.raises(zcio.TimedOut):
            lst.accept()
        c = child(kids.chan_connect_and_idle, sock_path)
        with lst.accept(timeout=T) as ch:
            assert (ch.send_timeout, ch.recv_timeout) == (short, short)
            with pytest.raises(zcio.TimedOut):
                ch.recv()
            with pytest.raises(zcio.TimedOut):
                ch.recv_array()
            with pytest.raises(zcio.TimedOut):
                ch.accept_lane()
            sent = 0
            with pytest.raises(zcio.TimedOut):
                while sent < 100_000:  # the peer never receives: the ring fills
                    ch.send(b"x" * 100)
                    sent += 1
            assert sent > 0
        c.kill()
    # Defaults, and math.inf for no bound (an explicit choice).
    a, b = zcio.Channel.pair(recv_timeout=math.inf)
    with a, b:
        assert (a.send_timeout, a.recv_timeout) == (10.0, math.inf)
        with pytest.raises(zcio.Empty):
            a.recv(timeout=0)
    with pytest.raises(ValueError):
        zcio.Channel.pair(recv_timeout=-1)


def test_arrays_across_processes(sock_path, child):
    expected = kids.test_arrays()
    c = child(kids.send_arrays, sock_path)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        for want in expected:
            got = ch.recv_array(timeout=T)
            assert got.dtype == want.dtype, (got.dtype, want.dtype)
            assert got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            assert not got.flags.writeable
            with pytest.raises(ValueError):
                got.flags.writeable = True
            assert isinstance(got.base, zcio.MsgView)
            assert isinstance(got.base.msg, zcio.Msg)
            assert zcio.is_volatile(got)
            if want.size and (want.flags.c_contiguous or want.flags.f_contiguous):
                # Copied once, behind the header, in one slice.
                assert got.base.msg.nslices == 1
        ch.send(b"done", timeout=T)
        c.join_ok()


def test_pool_empty_is_sent_without_copy(sock_path, child):
    c = child(kids.send_pool_array, sock_path)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        got = ch.recv_array(timeout=T)
        want = np.arange(512 * 256, dtype=np.float64).reshape(512, 256)
        np.testing.assert_array_equal(got, want)
        # Header slice + the sender's own pool buffer as the payload slice.
        assert got.base.msg.nslices == 2
        assert len(got.base) == want.nbytes
        ch.send(b"done", timeout=T)
        c.join_ok()


def test_sender_killed_mid_stream_gives_disconnected(sock_path, child):
    c = child(kids.send_forever, sock_path)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        kept = [ch.recv(timeout=T) for _ in range(50)]
        view = memoryview(kept[-1])
        os.kill(c.pid, signal.SIGKILL)
        c.proc.join(T)
        # Drain what it sent before dying; then Disconnected, never a hang
        # (each recv is bounded; TimedOut would fail the test).
        with pytest.raises(zcio.Disconnected):
            for _ in range(1_000_000):
                ch.recv(timeout=T)
        assert ch.disconnected
        # What we received stays readable after the sender's death.
        assert bytes(view) == kids.sized(49, 1000)
        assert kept[0].tobytes() == kids.sized(0, 1000)
        with pytest.raises(zcio.Disconnected):
            ch.send(b"x", timeout=1)


def test_secured_buffers_are_sealed(sock_path, child):
    c = child(kids.send_secured, sock_path)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        m = ch.recv(timeout=T)
        assert m.secured and not m.volatile
        assert bytes(m) == b"sealed!!!!"
        s = m.secure()
        assert s.secured and bytes(s) == b"sealed!!!!"  # shared, no copy needed
        a = ch.recv_array(timeout=T)
        assert a.tolist() == [9] * 8
        assert not zcio.is_volatile(a)
        ch.send(b"done", timeout=T)
        c.join_ok()


def test_secure_copies_volatile_data_once():
    a, b = zcio.Channel.pair()
    pool = zcio.Pool("alias")
    # Larger than a small-message slot (4 KiB), so the buffer is lent by
    # reference, not copied into a slot.
    n = 8192
    buf = pool.alloc(n)
    # An alias numpy keeps without holding an export: it can still write
    # the buffer after the send — the volatile case a receiver must expect.
    alias = np.ndarray((n,), dtype=np.uint8, buffer=buf)
    alias[:] = 1
    a.send(buf, timeout=5)
    m = b.recv(timeout=5)
    assert m.volatile
    safe = m.secure()
    assert not safe.volatile and not safe.secured
    alias[:] = 2  # the originator misbehaves
    assert bytes(m) == b"\x02" * n, "volatile: the receiver sees the write"
    assert bytes(safe) == b"\x01" * n, "secure(): a private copy that cannot change"


def test_forwarding_a_message_is_zero_copy():
    a, b = zcio.Channel.pair()
    c, d = zcio.Channel.pair()
    a.send(b"forward me", timeout=5)
    m = b.recv(timeout=5)
    c.send(m, timeout=5)  # the Msg itself, not a copy
    assert c.pool.stats()["allocs"] == 0
    assert d.recv(timeout=5).tobytes() == b"forward me"


def test_poolbuffer_send_rules():
    a, b = zcio.Channel.pair()
    pool = zcio.Pool("pb")
    buf = pool.alloc(5)
    assert len(buf) == 5 and not buf.sent
    mv = memoryview(buf)
    mv[:] = b"hello"
    with pytest.raises(BufferError):
        a.send(buf, timeout=5)  # a writable view is still out
    mv.release()
    a.send(buf, timeout=5)
    assert buf.sent
    assert memoryview(buf).readonly  # read-only now
    assert bytes(memoryview(buf)) == b"hello"
    assert b.recv(timeout=5).tobytes() == b"hello"
    a.send(buf, timeout=5)  # frozen buffers may be sent again
    assert b.recv(timeout=5).tobytes() == b"hello"


def test_send_errors_and_empty():
    a, b = zcio.Channel.pair()
    with pytest.raises(ValueError):
        a.send(b"", timeout=1)
    with pytest.raises(zcio.Empty):
        b.recv(timeout=0)
    with pytest.raises(zcio.TimedOut):
        b.recv(timeout=0.05)
    with pytest.raises(ValueError):
        b.recv(timeout=-1)
    with pytest.raises(TypeError):
        a.send_array(np.array([object()]), timeout=1)
    a.close()
    with pytest.raises(zcio.Disconnected):
        a.send(b"x", timeout=1)
    with pytest.raises(zcio.Disconnected):
        b.recv(timeout=5)


def test_own_close_says_this_end_was_closed():
    """After this end's own close(), sends and receives raise Disconnected
    with a text that says this end may be the one closed (it used to blame
    the peer alone)."""
    a, b = zcio.Channel.pair()
    a.close()
    calls = [
        lambda: a.send(b"x", timeout=0),
        lambda: a.send(b"x", timeout=1),
        lambda: a.send(b"x"),
        lambda: a.recv(timeout=0),
        lambda: a.recv(timeout=1),
        lambda: a.recv(),
    ]
    for call in calls:
        with pytest.raises(zcio.Disconnected) as e:
            call()
        assert "this end was closed" in str(e.value), str(e.value)
        assert "peer disconnected" not in str(e.value)
    b.close()


def test_listener_path_errors_name_the_path():
    """A path in a missing directory fails with the bind error (ENOENT)
    naming the path, not a later listen() failure (EINVAL); an empty path
    is refused, for channel and rendezvous listeners alike."""
    missing = "/nonexistent-zcio-dir/sub/s.sock"
    for make in (zcio.Listener, zcio.RendezvousListener):
        with pytest.raises(zcio.ConnectError) as e:
            make(missing)
        assert e.value.errno == errno.ENOENT, str(e.value)
        assert missing in str(e.value)
        assert "does not exist" in str(e.value)
        with pytest.raises(zcio.ConnectError) as e:
            make("")
        assert e.value.errno == errno.EINVAL
        assert "the socket path is empty" in str(e.value)


def test_listener_on_a_live_path_is_addrinuse(sock_path):
    with zcio.Listener(sock_path):
        with pytest.raises(zcio.ConnectError) as e:
            zcio.Listener(sock_path)
        assert e.value.errno == errno.EADDRINUSE
        assert sock_path in str(e.value)
    with zcio.Listener(sock_path) as again:  # the path was removed on close
        assert again.path == sock_path


def test_context_managers_close():
    a, b = zcio.Channel.pair()
    with a:
        a.send(b"x", timeout=5)
    m = b.recv(timeout=5)
    assert bytes(m) == b"x"
    with pytest.raises(zcio.Disconnected):
        b.recv(timeout=5)
    assert isinstance(a.fileno(), int) and a.fileno() >= 0
    gc.collect()


def test_blocking_calls_release_the_gil():
    """A receiver blocked in another thread must not stop this thread from
    sending (if recv held the GIL, the send below could never run)."""
    import threading

    a, b = zcio.Channel.pair()
    got = []
    t = threading.Thread(target=lambda: got.append(b.recv(timeout=T).tobytes()))
    t.start()
    a.send(b"while you wait", timeout=T)
    t.join(T)
    assert got == [b"while you wait"]
