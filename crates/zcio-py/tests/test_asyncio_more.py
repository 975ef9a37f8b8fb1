"""asyncio forms of what issue 38 added: RingProducer.reserve_async and
write_async(tag=), Channel.sendv_async, against peer processes."""

from __future__ import annotations

import asyncio
import json
import os

import zcio
import zcio_children as kids
from aio_helpers import bounded
from conftest import SPAWN

T = kids.TIMEOUT


def test_reserve_async_waits_for_room_and_tags_arrive(ring_name, child, tmp_path):
    go = SPAWN.Event()
    out = str(tmp_path / "got.json")
    c = child(kids.ring_read_tags, ring_name, go, out)

    async def main() -> int:
        with zcio.RingProducer(ring_name, size=8192, layout="variable") as p:
            assert p.wait_for_consumers(1, timeout=T) == 1
            n = 0
            while True:  # fill the ring
                try:
                    p.write(b"x" * 1000, timeout=0)
                    n += 1
                except zcio.Full:
                    break
            go.set()  # the consumer drains; the reservation gets room
            r = await bounded(p.reserve_async(1000))
            with memoryview(r) as mv:
                mv[:5] = b"hello"
            r.commit(5, tag=42)
            assert await bounded(p.write_async(b"tail", tag=43)) == 4
        return n

    n = asyncio.run(main())
    c.join_ok()
    with open(out) as f:
        got = [tuple(x) for x in json.load(f)]
    assert got == [(0, "x" * 1000)] * n + [(42, "hello"), (43, "tail")]


def test_sendv_async_sends_one_message_of_parts(sock_path, child):
    want = [b"ab", b"x" * 5000, b"cd"]
    c = child(kids.recv_parts_and_end, sock_path, want)

    async def main() -> None:
        with zcio.Listener(sock_path) as lst, lst.accept(timeout=T) as ch:
            pool = zcio.Pool("sendv-async", chunk_size=1 << 20, max_chunks=2)
            b = pool.alloc(5000)
            with memoryview(b) as mv:
                mv[:] = want[1]
            await bounded(ch.sendv_async([want[0], b, want[2]]))
            await bounded(ch.send_async(b"done"))
            c.join_ok()

    asyncio.run(main())
    assert os.path.exists(sock_path) is False


def test_rendezvous_send_async_passes_descriptors(sock_path, child):
    c = child(kids.rdv_take_fd_and_write, sock_path)

    async def main() -> None:
        with zcio.RendezvousListener(sock_path) as lst, lst.accept(timeout=T) as ep:
            r, w = os.pipe()
            try:
                await bounded(ep.send_async(40, fds=[w]))
                os.close(w)
                w = -1
                m = await bounded(ep.recv_async())
                assert m.label == 41
                assert os.read(r, 100) == b"async fd"
            finally:
                os.close(r)
                if w >= 0:
                    os.close(w)

    asyncio.run(main())
    c.join_ok()
