"""Channel configuration and introspection: ChannelPolicy, AccessPolicy,
the channel options as keyword arguments, config(), expire_holds(),
health()/faults(), share_pool() and trust_peer(), across processes."""

from __future__ import annotations

import asyncio
import math
import os
import time

import pytest

import zcio
import zcio_children as kids
from conftest import SPAWN

T = kids.TIMEOUT


def test_policy_fields_and_validation():
    p = zcio.ChannelPolicy()
    assert (p.notify, p.wake_batch, p.full, p.hold_limit, p.futile_wake_limit) == (
        "now",
        1,
        "block",
        None,
        64,
    )
    assert p.max_age == pytest.approx(0.001)
    q = zcio.ChannelPolicy(
        notify="defer",
        wake_batch=8,
        max_age=0.002,
        spin=0,
        full="fail",
        hold_limit=1.5,
        on_hold_expiry="abort",
        futile_wake_limit=3,
    )
    assert (q.notify, q.wake_batch, q.spin, q.full, q.hold_limit, q.on_hold_expiry) == (
        "defer",
        8,
        0.0,
        "fail",
        1.5,
        "abort",
    )
    assert q == zcio.ChannelPolicy(
        notify="defer",
        wake_batch=8,
        max_age=0.002,
        spin=0,
        full="fail",
        hold_limit=1.5,
        on_hold_expiry="abort",
        futile_wake_limit=3,
    )
    for bad in (
        dict(notify="later"),
        dict(wake_batch=0),
        dict(max_age=0),
        dict(max_age=math.inf),
        dict(spin=-1),
        dict(full="drop"),
        dict(hold_limit=-1),
        dict(on_hold_expiry="ignore"),
        dict(futile_wake_limit=0),
    ):
        with pytest.raises(ValueError) as e:
            zcio.ChannelPolicy(**bad)
        assert "must be" in str(e.value)


def test_access_policy_fields_and_validation():
    a = zcio.AccessPolicy()
    assert a.uids == [os.geteuid()] and a.gids == []
    assert a.allows(os.geteuid(), 12345)
    b = zcio.AccessPolicy(uids=[], gids=[os.getegid()])
    assert b.allows(99999, os.getegid()) and not b.allows(99999, 99999)
    with pytest.raises(ValueError, match="at least one"):
        zcio.AccessPolicy(uids=[], gids=[])


def test_options_are_validated_and_read_back(sock_path):
    for bad, what in (
        (dict(ring_entries=1000), "power of two"),
        (dict(notice_entries=4), "power of two"),
        (dict(max_in_flight=0), "at least 1"),
        (dict(max_bytes_in_flight=0), "at least 1"),
        (dict(connect_timeout=0), "more than 0"),
        (dict(liveness_interval=0), "at least"),
        (dict(max_region_len=10), "at least 4096"),
        (dict(lane_slots=1 << 20), "65536"),
    ):
        with pytest.raises(ValueError, match=what):
            zcio.Channel.pair(**bad)
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        zcio.Channel.pair(colour="red")
    with pytest.raises(TypeError, match="access"):
        zcio.Channel.pair(access=zcio.AccessPolicy())
    with pytest.raises(TypeError, match="ChannelPolicy"):
        zcio.Channel.pair(policy={"full": "fail"})
    pol = zcio.ChannelPolicy(notify="defer", wake_batch=4, full="fail")
    a, b = zcio.Channel.pair(
        policy=pol,
        ring_entries=64,
        notice_entries=128,
        max_in_flight=100,
        max_bytes_in_flight=1 << 20,
        populate=False,
        liveness_interval=0.05,
        max_region_len=1 << 30,
        lane_slots=0,
        connect_timeout=2,
        send_timeout=3,
    )
    with a, b:
        c = a.config()
        assert c["policy"] == pol
        assert c["access"] == zcio.AccessPolicy()
        assert (c["ring_entries"], c["notice_entries"], c["max_in_flight"]) == (64, 128, 100)
        assert (c["max_bytes_in_flight"], c["populate"], c["lane_slots"]) == (1 << 20, False, 0)
        assert c["liveness_interval"] == pytest.approx(0.05)
        assert (c["connect_timeout"], c["send_timeout"]) == (2.0, 3.0)
        assert c["max_region_len"] == 1 << 30
    with zcio.Listener(sock_path, access=zcio.AccessPolicy(gids=[os.getegid()])) as lst:
        assert lst.path == sock_path


