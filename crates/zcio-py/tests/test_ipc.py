"""Rendezvous endpoints and asynchronous IPC across real processes: round
trips, tickets and replies, the try/timeout forms, a partner killed with
SIGKILL, and limits on what Python may send."""

from __future__ import annotations

import itertools
import os
import pickle
import signal
import threading
import time

import pytest

import zcio
import zcio_children as kids

T = kids.TIMEOUT


def in_process_pair(path):
    """(listener, accepted, connected) endpoints in this process."""
    lst = zcio.RendezvousListener(path)
    box: list = []
    t = threading.Thread(target=lambda: box.append(zcio.Rendezvous.connect(path, timeout=T)))
    t.start()
    srv = lst.accept(timeout=T)
    t.join(T)
    assert box, "connect did not finish"
    return lst, srv, box[0]


def test_message_value_semantics():
    m = zcio.Envelope(7, [1, 2, 3])
    assert (m.label, m.words) == (7, (1, 2, 3))
    assert m == zcio.Envelope(7, (1, 2, 3)) and hash(m) == hash(zcio.Envelope(7, (1, 2, 3)))
    assert m != zcio.Envelope(7, (1, 2))
    assert zcio.Envelope(1).words == ()
    assert repr(zcio.Envelope(5, [9])) == "zcio.Envelope(label=5, words=(9,))"
    assert pickle.loads(pickle.dumps(m)) == m
    with pytest.raises(AttributeError):
        m.label = 3  # immutable


def test_sync_round_trip_across_processes(sock_path, child):
    c = child(kids.rdv_server, sock_path)
    with zcio.Rendezvous.connect(sock_path, timeout=T) as ep:
        assert ep.peer["pid"] == c.pid
        assert ep.peer["uid"] == os.geteuid()
        big = (1 << 64) - 1
        for i in range(200):
            r = ep.call(kids.SUM, (i, 2 * i, 3), timeout=T)
            assert r == zcio.Envelope(kids.REPLY, (3 * i + 3,))
        assert ep.call(kids.SUM, (big, 1), timeout=T).words == (0,)  # u64 wraps
        assert ep.call(kids.SUM, [1] * 8, timeout=T).words == (8,)  # the full 8 words
        for i in range(1, 11):
            ep.send(kids.NOTE, (i,), timeout=T)  # returns once taken
        # send + recv by hand is a call too.
        ep.send(kids.CALL, (21,), timeout=T)
        assert ep.recv(timeout=T) == zcio.Envelope(kids.REPLY, (42, 55))
        st = ep.stats()  # the live counters its registry entry shows
        assert st["sent_messages"] == 200 + 2 + 10 + 1 and st["received_messages"] == 203
        assert st["peers"] == 1 and st["timed_out"] == 0
    assert ep.closed
    with pytest.raises(ValueError, match="closed"):
        ep.send(1)
    c.join_ok()  # the server saw Disconnected and ended


def test_async_send_tickets_and_call_reply(sock_path, child):
    c = child(kids.rdv_server, sock_path)
    ep = zcio.Rendezvous.connect(sock_path, timeout=T)
    proxies = zcio.Proxies(max_proxies=4)
    with zcio.ProxyEndpoint(ep, proxies) as aep:
        assert ep.closed, "the endpoint moved into the ProxyEndpoint"
        assert aep.peer["pid"] == c.pid
        tickets = [aep.send(kids.NOTE, (i,)) for i in range(1, 101)]  # at once
        reply = aep.call(kids.CALL, (21,))
        msg = reply.wait(timeout=T)
        assert msg == zcio.Envelope(kids.REPLY, (42, 5050)), "FIFO: every note first"
        assert reply.ready() and reply.try_take() == msg
        assert reply.wait(timeout=0) == msg, "the outcome is kept"
        for t in tickets:
            t.wait(timeout=T)
            assert t.status == "delivered" and t.done and t.error is None
        replies = [aep.call(kids.SUM, (i, i)) for i in range(50)]
        assert [r.wait(timeout=T).words for r in replies] == [(2 * i,) for i in range(50)]
        # The send proxy counts a call delivered after its synchronous send
        # returns, which may be just after the reply arrived: wait (bounded).
        deadline = time.monotonic() + T
        while (st := aep.stats())["delivered"] < 151 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert st["delivered"] == 151 and st["failed"] == 0, st
        assert st["received"] == 51, st
        assert proxies.stats()["spawned"] >= 1
        assert proxies.config()["max_proxies"] == 4
    assert aep.closed
    with pytest.raises(ValueError, match="closed"):
        aep.send(1)
    c.join_ok()


