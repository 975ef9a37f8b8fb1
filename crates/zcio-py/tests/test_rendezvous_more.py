"""The rendezvous: descriptors in messages (Envelope.fds, take_fds,
send(fds=)), recv_into, reply_and_recv over several partners, and a
listener's access policy (bind_with), across processes."""

from __future__ import annotations

import array
import gc
import os

import pytest

import zcio
import zcio_children as kids

T = kids.TIMEOUT


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_descriptors_travel_both_ways_and_never_leak(sock_path, child):
    assert zcio.MAX_FDS >= 1
    c = child(kids.rdv_fd_peer, sock_path)
    with zcio.RendezvousListener(sock_path) as lst, lst.accept(timeout=T) as ep:
        m = ep.recv(timeout=T)
        assert (m.label, m.words, len(m.fds)) == (1, (16,), 1)
        (fd,) = m.take_fds()
        try:
            assert os.read(fd, 100) == b"through the pipe"
        finally:
            os.close(fd)
        assert m.take_fds() == []
        # Send one back: the child writes into it.
        r, w = os.pipe()
        try:
            with open(w, "wb", closefd=False) as wf:  # an object with fileno()
                ep.send(2, timeout=T, fds=[wf])
            os.close(w)
            w = -1
            assert ep.recv(timeout=T).label == 3
            assert os.read(r, 100) == b"and back"
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)
        with pytest.raises(ValueError, match="at most"):
            ep.send(4, fds=[0] * (zcio.MAX_FDS + 1))
        # recv_into: the words land in our buffer.
        buf = array.array("Q", [0] * 8)
        assert ep.recv_into(buf, timeout=T) == (5, 8)
        assert list(buf) == list(range(1, 9))
        with pytest.raises(ValueError, match="at least 64 bytes"):
            ep.recv_into(bytearray(8), timeout=T)
        assert ep.recv_into(buf, timeout=T) == (6, 1) and buf[0] == 7
        ep.send(99, timeout=T)
    c.join_ok()


def test_received_descriptors_close_with_the_envelope(sock_path, child):
    c = child(kids.rdv_fd_peer, sock_path)
    with zcio.RendezvousListener(sock_path) as lst, lst.accept(timeout=T) as ep:
        gc.collect()
        before = open_fds()
        m = ep.recv(timeout=T)
        assert len(m.fds) == 1 and open_fds() >= before + 1
        del m
        gc.collect()
        assert open_fds() == before, "a received descriptor leaked"
        ep.close()
    c.kill()


def test_reply_and_recv_over_several_partners(sock_path, child):
    kids_ = [child(kids.rdv_caller, sock_path, i) for i in (1, 2)]
    with zcio.RendezvousListener(sock_path) as lst:
        eps = [lst.accept(timeout=T), lst.accept(timeout=T)]
        idx, m = zcio.recv_any(eps, timeout=T)
        seen = [m.words[0]]
        for _ in range(3):
            idx, m = eps[idx].reply_and_recv(3, (m.words[0] * 10,), timeout=T, endpoints=eps)
            assert 0 <= idx < 2 and m.label == 2
            seen.append(m.words[0])
        eps[idx].send(3, (m.words[0] * 10,), timeout=T)
        assert sorted(seen) == [1, 2, 101, 102]
        for k in kids_:
            k.join_ok()
        for e in eps:
            e.close()


def test_access_policy_refuses_another_uid(sock_path, child):
    other = os.geteuid() + 4242
    c = child(kids.rdv_connect_expect_refused, sock_path)
    with zcio.RendezvousListener(sock_path, access=zcio.AccessPolicy(uids=[other])) as lst:
        with pytest.raises(zcio.ConnectError):
            lst.accept(timeout=T)
    c.join_ok()
