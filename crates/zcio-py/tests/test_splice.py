"""Associations across real processes: a file sent to a child's socket
(sendfile), a child's pipe through crc32c + zstd into a file, asynchronous
increments with select() on fileno() and a chaining callback, stop of a
silent source (asynchronous, and a run blocked in another thread), a sender
killed with SIGKILL mid-stream, a callback that raises, zcio.cp, a user
module loaded from a shared object, channels as source and sink (a child
at the other end; one killed with SIGKILL), the quench hook with a child
that holds its pipe full, module_names, and bad input of every kind.

Children are separate interpreters (subprocess) under a watchdog; one that
fails to start fails the test. No timing assertions."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import pathlib
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading

import pytest

import zcio

WATCHDOG = 60.0

#: The test stream: byte k is STREAM[k % len(STREAM)] (not too compressible).
_SEED = hashlib.sha256(b"zcio splice").digest()
STREAM_UNIT = b"".join(hashlib.sha256(_SEED + i.to_bytes(4, "little")).digest()[:29] for i in range(4099))


def stream(n: int) -> bytes:
    reps = n // len(STREAM_UNIT) + 1
    return (STREAM_UNIT * reps)[:n]


# The children: read or write the stream over TCP or a pipe.
CHILD = r"""
import hashlib, os, signal, socket, sys, time
sys.path.insert(0, {here!r})
from test_splice import stream
role, arg = sys.argv[1], sys.argv[2:]
if role == "tcp-reader":
    s = socket.create_connection(("127.0.0.1", int(arg[0])), timeout=30)
    h, n = hashlib.sha256(), 0
    while True:
        b = s.recv(1 << 16)
        if not b:
            break
        h.update(b)
        n += len(b)
    print(n, h.hexdigest(), flush=True)
elif role == "tcp-writer":
    s = socket.create_connection(("127.0.0.1", int(arg[0])), timeout=30)
    size, mode = int(arg[1]), arg[2]
    if mode == "silent":
        time.sleep(60)
    s.sendall(stream(size))
    if mode == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    s.close()
elif role == "pipe-writer":
    sys.stdout.buffer.write(stream(int(arg[0])))
    sys.stdout.buffer.flush()
elif role == "slow-reader":
    # wait for a line on descriptor arg[0], then read stdin to its end
    with os.fdopen(int(arg[0]), "rb") as ctl:
        ctl.readline()
    h, n = hashlib.sha256(), 0
    while True:
        b = sys.stdin.buffer.read1(1 << 16)
        if not b:
            break
        h.update(b)
        n += len(b)
    print(n, h.hexdigest(), flush=True)
elif role == "chan-reader":
    import zcio
    ch = zcio.Channel.connect(arg[0], timeout=30)
    h, n = hashlib.sha256(), 0
    try:
        while True:
            b = bytes(ch.recv(timeout=30))
            h.update(b)
            n += len(b)
    except zcio.Disconnected:
        pass
    print(n, h.hexdigest(), flush=True)
elif role == "chan-writer":
    import zcio
    ch = zcio.Channel.connect(arg[0], timeout=30)
    data = stream(int(arg[1]))
    for at in range(0, len(data), 60000):
        ch.send(data[at:at + 60000], timeout=30)
    print("sent", flush=True)
    time.sleep(60)  # until killed (the watchdog's bound)