def test_try_and_timeout_forms(sock_path):
    lst, a, b = in_process_pair(sock_path)
    with lst, a, b:
        with pytest.raises(zcio.Empty):
            a.recv(timeout=0)
        with pytest.raises(zcio.TimedOut):
            a.recv(timeout=0.05)
        with pytest.raises(zcio.Full):
            a.send(1, (2,), timeout=0)  # nobody is receiving
        with pytest.raises(zcio.TimedOut):
            a.send(1, (2,), timeout=0.05)  # retracted, not delivered
        with pytest.raises(zcio.TimedOut):
            a.call(1, timeout=0.05)
        with pytest.raises(zcio.Empty):
            zcio.recv_any([a, b], timeout=0)
        with pytest.raises(zcio.TimedOut):
            zcio.recv_any([a, b], timeout=0.05)
        assert issubclass(zcio.TimedOut, TimeoutError)
        # A blocking receive releases the GIL: this thread sends to it.
        got: list = []
        t = threading.Thread(target=lambda: got.append(b.recv(timeout=T)))
        t.start()
        a.send(9, (8, 7), timeout=T)
        t.join(T)
        assert got == [zcio.Envelope(9, (8, 7))]
        # Nothing timed out above was delivered late.
        with pytest.raises(zcio.Empty):
            b.recv(timeout=0)

        aep = zcio.ProxyEndpoint(a, delivery_timeout=T)
        with pytest.raises(zcio.Empty):
            aep.recv(timeout=0)
        with pytest.raises(zcio.TimedOut):
            aep.recv(timeout=0.05)
        tk = aep.send(3, (4,))
        with pytest.raises(zcio.TimedOut):
            tk.wait(timeout=0.05)  # nobody received it yet
        assert tk.status == "pending" and not tk.done
        assert b.recv(timeout=T) == zcio.Envelope(3, (4,))
        tk.wait(timeout=T)
        assert tk.status == "delivered"
        rp = aep.call(5)
        assert b.recv(timeout=T) == zcio.Envelope(5, ())
        b.send(6, (1,), timeout=T)
        assert rp.wait(timeout=T) == zcio.Envelope(6, (1,))
        # A message the partner sends while nobody asked is kept for recv.
        b.send(10, timeout=T)
        assert aep.recv(timeout=T) == zcio.Envelope(10)
        aep.close()


def test_default_waits_end_at_the_configured_bounds(sock_path, child):
    """timeout=None waits up to the bound the endpoint's configuration sets
    (0.2 s here), then raises TimedOut: a listener nobody connects to, a
    partner in another process that takes one message and then neither
    answers nor takes another; the same through a ProxyEndpoint."""
    short = 0.2
    with zcio.RendezvousListener(
        sock_path, send_timeout=short, recv_timeout=short, accept_timeout=short
    ) as lst:
        assert lst.accept_timeout == short
        with pytest.raises(zcio.TimedOut):
            lst.accept()
        c = child(kids.rdv_connect_and_hang, sock_path, True)
        ep = lst.accept(timeout=T)
        assert (ep.send_timeout, ep.recv_timeout) == (short, short)
        ep.send(1, (2,), timeout=T)  # the partner takes this one
        with pytest.raises(zcio.TimedOut):
            ep.recv()
        with pytest.raises(zcio.TimedOut):
            zcio.recv_any([ep])
        with pytest.raises(zcio.TimedOut):
            ep.send(3, (4,))
        with pytest.raises(zcio.TimedOut):
            ep.call(5)
        aep = zcio.ProxyEndpoint(ep)
        with pytest.raises(zcio.TimedOut):
            aep.recv()
        with pytest.raises(zcio.TimedOut):
            aep.post().wait()
        with pytest.raises(zcio.TimedOut):
            aep.send(6).wait()
        aep.close()
        c.kill()


def test_undelivered_async_send_fails_its_ticket(sock_path):
    lst, a, b = in_process_pair(sock_path)
    with lst, a, b:
        aep = zcio.ProxyEndpoint(a, delivery_timeout=0.05)
        tk = aep.send(1, (1,))
        with pytest.raises(zcio.TimedOut):
            tk.wait(timeout=T)  # the delivery attempt timed out
        assert tk.status == "failed" and isinstance(tk.error, zcio.TimedOut)
        aep.close()


