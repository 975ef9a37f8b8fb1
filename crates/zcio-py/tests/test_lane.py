"""Lanes: a channel's fast path for small messages, across processes and in
one (loans filled in place, copies, one held message at a time, memoryview
rules, the ends, a killed sender)."""

from __future__ import annotations

import pytest

import zcio
import zcio_children as kids

T = 30.0


def test_lane_messages_cross_both_ways(sock_path, child):
    c = child(kids.lane_echo, sock_path, 300)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        tx = ch.open_lane(slots=4, slot_size=4096)
        rx = ch.accept_lane(timeout=T)
        assert (tx.slots, tx.slot_size, rx.slot_size) == (4, 4096, 4096)
        for i in range(300):
            want = kids.sized(i, 1 + (i * 97) % 4096)
            if i % 2:
                tx.send(want, timeout=T)
            else:
                loan = tx.loan(timeout=T)
                assert len(loan) == 4096
                with memoryview(loan) as w:
                    w[: len(want)] = want
                loan.send(len(want))
            m = rx.recv(timeout=T)
            assert len(m) == len(want)
            assert bytes(m) == want
            with memoryview(m) as v:
                assert v.readonly and v.tobytes() == want
        assert tx.stats()["messages"] == 300
        assert rx.stats()["messages"] == 300 and rx.stats()["malformed"] == 0
        tx.close()
        c.join_ok()
        rx.close()


def test_lane_sender_killed_leaves_its_messages_then_disconnected(sock_path, child):
    c = child(kids.lane_send_and_die, sock_path, 3)
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        rx = ch.accept_lane(timeout=T)
        c.proc.join(T)
        for i in range(3):
            assert bytes(rx.recv(timeout=T)) == kids.sized(i, 100 + i)
        with pytest.raises(zcio.Disconnected):
            rx.recv(timeout=T)


def test_lane_rules_in_one_process():
    a, b = zcio.Channel.pair()
    with pytest.raises(ValueError, match="slots must be"):
        a.open_lane(slots=0)
    with pytest.raises(zcio.WouldBlock):
        b.accept_lane(timeout=0)
    with pytest.raises(zcio.TimedOut):
        b.accept_lane(timeout=0.05)
    tx = a.open_lane(slots=1, slot_size=8)
    rx = b.accept_lane(timeout=T)
    # Too long for the slot: refused, the loan stays usable.
    loan = tx.loan(timeout=0)
    with pytest.raises(ValueError, match="does not fit a lane slot of 8 bytes"):
        loan.send(9)
    with pytest.raises(ValueError, match="does not fit"):
        tx.send(b"123456789")
    # A loan is not sent while a memoryview of it is alive.
    v = memoryview(loan)
    v[:3] = b"abc"
    with pytest.raises(BufferError):
        loan.send(3)
    v.release()
    loan.send(3)
    assert not loan.active
    with pytest.raises(BufferError):
        memoryview(loan)
    # The only slot is in flight until the receiver lets go.
    with pytest.raises(zcio.WouldBlock):
        tx.loan(timeout=0)
    m = rx.recv(timeout=T)
    assert bytes(m) == b"abc" and m.held
    view = memoryview(m)
    # The next receive and the release wait for the views to go.
    with pytest.raises(BufferError):
        rx.recv(timeout=0)
    with pytest.raises(BufferError):
        m.release()
    with pytest.raises(BufferError):
        rx.close()
    view.release()
    with m:
        assert m.held
    assert not m.held
    with pytest.raises(BufferError):
        memoryview(m)
    # The slot is back: a new loan, cancelled, then a copy.
    tx.loan(timeout=0).cancel()
    tx.send(b"xy", timeout=0)
    assert bytes(rx.recv(timeout=0)) == b"xy"
    with pytest.raises(zcio.WouldBlock):
        rx.recv(timeout=0)
    # Closing the sender ends the lane for the receiver.
    tx.close()
    with pytest.raises(zcio.Disconnected):
        rx.recv(timeout=T)
    with pytest.raises(ValueError):
        tx.loan(timeout=0)
    rx.close()
    a.close()
    b.close()