"""


class Kid:
    """A child interpreter running CHILD under a watchdog."""

    def __init__(self, *args: str, stdout=subprocess.PIPE, **popen):
        code = CHILD.format(here=os.path.dirname(os.path.abspath(__file__)))
        self.proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=stdout, **popen)

    def finish(self) -> tuple[int, str]:
        try:
            out, _ = self.proc.communicate(timeout=WATCHDOG)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            pytest.fail(f"child {self.proc.args[3:]} did not finish within {WATCHDOG} s")
        return self.proc.returncode, (out or b"").decode()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def kids():
    started: list[Kid] = []

    def start(*args: str, **kw) -> Kid:
        k = Kid(*args, **kw)
        started.append(k)
        return k

    yield start
    for k in started:
        k.kill()


def listener() -> socket.socket:
    l = socket.socket()
    l.bind(("127.0.0.1", 0))
    l.listen(4)
    l.settimeout(WATCHDOG)  # a child that never connects fails the test
    return l


def writer_child(kids, size: int, mode: str) -> tuple[Kid, socket.socket]:
    with listener() as l:
        k = kids("tcp-writer", str(l.getsockname()[1]), str(size), mode)
        conn, _ = l.accept()
    return k, conn


def crc32c(data: bytes) -> int:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------- tests


def test_file_to_child_socket_uses_sendfile(kids, tmp_path):
    data = stream((4 << 20) + 77)
    src = tmp_path / "src"
    src.write_bytes(data)
    with listener() as l:
        k = kids("tcp-reader", str(l.getsockname()[1]))
        conn, _ = l.accept()
    with conn, open(src, "rb") as f, zcio.splice(f, conn) as a:
        pass  # the association has duplicates: ours close here
    # (closed before running: nothing moved, the child saw the end)
    assert k.finish() == (0, f"0 {sha(b'')}\n")

    with listener() as l:
        k = kids("tcp-reader", str(l.getsockname()[1]))
        conn, _ = l.accept()
    with open(src, "rb") as f:
        a = zcio.splice(f, conn.fileno())
    conn.close()
    st = a.status()
    assert st.mover == "sendfile" and not st.active and st.moved == 0
    c = a.run()
    assert (c.moved, c.eof, c.stopped, c.error) == (len(data), True, False, None)
    st = a.close()
    assert st.eof and st.moved == len(data) and st.mover == "sendfile" and st.fell_back == []
    assert a.closed and a.close().moved == len(data)
    assert k.finish() == (0, f"{len(data)} {sha(data)}\n")


def test_child_pipe_through_crc32c_and_zstd(kids, tmp_path):
    size = (1 << 20) + 333
    data = stream(size)
    k = kids("pipe-writer", str(size))
    out = tmp_path / "out.zst"
    a = zcio.splice(k.proc.stdout, str(out), modules=["crc32c", "zstd:level=3"])
    k.proc.stdout.close()
    st = a.status()
    assert st.mover == "buffer" and st.modules == ["crc32c", "zstd"]
    c = a.run()
    assert c.eof and c.moved == size and c.error is None
    assert k.finish()[0] == 0
    assert a.control("crc32c", "value") == f"{crc32c(data):#010x}"
    assert f"bytes={size}" in a.control(0, "stats")
    stats = dict(a.module_stats())
    assert stats["crc32c"]["bytes"] == size
    assert stats["zstd"]["bytes_in"] == size
    assert 0 < stats["zstd"]["bytes_out"] < size
    assert a.pop() == "zstd" and a.pop() == "crc32c" and a.pop() is None
    assert a.status().mover == "splice"
    a.close()
    # Decompressed by zcio's own unzstd module, and by the zstd CLI if any.
    dec = tmp_path / "dec"
    st = zcio.cp(out, dec, ["unzstd"])
    assert st.eof and dec.read_bytes() == data
    if shutil.which("zstd"):
        r = subprocess.run(["zstd", "-d", "-c", str(out)], capture_output=True, timeout=WATCHDOG)
        assert r.returncode == 0 and r.stdout == data
    else:
        print("skipped: the zstd CLI check (no zstd command)")


def test_async_start_select_wait_and_callback(kids, tmp_path):
    size = (9 << 20) + 5
    k, conn = writer_child(kids, size, "close")
    out = tmp_path / "async"
    with conn:
        a = zcio.splice(conn, str(out))
    with a:
        assert a.wait(0) is None  # nothing running
        total, n, eof = 0, 0, False
        while not eof:
            a.start(zcio.DEFAULT)
            r, _, _ = select.select([a], [], [], WATCHDOG)
            assert r == [a]
            c = a.wait(0)
            assert c is not None and c.error is None and c.moved <= 4 << 20
            total += c.moved
            eof = c.eof
            n += 1
            assert n < 1000
        assert total == size and n >= 3
        assert select.select([a], [], [], 0)[0] == []
    assert k.finish()[0] == 0
    assert out.read_bytes() == stream(size)

    # A callback chains increments (1 MiB each after the first).
    src = tmp_path / "src"
    src.write_bytes(stream(size))
    seen = []

    def more(c):
        seen.append(c.moved)
        return 1 << 20

    with zcio.splice(str(src), str(tmp_path / "copy")) as a:
        a.on_complete(more)
        a.start(3 << 20)
        got = []
        while not got or not got[-1].eof:
            c = a.wait(WATCHDOG)
            assert c is not None and c.error is None and c.callback_error is None
            got.append(c)
        assert [c.moved for c in got] == seen
        assert sum(seen) == size and len(seen) >= 8
        st = a.stats()
        assert st["started"] == len(seen) == st["completed"] and st["failed"] == 0
        assert st["moved_bytes"] == size and st["running"] is False
    assert (tmp_path / "copy").read_bytes() == stream(size)


def test_stop_a_silent_source(kids, tmp_path):
    k, conn = writer_child(kids, 0, "silent")
    with conn:
        a = zcio.splice(conn, str(tmp_path / "out"))
    a.start()
    assert a.wait(0.1) is None
    assert a.status().active
    a.stop()
    c = a.wait(WATCHDOG)
    assert c is not None and c.stopped and c.moved == 0 and not c.eof
    assert not a.status().active

    # A run blocked (without the GIL) in another thread, stopped from here.
    result = []
    t = threading.Thread(target=lambda: result.append(a.run()))
    t.start()
    while not a.status().active:
        t.join(0.001)
    with pytest.raises(zcio.SpliceError) as e:
        a.push("count")  # the running thread has the association
    assert e.value.errno == errno.EBUSY
    a.stop()
    t.join(WATCHDOG)
    assert not t.is_alive()
    assert result[0].stopped and result[0].moved == 0
    a.close()
    k.kill()


@pytest.mark.parametrize("modules", [[], ["crc32c", "zstd"]])
def test_sender_killed_mid_stream(kids, tmp_path, modules):
    size = 2 << 20
    k, conn = writer_child(kids, size, "die")
    with conn:
        a = zcio.splice(conn, str(tmp_path / "out"), modules=modules)
    with a:
        try:
            c = a.run()
        except zcio.SpliceError:
            pass  # an error before any byte moved: also an end, not a hang
        else:
            assert c.eof or c.error is not None
            assert c.moved <= size
        assert not a.status().active
    rc, _ = k.finish()
    assert rc == -signal.SIGKILL


def test_callback_exception_stops_flow_and_is_reported(tmp_path):
    src = tmp_path / "src"
    src.write_bytes(stream(10 << 20))

    class Boom(Exception):
        pass

    def bad(c):
        raise Boom("from the callback")

    with zcio.splice(str(src), str(tmp_path / "dst")) as a:
        a.on_complete(bad)
        a.start(1 << 20)
        c = a.wait(WATCHDOG)
        assert c is not None and c.moved == 1 << 20
        assert isinstance(c.callback_error, Boom)
        assert a.wait(0) is None and not a.status().active  # flow stopped
        # A callback answering nonsense is reported the same way.
        a.on_complete(lambda c: "nonsense")
        a.start(zcio.DEFAULT)
        c = a.wait(WATCHDOG)
        assert isinstance(c.callback_error, TypeError)
        a.on_complete(None)
        a.start(1)
        assert a.wait(WATCHDOG).callback_error is None


def test_cp(tmp_path):
    data = stream((3 << 20) + 1)
    src = tmp_path / "src"
    src.write_bytes(data)
    st = zcio.cp(src, tmp_path / "copy")
    assert st.moved == len(data) and st.eof
    assert st.mover == "copy_file_range" or st.fell_back
    assert (tmp_path / "copy").read_bytes() == data
    st = zcio.cp(str(src), str(tmp_path / "z"), modules=("crc32c", "zstd:level=1"))
    assert st.mover == "buffer" and st.modules == ["crc32c", "zstd"]
    zcio.cp(tmp_path / "z", tmp_path / "back", ["unzstd"])
    assert (tmp_path / "back").read_bytes() == data


def test_cp_refuses_the_source_as_destination(tmp_path):
    """zcio.cp never destroys its source: the same file by its own path, a
    symlink or a hard link is refused ("are the same file") and keeps every
    byte; a destination directory gets the source's name."""
    data = stream((1 << 20) + 3)
    src = tmp_path / "a.bin"
    src.write_bytes(data)
    (tmp_path / "link.bin").symlink_to(src)
    os.link(src, tmp_path / "hard.bin")
    for dst in (src, str(src), tmp_path / "link.bin", tmp_path / "hard.bin", tmp_path):
        for modules in ((), ("crc32c",)):
            with pytest.raises(zcio.SpliceError, match="are the same file"):
                zcio.cp(src, dst, modules)
            assert src.read_bytes() == data, (dst, modules)
    into = tmp_path / "into"
    into.mkdir()
    st = zcio.cp(src, into)
    assert st.moved == len(data)
    assert (into / "a.bin").read_bytes() == data


