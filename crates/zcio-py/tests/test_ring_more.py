"""Rings: tags, gathered writes, reserve -> fill -> commit, ring_stat /
ring_dir / ring_path, index rings and ring-to-ring splice, across
processes."""

from __future__ import annotations

import os

import pytest

import zcio
import zcio_children as kids

T = kids.TIMEOUT


def test_tags_gather_and_reservation_across_processes(ring_name, child):
    c = child(kids.ring_write_kinds, ring_name)
    with zcio.RingConsumer(ring_name, start="oldest", timeout=T) as cons:
        got = []
        while True:
            pk = cons.peek(timeout=T)
            if pk is None:
                break
            with pk:
                got.append((pk.tag, pk.tobytes()))
    assert got == [
        (7, b"tagged"),
        (8, b"hello!"),
        (9, kids.sized(9, 50)),
        (10, b"last"),
    ]
    c.join_ok()


def test_ring_stat_dir_and_path(ring_name):
    d = zcio.ring_dir()
    path = zcio.ring_path(ring_name)
    assert os.path.dirname(path) == d.rstrip("/")
    with pytest.raises(ValueError, match="not a valid ring name"):
        zcio.ring_path("../etc/passwd")
    with pytest.raises(zcio.RingError):
        zcio.ring_stat(ring_name)  # not there yet
    with zcio.RingProducer(ring_name, size=1 << 16, layout="variable") as p:
        assert os.path.exists(path)
        with zcio.RingConsumer(ring_name, timeout=T) as cons:
            p.write(b"abc", tag=1)
            st = zcio.ring_stat(ring_name)
            assert st["name"] == ring_name and st["layout"] == "variable"
            assert st["policy"] == "block" and st["size"] == 1 << 16
            assert st["producer"]["pid"] == os.getpid()
            assert st["producer"]["state"] == "active"
            assert (st["blocks"], st["bytes"]) == (1, 3)
            assert len(st["consumers"]) == 1
            c0 = st["consumers"][0]
            assert c0["pid"] == os.getpid() and c0["alive"] and c0["read_blocks"] == 0
            assert cons.read(100, timeout=T) == b"abc"
            assert zcio.ring_stat(ring_name)["consumers"][0]["read_blocks"] == 1
    assert zcio.ring_stat(ring_name)["producer"]["state"] == "closed"


def test_splice_into_an_index_ring_and_a_copying_ring(ring_name, child):
    """A child writes 5 blocks into ring A; we peek each and splice it into
    an index ring (a pointer, no copy) and a variable ring (a copy with its
    tag); the consumers of both read the blocks back."""
    idx_name, copy_name = ring_name + "-idx", ring_name + "-copy"
    c = child(kids.ring_produce, ring_name, 5, 300, "close")
    try:
        with (
            zcio.RingProducer(idx_name, layout="index", entries=64) as idx,
            zcio.RingProducer(copy_name, size=1 << 16, layout="variable") as cp,
            zcio.RingConsumer(idx_name, timeout=T) as idx_cons,
            zcio.RingConsumer(copy_name, timeout=T) as cp_cons,
            zcio.RingConsumer(ring_name, timeout=T) as src,
        ):
            assert idx.layout == "index"
            with pytest.raises(zcio.ZcioError):
                idx.write(b"not a peek")
            with pytest.raises(zcio.ZcioError):
                idx.reserve(10)
            peeks = []
            for i in range(5):
                pk = src.peek(timeout=T)
                assert pk is not None
                idx.splice(pk)
                cp.splice(pk, timeout=T)
                # The index ring points into A: read it before releasing.
                assert idx_cons.read(4096, timeout=T) == kids.sized(i, 300)
                pk.release()
                peeks.append(i)
            for i in peeks:
                assert cp_cons.read(4096, timeout=T) == kids.sized(i, 300)
    finally:
        for n in (idx_name, copy_name):
            try:
                zcio.ring_unlink(n)
            except zcio.RingError:
                pass
    c.join_ok()