def test_full_policy_fail_raises_at_once(sock_path, child):
    """With full="fail", a send into a full ring raises Full even with the
    default (waiting) timeout; with "block" the same send would wait."""
    go = SPAWN.Event()
    c = child(kids.connect_and_idle, sock_path, go, dict(ring_entries=8))
    pol = zcio.ChannelPolicy(full="fail")
    with zcio.Listener(sock_path, ring_entries=8, lane_slots=0, policy=pol, send_timeout=T) as lst:
        with lst.accept(timeout=T) as ch:
            sent = 0
            with pytest.raises(zcio.Full):
                for _ in range(1000):
                    ch.send(b"x" * 100)  # timeout=None: the bound, 30 s
                    sent += 1
            assert 1 <= sent <= 8, sent
            assert ch.stats()["send_would_block"] >= 1

            async def fails_at_once() -> None:
                with pytest.raises(zcio.Full):
                    await asyncio.wait_for(ch.send_async(b"y" * 100), T)

            asyncio.run(fails_at_once())
            go.set()
    c.join_ok()


def test_hold_limit_reclaims_from_a_peer_that_holds_too_long(sock_path, child):
    got, go = SPAWN.Event(), SPAWN.Event()
    n = 3
    c = child(kids.recv_and_hold, sock_path, n, got, go)
    pol = zcio.ChannelPolicy(hold_limit=0.01, on_hold_expiry="reclaim")
    with zcio.Listener(sock_path, policy=pol, lane_slots=0) as lst:
        with lst.accept(timeout=T) as ch:
            for i in range(n):
                ch.send(kids.sized(i, 64 << 10), timeout=T)
            assert got.wait(T), "the child did not receive"
            # The child holds them all; wait (bounded) until the limit has
            # passed for each and they were taken back (a later send may
            # have taken some back already: count them all in the stats).
            deadline = time.monotonic() + T
            while ch.stats()["reclaimed"] < n and time.monotonic() < deadline:
                ch.expire_holds()
                time.sleep(0.01)
            assert ch.stats()["reclaimed"] == n
            kinds = {f["kind"]: f for f in ch.faults()}
            assert kinds["holds_reclaimed"]["value"] >= n
            assert "reclaimed" in kinds["holds_reclaimed"]["message"]
            assert ch.health() is not None
            go.set()
    c.join_ok()


def test_hold_limit_abort_closes_the_channel(sock_path, child):
    got, go = SPAWN.Event(), SPAWN.Event()
    c = child(kids.recv_and_hold, sock_path, 1, got, go)
    pol = zcio.ChannelPolicy(hold_limit=0.01, on_hold_expiry="abort")
    with zcio.Listener(sock_path, policy=pol, lane_slots=0) as lst:
        with lst.accept(timeout=T) as ch:
            assert ch.health() is None and ch.faults() == []
            ch.send(kids.sized(0, 64 << 10), timeout=T)
            # Nothing here enforces the limit until the child has it (only
            # our own sends, reclaims, flushes and expire_holds do).
            assert got.wait(T), "the child did not receive"
            deadline = time.monotonic() + T
            with pytest.raises(zcio.ZcioError):
                while time.monotonic() < deadline:
                    ch.expire_holds()
                    time.sleep(0.01)
            h = ch.health()
            assert h is not None and h["kind"] == "hold_expired"
            assert h["value"] == pytest.approx(0.01)
            go.set()
    c.join_ok()


def test_access_policy_refuses_another_uid(sock_path, child):
    other = os.geteuid() + 4242
    c = child(kids.connect_expect_refused, sock_path)
    with zcio.Listener(sock_path, access=zcio.AccessPolicy(uids=[other])) as lst:
        with pytest.raises(zcio.ConnectError):
            lst.accept(timeout=T)
    c.join_ok()


def test_share_pool_and_trust_peer(sock_path, child):
    c = child(kids.send_bytes, sock_path, [100, 70000])
    with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
        pool = zcio.Pool("share", chunk_size=1 << 20, max_chunks=2)
        keep = pool.alloc(4096)
        ch.share_pool(pool)
        assert ch.stats()["regions_sent"] >= 1
        assert not ch.peer_trusted
        ch.trust_peer()
        assert ch.peer_trusted
        for i, n in enumerate([100, 70000]):
            assert bytes(ch.recv(timeout=T)) == kids.sized(i, n)
        ch.send(b"done", timeout=T)
        del keep
    c.join_ok()