def test_finish_ends_a_limited_stream_with_its_modules_flushed(tmp_path):
    """Association.finish() ends the stream before the source's end: the
    zstd frame is complete and decodes to exactly what was moved."""
    data = stream(3 << 20)
    src = tmp_path / "src"
    src.write_bytes(data)
    with zcio.splice(str(src), str(tmp_path / "z"), modules=["zstd:level=1"]) as a:
        c = a.run(1000000)
        assert c.moved == 1000000 and not c.eof
        a.finish()
        assert a.run().eof
    zcio.cp(tmp_path / "z", tmp_path / "back", ["unzstd"])
    assert (tmp_path / "back").read_bytes() == data[:1000000]


def test_load_module(tmp_path):
    junk = tmp_path / "junk.so"
    junk.write_text("not an ELF object")
    with pytest.raises(zcio.ModuleError, match="junk.so"):
        zcio.load_module(junk)
    cc = shutil.which("cc")
    root = pathlib.Path(__file__).resolve().parents[3]
    rot13 = root / "c" / "modules" / "rot13.c"
    if not cc or not rot13.exists():
        pytest.skip("skipped: no C compiler or no c/modules/rot13.c to build the module")
    so = tmp_path / "librot13.so"
    subprocess.run(
        [cc, "-O2", "-shared", "-fPIC", "-I", str(root / "include"), "-o", str(so), str(rot13)],
        check=True,
        timeout=WATCHDOG,
    )
    assert zcio.load_module(so) == "rot13"
    (tmp_path / "t").write_bytes(b"Hello, zcio!\n")
    zcio.cp(tmp_path / "t", tmp_path / "r", ["rot13"])
    assert (tmp_path / "r").read_bytes() == b"Uryyb, mpvb!\n"


