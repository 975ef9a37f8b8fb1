"""A hostile sender (another process, started with subprocess) sends raw
bytes that look like array headers: each is refused with
MalformedMessage, and the channel stays usable."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import zcio
import zcio_children as kids

T = kids.TIMEOUT


def header(dtype=b"<f8", shape=(4,), strides=(8,), payload_len=None, data_off=0,
           magic=b"ZCNDARR1", version=1, hl=None, payload_off=None, ndim=None, dlen=None):
    ndim = len(shape) if ndim is None else ndim
    dlen = len(dtype) if dlen is None else dlen
    real_hl = (64 + (len(dtype) + 7) // 8 * 8 + 16 * len(shape) + 63) // 64 * 64
    hl = real_hl if hl is None else hl
    if payload_len is None:
        payload_len = 8 * int(np.prod(shape)) if shape else 8
    payload_off = real_hl if payload_off is None else payload_off
    fixed = magic + struct.pack("<HHHHII", version, 0, ndim, dlen, hl, 0)
    fixed += struct.pack("<QQQ", payload_off, payload_len, data_off) + bytes(16)
    body = dtype + bytes((-len(dtype)) % 8)
    body += b"".join(struct.pack("<Q", d) for d in shape)
    body += b"".join(struct.pack("<q", s) for s in strides)
    h = fixed + body
    h += bytes(real_hl - len(h))
    return h + bytes(max(0, payload_len))


HOSTILE = {
    "too short": b"ZCNDARR1",
    "bad magic": header(magic=b"NOTARRAY"),
    "bad version": header(version=99),
    "header length beyond message": header(hl=4096),
    "header length not 64-aligned": header(hl=100),
    "ndim too large": header(ndim=1000),
    "object dtype": header(dtype=b"|O"),
    "dtype with punctuation": header(dtype=b"(2,)i4"),
    "unknown dtype": header(dtype=b"<q9"),
    "empty dtype": header(dlen=0),
    "shape larger than payload": header(shape=(1000,), strides=(8,), payload_len=64),
    "stride beyond payload": header(shape=(4,), strides=(800,)),
    "negative stride below payload": header(shape=(4,), strides=(-8,), data_off=0),
    "huge dimension": header(shape=(2**62, 2**62), strides=(8, 8), payload_len=64),
    "overflowing extent": header(shape=(2**62,), strides=(2**62,), payload_len=64),
    "element offset beyond payload": header(data_off=10_000),
    "payload beyond message": header(payload_off=1 << 40),
}


def hostile_sender(path: str) -> subprocess.Popen:
    """A separate interpreter that sends every hostile message raw, then a
    valid array, then waits for 'done'."""
    code = textwrap.dedent(
        f"""
        import sys, numpy as np, zcio
        sys.path.insert(0, {repr(str(__import__('pathlib').Path(__file__).parent))})
        from test_hostile import HOSTILE
        ch = zcio.Channel.connect({path!r}, timeout={T})
        for name, raw in HOSTILE.items():
            ch.send(raw, timeout={T})
        ch.send_array(np.arange(5, dtype=np.int16), timeout={T})
        assert ch.recv(timeout={T}).tobytes() == b"done"
        """
    )
    return subprocess.Popen([sys.executable, "-c", code])


def test_malformed_headers_are_refused(sock_path):
    proc = hostile_sender(sock_path)
    try:
        with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
            for name in HOSTILE:
                with pytest.raises(zcio.MalformedMessage):
                    ch.recv_array(timeout=T)
            ok = ch.recv_array(timeout=T)
            assert ok.tolist() == [0, 1, 2, 3, 4], "the channel stays usable"
            ch.send(b"done", timeout=T)
        assert proc.wait(timeout=T) == 0, "the hostile sender failed to run"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_valid_handmade_header_is_accepted():
    a, b = zcio.Channel.pair()
    raw = header(dtype=b"<i8", shape=(2, 2), strides=(16, 8), payload_len=32)
    a.send(raw, timeout=5)
    assert b.recv_array(timeout=5).shape == (2, 2)
