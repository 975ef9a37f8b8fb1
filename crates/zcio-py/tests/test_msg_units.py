"""Messages cut without copying (Msg.split, Msg.clip), the ADU cursor
(Msg.units), Msg.copy_into, zcio.set_non_dumpable, the ring limit
constants, and RingReservation committing exactly the room it reserved;
across processes."""

from __future__ import annotations

import os
import signal

import pytest

import msgbuf_children as mk
import zcio
import zcio_children as kids

T = kids.TIMEOUT

PARTS = [kids.sized(1, 5000), kids.sized(2, 300), kids.sized(3, 8192)]
WHOLE = b"".join(PARTS)


def check_split_and_clip(m: zcio.Msg) -> None:
    head, tail = m.split(5100)  # inside the second part
    assert bytes(head) == WHOLE[:5100] and bytes(tail) == WHOLE[5100:]
    assert len(head) + len(tail) == len(m)
    assert bytes(m) == WHOLE, "split leaves the message as it was"
    a, b = m.split(0)
    assert len(a) == 0 and bytes(b) == WHOLE
    a, b = m.split(len(m))
    assert bytes(a) == WHOLE and len(b) == 0
    with pytest.raises(ValueError):
        m.split(len(m) + 1)
    c = m.clip(front=10, back=20)
    assert bytes(c) == WHOLE[10:-20]
    assert bytes(m.clip(back=8192)) == WHOLE[:5300]
    assert bytes(m.clip(front=len(m))) == b""
    with pytest.raises(ValueError):
        m.clip(front=len(m), back=1)


def test_split_clip_units_copy_into_of_a_received_message(sock_path, child):
    c = child(kids.sendv_parts, sock_path)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        m = ch.recv(timeout=T)
        assert m.nslices == 3 and bytes(m) == WHOLE
        check_split_and_clip(m)
        head, tail = m.split(5100)
        # No byte copied: the halves are slices of the same buffers.
        assert (head.nslices, tail.nslices) == (2, 2)
        assert [len(s) for s in head.slices()] == [5000, 100]
        assert bytes(m.clip(front=5000, back=8192)) == PARTS[1]
        assert m.clip(front=5000, back=8192).nslices == 1

        # The ADU cursor: 1000-byte records, the one across 5000 is copied.
        units = m.units(size=1000)
        assert b"".join(bytes(u) for u in units) == WHOLE
        assert [len(u) for u in units] == [1000] * 13 + [len(WHOLE) - 13000]
        kinds = [type(u) for u in units]
        assert kinds[0] is zcio.MsgView and kinds[4] is zcio.MsgView
        assert kinds[5] is bytes, "the record over 5000..6000 straddles parts"
        assert all(u.msg is m for u in units if isinstance(u, zcio.MsgView))
        with pytest.raises(BufferError):
            m.release()  # the in-place units keep it
        del units, kinds
        with pytest.raises(ValueError):
            m.units()
        with pytest.raises(ValueError):
            m.units(size=0)
        with pytest.raises(ValueError):
            m.units(delim=b"ab")

        # copy_into: one fresh buffer of our pool, the sender's no longer.
        pool = zcio.Pool("copy-into", chunk_size=1 << 20, max_chunks=2)
        cp = m.copy_into(pool)
        assert cp is not None and cp.nslices == 1 and not cp.volatile
        assert bytes(cp) == WHOLE
        full = zcio.Pool("copy-into-full", chunk_size=1 << 14, max_chunks=1)
        hold = full.alloc(1 << 14)
        assert m.copy_into(full, timeout=0) is None, "no buffer to be had"
        del hold
        m.release()
        with pytest.raises(ValueError, match="closed"):
            m.split(1)
        assert bytes(cp) == WHOLE, "the copy outlives the message"
        ch.send(b"done", timeout=T)
    c.join_ok()
    # The private form (secure() of a volatile message, or any copy) cuts
    # the same way.
    check_split_and_clip(cp.secure())


def test_units_by_line_across_parts(sock_path, child):
    parts = [b"one\ntwo\nthr", b"ee\n", b"four\nfive"]
    c = child(mk.lines_sender, sock_path, parts)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        m = ch.recv(timeout=T)
        assert m.nslices == 3
        units = m.units(delim=b"\n")
        assert [bytes(u) for u in units] == [b"one\n", b"two\n", b"three\n", b"four\n", b"five"]
        assert [type(u) for u in units] == [
            zcio.MsgView,
            zcio.MsgView,
            bytes,  # "thr" + "ee\n" straddles two parts
            zcio.MsgView,
            zcio.MsgView,  # the unterminated tail, in place
        ]
        assert all(u.volatile == m.volatile for u in units if isinstance(u, zcio.MsgView))
        recs = m.units(size=4)
        assert b"".join(bytes(r) for r in recs) == b"".join(parts)
        assert [len(r) for r in recs] == [4] * 5 + [3]
        del units, recs
        ch.send(b"done", timeout=T)
    c.join_ok()


def test_set_non_dumpable_in_a_child(child):
    child(mk.non_dumpable).join_ok()


def test_ring_limit_constants():
    assert zcio.RING_MAX_CONSUMERS == 64
    assert zcio.RING_MAX_SOURCES == 8
    assert zcio.RING_BLOCK_HEADER_LEN == 16
    assert zcio.RING_MAX_DATA_LEN == 1 << 34
    assert zcio.RING_MAX_DESCRIPTORS == 1 << 24
    assert zcio.RING_MAX_SLOT_SIZE == 1 << 31