def test_file_into_a_childs_channel(kids, tmp_path):
    size = (5 << 20) + 321
    src = tmp_path / "chan.src"
    src.write_bytes(stream(size))
    sock = str(tmp_path / "chan.sock")
    with zcio.Listener(sock) as lst:
        kid = kids("chan-reader", sock)
        ch = lst.accept(timeout=WATCHDOG)
    a = zcio.splice(src, ch)
    with pytest.raises(ValueError):
        ch.send(b"x")  # the association has it now
    st = a.status()
    assert (st.source, st.sink, st.mover) == (str(src), "channel", "buffer")
    c = a.run()
    assert c.eof and c.error is None and c.moved == size
    st = a.close()  # closes the channel: the child sees the end
    assert st.moved == size and st.copied == 0
    rc, out = kid.finish()
    assert rc == 0
    assert out.split() == [str(size), sha(stream(size))]


def test_a_childs_channel_into_a_file_until_it_is_killed(kids, tmp_path):
    size = (4 << 20) + 999
    out = tmp_path / "chansrc.out"
    sock = str(tmp_path / "chansrc.sock")
    with zcio.Listener(sock) as lst:
        kid = kids("chan-writer", sock, str(size))
        ch = lst.accept(timeout=WATCHDOG)
    with open(out, "wb") as f, zcio.splice(ch, f) as a:
        assert a.status().source == "channel"
        c = a.run(size)
        assert c.error is None and c.moved == size and not c.eof
        assert kid.proc.stdout.readline() == b"sent\n"
        kid.proc.send_signal(signal.SIGKILL)  # no orderly close
        rc, _ = kid.finish()
        assert rc == -signal.SIGKILL
        c = a.run()
        assert c.eof and c.moved == 0
    assert out.read_bytes() == stream(size)


