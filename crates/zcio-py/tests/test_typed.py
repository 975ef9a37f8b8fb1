"""Typed messages across processes: a ctypes structure with the type tag of
Rust's zcio::typed (the same bytes as Rust's and C's), read back checked."""

from __future__ import annotations

import ctypes
import struct

import pytest

import zcio
import zcio_children as kids
from zcio._zcio import _typed_header

T = 30.0


def test_typed_messages_across_processes(sock_path, child):
    c = child(kids.typed_sender, sock_path)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        m = ch.recv(timeout=T)
        assert len(m) == 128 + 16
        r = zcio.read_typed(m, kids.Reading, tag=kids.READING)
        assert (r.seq, r.ok, r.kind, r.value) == (1, True, 3, 2.5)
        with pytest.raises(zcio.MalformedMessage, match="payload of 144 bytes"):
            zcio.read_typed(m, kids.Reading)  # read untagged: a size error
        m = ch.recv(timeout=T)  # schema 2
        with pytest.raises(zcio.MalformedMessage) as e:
            zcio.read_typed(m, kids.Reading, tag=kids.READING)
        assert "`example.Reading` v2" in str(e.value)
        assert "expected `example.Reading` v1" in str(e.value)
        assert zcio.read_typed(m, kids.Reading, tag=("example.Reading", 2)).seq == 1
        m = ch.recv(timeout=T)  # untagged
        with pytest.raises(zcio.MalformedMessage, match="no type tag"):
            zcio.read_typed(m, kids.Reading, tag=kids.READING)
        assert zcio.read_typed(m, kids.Reading).kind == 3
        m = ch.recv(timeout=T)  # bool byte 2
        with pytest.raises(zcio.MalformedMessage, match="c_bool at byte 132 is 2"):
            zcio.read_typed(m, kids.Reading, tag=kids.READING)
        m = ch.recv(timeout=T)  # 8 bytes of payload
        with pytest.raises(zcio.MalformedMessage, match="payload of 8 bytes"):
            zcio.read_typed(m, kids.Reading, tag=kids.READING)
        ch.send(b"done", timeout=T)
    c.join_ok()


def test_the_tag_is_the_documented_wire_layout():
    h = _typed_header("example.Reading", 1, 16, 8)
    assert len(h) == 128
    magic, version, flags, offset, size, elem, align, schema, nhash, nlen, res = struct.unpack_from(
        "<8sHHIQQIIQII", h
    )
    assert (magic, version, flags, offset, size, elem, align, schema) == (
        b"ZCIOTYPE", 1, 0, 128, 16, 0, 8, 1
    )
    fnv = 0xCBF29CE484222325
    for b in b"example.Reading":
        fnv = ((fnv ^ b) * 0x100000001B3) % (1 << 64)
    assert (nhash, nlen, res) == (fnv, 15, 0)
    assert h[56:71] == b"example.Reading" and h[71:] == bytes(57)
    # Over-aligned: the payload starts at the alignment.
    assert len(_typed_header("x", 0, 256, 256)) == 256
    assert _typed_header(None, 0, 16, 8) == b""


def test_bad_types_are_refused_before_sending():
    class P(ctypes.Structure):
        _fields_ = [("p", ctypes.c_void_p)]

    with pytest.raises(TypeError, match="pointer"):
        zcio.send_typed(None, P())
    with pytest.raises(TypeError, match="not a ctypes type"):
        zcio.read_typed(None, int)
    with pytest.raises(ValueError, match="align"):
        _typed_header("x", 0, 16, 3)