@pytest.mark.parametrize("layout", ["variable", "slotted", "descriptors", "continuous"])
def test_reservation_commits_exactly_its_room(ring_name, child, layout):
    """Cancelled and dropped reservations publish nothing, a write between
    reserve and commit is refused, and each commit publishes the bytes
    filled into the room that reserve gave."""
    c = child(mk.reserve_cycles, ring_name, layout)
    want = [(1, kids.sized(1, 40)[:30]), (2, kids.sized(2, 200)), (3, b"end")]
    with zcio.RingConsumer(ring_name, start="oldest", timeout=T) as cons:
        if layout == "continuous":
            total = sum(len(b) for _, b in want)
            got = b""
            while len(got) < total:
                got += cons.read(total - len(got), timeout=T)
            assert got == b"".join(b for _, b in want)
        else:
            got = []
            while True:
                pk = cons.peek(timeout=T)
                if pk is None:
                    break
                with pk:
                    got.append((pk.tag, pk.tobytes()))
            assert got == want
    c.join_ok()


def test_producer_killed_with_an_open_reservation(ring_name, child):
    """A producer killed -9 holding a filled reservation: its consumer gets
    the block before, never the reserved bytes, then Disconnected."""
    c = child(mk.reserve_and_hang, ring_name)
    cons = zcio.RingConsumer(ring_name, timeout=T)
    assert cons.read(4096, timeout=T) == b"ready"
    os.kill(c.pid, signal.SIGKILL)
    c.proc.join(T)
    with pytest.raises(zcio.Disconnected) as e:
        cons.read(4096, timeout=T)
    assert e.value.pid == c.pid
    cons.close()


def test_reservation_in_process_rules(ring_name):
    with zcio.RingProducer(ring_name, size=1 << 16, layout="variable") as p:
        with zcio.RingConsumer(ring_name, timeout=T) as cons:
            r = p.reserve(16)
            with pytest.raises(BufferError):
                p.reserve(8)  # one open reservation per producer
            memoryview(r)[:5] = b"first"
            r.commit(5, tag=1)
            with pytest.raises(ValueError):
                r.commit(1)
            r2 = p.reserve(16)
            r2.cancel()
            r2.cancel()  # nothing once cancelled
            with pytest.raises(ValueError):
                r2.commit()
            r3 = p.reserve(8)
            memoryview(r3)[:] = b"eightbyt"
            r3.commit()
            pk = cons.peek(timeout=T)
            assert (pk.tag, pk.tobytes()) == (1, b"first")
            pk.release()
            assert cons.read(100, timeout=T) == b"eightbyt"


def test_typed_elems_and_vec_across_processes(sock_path, child):
    c = child(mk.typed_elems_sender, sock_path)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        m = ch.recv(timeout=T)
        assert len(m) == 128 + 3 * 16
        v = zcio.read_typed_vec(m, kids.Reading, tag=kids.READING)
        assert len(v) == 3
        assert [(r.seq, r.ok, r.kind, r.value) for r in v] == [
            (0, False, 0, 0.0),
            (1, True, 1, 0.5),
            (2, False, 2, 1.0),
        ]
        with pytest.raises(zcio.MalformedMessage):
            zcio.read_typed(m, kids.Reading, tag=kids.READING)  # a slice, not one value
        m = ch.recv(timeout=T)
        head, els = zcio.read_typed_elems(m, mk.Frame, kids.Reading, tag=mk.FRAMES)
        assert (head.frame, head.valid) == (7, True)
        assert [r.seq for r in els] == [1, 2]
        with pytest.raises(zcio.MalformedMessage):
            zcio.read_typed_vec(m, kids.Reading, tag=kids.READING)  # another type
        m = ch.recv(timeout=T)
        assert len(zcio.read_typed_vec(m, kids.Reading, tag=kids.READING)) == 0
        m = ch.recv(timeout=T)
        with pytest.raises(zcio.MalformedMessage, match="c_bool at byte 148 is 2"):
            zcio.read_typed_vec(m, kids.Reading, tag=kids.READING)
        m = ch.recv(timeout=T)
        with pytest.raises(zcio.MalformedMessage, match="multiple of 16 bytes"):
            zcio.read_typed_vec(m, kids.Reading, tag=kids.READING)
        ch.send(b"done", timeout=T)
    c.join_ok()
    with pytest.raises(TypeError):
        zcio.send_typed_elems(None, None, [1, 2])


def test_pieces_outlive_a_sender_killed_9(sock_path, child):
    """Pieces cut from a message keep its buffers mapped after the sender
    is killed -9, as the message does."""
    c = child(kids.sendv_parts, sock_path)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        m = ch.recv(timeout=T)
        head, tail = m.split(5100)
        mid = m.clip(front=4000, back=4000)
        units = m.units(size=4096)
        del m  # the pieces and the units keep the buffers
        os.kill(c.pid, signal.SIGKILL)
        c.proc.join(T)
        assert bytes(head) + bytes(tail) == WHOLE
        assert bytes(mid) == WHOLE[4000:-4000]
        assert b"".join(bytes(u) for u in units) == WHOLE
        with pytest.raises(zcio.Disconnected):
            ch.recv(timeout=T)