def sink_fits_one_block(fd: int) -> None:
    """One block of the buffer path (256 KiB) fills the pipe exactly: the
    next block finds it full (a block larger than the room left would just
    wait in its write, unquenched)."""
    assert fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 256 << 10) == 256 << 10


def test_quench_hook_with_a_child_holding_its_pipe_full(kids, tmp_path):
    size = 4 << 20  # far more than a pipe holds
    src = tmp_path / "q.src"
    src.write_bytes(stream(size))
    data_r, data_w = os.pipe()
    sink_fits_one_block(data_w)
    ctl_r, ctl_w = os.pipe()
    kid = kids("slow-reader", str(ctl_r), stdin=data_r, pass_fds=(ctl_r,))
    os.close(data_r)
    os.close(ctl_r)
    events: list[bool] = []
    quenched = threading.Event()

    def on_quench(q: bool) -> None:
        events.append(q)
        if q:
            quenched.set()

    with zcio.splice(src, data_w, modules=["count"]) as a:
        os.close(data_w)  # the association has its own
        a.on_quench(on_quench)
        a.start(None)
        with pytest.raises(zcio.SpliceError) as e:
            a.on_quench(None)  # between increments only
        assert e.value.errno == errno.EBUSY
        assert quenched.wait(WATCHDOG), "the sink never filled"
        os.write(ctl_w, b"go\n")
        os.close(ctl_w)
        c = a.wait(WATCHDOG)
        assert c is not None and c.eof and c.moved == size
    rc, out = kid.finish()
    assert rc == 0 and out.split() == [str(size), sha(stream(size))]
    assert events[0] is True and events[-1] is False
    assert all(x != y for x, y in zip(events, events[1:])), events  # alternates


def test_quench_callback_exception_is_unraisable_and_flow_goes_on(tmp_path, monkeypatch):
    size = 1 << 20
    src = tmp_path / "qe.src"
    src.write_bytes(stream(size))
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))
    r, w = os.pipe()  # read by this test only once the hook has run
    sink_fits_one_block(w)
    hit = threading.Event()

    def boom(q: bool) -> None:
        hit.set()
        raise RuntimeError("quench")

    got = bytearray()
    with zcio.splice(src, w, modules=["count"]) as a:
        os.close(w)
        a.on_quench(boom)
        a.start(None)
        assert hit.wait(WATCHDOG), "the sink never filled"
        while len(got) < size:
            b = os.read(r, 1 << 16)
            assert b
            got += b
        c = a.wait(WATCHDOG)
        assert c is not None and c.eof and c.error is None
    os.close(r)
    assert bytes(got) == stream(size)
    assert RuntimeError in seen


