"""Asynchronous IPC on a synchronous rendezvous, between two processes.

    python crates/zcio-py/examples/proxy.py

The server (a spawn-started process) is a plain synchronous loop: ``recv``,
then ``send`` a reply for calls. The client queues one-way notes and an RPC
with ``zcio.ProxyEndpoint``: every call returns at once with a ticket or a
reply handle, proxy threads do the synchronous sends and receives, and the
server cannot tell the difference.
"""

import multiprocessing as mp
import os
import tempfile
import time

import zcio

NOTE, CALL, REPLY = 1, 2, 3


def serve(path: str) -> None:
    """Sums the notes, answers CALL [x] with REPLY [2x, sum so far]."""
    with zcio.RendezvousListener(path) as listener:
        print(f"server: listening on {path}", flush=True)
        with listener.accept(timeout=10) as ep:
            total = 0
            while True:
                try:
                    m = ep.recv(timeout=30)
                except zcio.Disconnected:  # the client is gone: done
                    break
                if m.label == NOTE:
                    total += m.words[0]
                elif m.label == CALL:
                    ep.send(REPLY, (m.words[0] * 2, total), timeout=10)
                else:
                    print(f"server: ignoring {m!r}", flush=True)
    print(f"server: the client hung up; notes summed to {total}", flush=True)


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="zcio-"), "proxy.sock")
    server = mp.get_context("spawn").Process(target=serve, args=(path,))
    server.start()
    try:
        ep = zcio.Rendezvous.connect(path, timeout=10)  # retries until the server listens
        with zcio.ProxyEndpoint(ep, zcio.Proxies(max_proxies=4)) as peer:
            start = time.perf_counter()
            # 100 one-way notes: each send queues the message and returns at once.
            tickets = [peer.send(NOTE, (i,)) for i in range(1, 101)]
            # An RPC, queued behind the notes (FIFO per partner).
            reply = peer.call(CALL, (21,))
            queued = time.perf_counter() - start
            # Meanwhile the client could do other work; now wait for the answers.
            answer = reply.wait(timeout=10)
            for t in tickets:
                t.wait(timeout=10)  # each note was taken by the server
            print(
                f"client: queued 101 messages in {queued * 1e3:.2f} ms; reply {answer.words} "
                "(21 x 2, and the sum of the notes so far)"
            )
            print(f"client: {peer.stats()}")
            if answer.words != (42, 5050):
                raise SystemExit(f"unexpected reply {answer!r}")
        # Leaving the with-block hangs up: the server's recv sees Disconnected.
        server.join(30)
        if server.exitcode != 0:
            raise SystemExit(f"server exited with {server.exitcode}")
    finally:
        if server.is_alive():
            server.kill()
            server.join()
        try:
            os.rmdir(os.path.dirname(path))
        except OSError:
            pass


if __name__ == "__main__":
    main()
