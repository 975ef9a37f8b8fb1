"""Messages of several buffers (Channel.sendv, Msg.slices), PoolBuffer
truncation (reserve -> fill -> truncate -> send), Msg.write_to, page_size."""

from __future__ import annotations

import mmap
import os

import pytest

import zcio
import zcio_children as kids

T = kids.TIMEOUT


def test_page_size_and_max_slices():
    assert zcio.page_size() == mmap.PAGESIZE
    assert zcio.MAX_SLICES == 64


def test_sendv_arrives_as_one_message_of_slices(sock_path, child):
    c = child(kids.sendv_parts, sock_path)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        m = ch.recv(timeout=T)
        want = [kids.sized(1, 5000), kids.sized(2, 300), kids.sized(3, 8192)]
        assert len(m) == sum(map(len, want))
        assert m.nslices == 3
        parts = m.slices()
        assert [len(p) for p in parts] == [len(w) for w in want]
        assert [bytes(p) for p in parts] == want
        assert all(p.msg is m for p in parts)
        assert bytes(m) == b"".join(want)
        with pytest.raises(BufferError):
            m.release()  # the slice views keep it
        del parts
        # write_to: writev straight from the shared pages into a pipe.
        r, w = os.pipe()
        try:
            n = m.write_to(w)
            assert n == len(m)
            got = b""
            while len(got) < n:
                got += os.read(r, n - len(got))
            assert got == b"".join(want)
        finally:
            os.close(r)
            os.close(w)
        m.release()
        with pytest.raises(ValueError, match="closed"):
            m.write_to(1)
        ch.send(b"done", timeout=T)
    c.join_ok()


def test_sendv_limits_and_truncate_rules():
    a, b = zcio.Channel.pair()
    with a, b:
        with pytest.raises(ValueError, match="empty"):
            a.sendv([b"", b""])
        with pytest.raises(ValueError, match="at most 64 slices"):
            a.sendv([b"x"] * (zcio.MAX_SLICES + 1))
        a.sendv([b"ab", b"", b"cd"])
        m = b.recv(timeout=T)
        assert bytes(m) == b"abcd" and m.nslices == 2
        # A received message forwarded as a part keeps its slices.
        a.sendv([m, b"ef"])
        m2 = b.recv(timeout=T)
        assert bytes(m2) == b"abcdef" and m2.nslices == 3
        pool = zcio.Pool("trunc", chunk_size=1 << 20, max_chunks=1)
        buf = pool.alloc(4096)
        mv = memoryview(buf)
        with pytest.raises(BufferError, match="memoryviews"):
            buf.truncate(10)
        mv.release()
        with pytest.raises(ValueError):
            buf.truncate(0)
        buf.truncate(10)
        assert len(buf) == 10
        buf.truncate(100)  # no effect: only shortens
        assert len(buf) == 10
        a.send(buf)
        assert len(b.recv(timeout=T)) == 10
        with pytest.raises(BufferError, match="sent"):
            buf.truncate(5)


def test_write_to_a_file_object(tmp_path):
    a, b = zcio.Channel.pair()
    with a, b:
        a.send(b"hello file")
        m = b.recv(timeout=T)
        p = tmp_path / "out"
        with open(p, "wb") as f:
            assert m.write_to(f) == 10
        assert p.read_bytes() == b"hello file"
        with pytest.raises(ValueError):
            m.write_to(-1)