def test_module_names():
    names = zcio.module_names()
    assert names == sorted(names) and len(set(names)) == len(names)
    assert {"count", "crc32c", "tap"} <= set(names)
    for n in names:
        assert isinstance(n, str) and n


def test_bad_input(tmp_path):
    out = str(tmp_path / "never")
    # modules: checked before any endpoint is opened (the sink is not created)
    with pytest.raises(zcio.ModuleError, match="zsdt") as e:
        zcio.splice("/nonexistent/src", out, modules=["crc32c", "zsdt"])
    assert "zstd" in str(e.value)
    with pytest.raises(zcio.ModuleError):
        zcio.cp("/nonexistent/src", out, ["zstd:level=banana"])
    with pytest.raises(TypeError):
        zcio.cp("/nonexistent/src", out, "zstd")
    with pytest.raises(TypeError):
        zcio.cp("/nonexistent/src", out, [3])
    assert not os.path.exists(out)
    # specs and descriptors
    with pytest.raises(zcio.SpliceError) as e:
        zcio.splice("/nonexistent/src", out)
    assert e.value.errno == errno.ENOENT and isinstance(e.value, OSError)
    with pytest.raises(zcio.SpliceError) as e:
        zcio.splice("fd:x", out)
    with pytest.raises(zcio.SpliceError):
        zcio.splice("", out)
    l = listener()
    port = l.getsockname()[1]
    l.close()
    with pytest.raises(zcio.SpliceError) as e:
        zcio.splice(f"tcp:127.0.0.1:{port}", out)
    assert e.value.errno == errno.ECONNREFUSED
    r, w = os.pipe()
    os.close(w)
    with pytest.raises(zcio.SpliceError) as e:
        zcio.splice(r, w)
    assert e.value.errno == errno.EBADF
    with pytest.raises(zcio.SpliceError) as e:
        zcio.splice(-1, r)
    assert e.value.errno == errno.EBADF
    with pytest.raises(zcio.SpliceError) as e:
        zcio.splice(2**40, r)
    with pytest.raises(TypeError):
        zcio.splice(1.5, r)
    with pytest.raises(TypeError):
        zcio.splice(True, r)
    d = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    with pytest.raises(zcio.SpliceError):
        zcio.splice(d, r)
    os.close(d)
    # a live association
    r2, w2 = os.pipe()
    with zcio.splice(r2, w2) as a:
        for bad in (0, -1, True, "x", 1.5):
            with pytest.raises((ValueError, TypeError)):
                a.run(bad)
        with pytest.raises(zcio.ModuleError):
            a.push("nosuchmodule")
        with pytest.raises(zcio.ModuleError):
            a.control("zstd", "stats")
        a.push("count")
        with pytest.raises(zcio.ModuleError):
            a.control("count", "nosuchkey")
        with pytest.raises(TypeError):
            a.control(1.5, "stats")
        with pytest.raises(ValueError):
            a.wait(-1)
        a.start()  # the pipe stays silent
        for call in (a.start, a.run, lambda: a.push("count"), a.pop, lambda: a.on_complete(None)):
            with pytest.raises(zcio.SpliceError) as e:
                call()
            assert e.value.errno == errno.EBUSY
        a.stop()
        assert a.wait(WATCHDOG).stopped
        assert a.pop() == "count"
    assert a.closed
    with pytest.raises(ValueError, match="closed"):
        a.start()
    assert a.status().moved == 0  # still readable after close
    os.close(r)
    os.close(r2)
    os.close(w2)


def test_one_channel_as_both_ends_is_refused_and_kept():
    a, b = zcio.Channel.pair()
    with a, b:
        with pytest.raises(ValueError, match="both source and sink"):
            zcio.splice(a, a)
        # refused before it was taken: the channel still works
        a.send(b"still mine")
        with b.recv(timeout=WATCHDOG) as m:
            assert bytes(m) == b"still mine"