def test_sync_recv_when_partner_is_killed(sock_path, child):
    with zcio.RendezvousListener(sock_path) as lst:
        c = child(kids.rdv_connect_and_hang, sock_path, False)
        ep = lst.accept(timeout=T)
        assert ep.peer["pid"] == c.pid
        # Kill the partner while we are blocked in recv: Disconnected, not
        # the timeout.
        killer = threading.Timer(0.2, os.kill, (c.pid, signal.SIGKILL))
        killer.start()
        with pytest.raises(zcio.Disconnected):
            ep.recv(timeout=T)
        killer.join()
        with pytest.raises(zcio.Disconnected):
            ep.send(1, timeout=T)
        with pytest.raises(zcio.Disconnected):
            ep.call(1, timeout=T)
        ep.close()


def test_async_call_when_partner_is_killed(sock_path, child):
    with zcio.RendezvousListener(sock_path) as lst:
        c = child(kids.rdv_connect_and_hang, sock_path, True)
        aep = zcio.ProxyEndpoint(lst.accept(timeout=T))
        reply = aep.call(kids.CALL, (1,))
        # The partner takes the request but never answers.
        with pytest.raises(zcio.TimedOut):
            reply.wait(timeout=0.2)
        assert not reply.ready() and reply.try_take() is None
        os.kill(c.pid, signal.SIGKILL)
        with pytest.raises(zcio.Disconnected):
            reply.wait(timeout=T)
        with pytest.raises(zcio.Disconnected):
            reply.try_take()  # the outcome is kept
        # Later sends fail at once, or their tickets do.
        try:
            tk = aep.send(kids.NOTE, (1,))
        except zcio.Disconnected:
            pass
        else:
            with pytest.raises(zcio.Disconnected):
                tk.wait(timeout=T)
        with pytest.raises(zcio.Disconnected):
            aep.recv(timeout=T)
        aep.close()


def test_limits_raise_instead_of_panicking(sock_path):
    too_many = list(range(9))
    with pytest.raises(ValueError, match="at most 8 words"):
        zcio.Envelope(1, too_many)
    with pytest.raises(ValueError, match="at most 8 words"):
        zcio.Envelope(1, itertools.count())  # never consumed to the end
    with pytest.raises(OverflowError):
        zcio.Envelope(-1)
    with pytest.raises(OverflowError):
        zcio.Envelope(1, [1 << 64])
    with pytest.raises(TypeError):
        zcio.Envelope(1, ["x"])
    with pytest.raises(TypeError):
        zcio.Envelope(1, 5)
    lst, a, b = in_process_pair(sock_path)
    with lst, a, b:
        with pytest.raises(ValueError, match="at most 8 words"):
            a.send(1, too_many, timeout=T)
        with pytest.raises(ValueError, match="at most 8 words"):
            a.call(1, too_many, timeout=T)
        with pytest.raises(ValueError, match="timeout"):
            a.recv(timeout=-1)
        with pytest.raises(ValueError, match="timeout"):
            a.recv(timeout=float("nan"))
        with pytest.raises(ValueError):
            zcio.Proxies(spin=-1.0)
        aep = zcio.ProxyEndpoint(a)
        with pytest.raises(ValueError, match="at most 8 words"):
            aep.send(1, too_many)
        with pytest.raises(ValueError, match="at most 8 words"):
            aep.call(1, too_many)
        with pytest.raises(ValueError, match="closed"):
            zcio.ProxyEndpoint(a)  # already moved
        aep.close()
        aep.close()  # idempotent
    with pytest.raises(zcio.ConnectError):
        zcio.RendezvousListener("/nonexistent-dir/x/s")
    with pytest.raises(zcio.TimedOut):
        zcio.Rendezvous.connect(sock_path + "-nobody", timeout=0.1)


def test_proxy_example_runs():
    """docs/proxy.md's runnable example exits 0 and reports the reply."""
    import subprocess
    import sys

    example = os.path.join(os.path.dirname(__file__), "..", "examples", "proxy.py")
    r = subprocess.run(
        [sys.executable, example], capture_output=True, text=True, timeout=120, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "reply (42, 5050)" in r.stdout
    assert "notes summed to 5050" in r.stdout
