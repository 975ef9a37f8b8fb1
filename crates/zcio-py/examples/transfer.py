"""Hand numpy arrays from one process to another by reference.

    python crates/zcio-py/examples/transfer.py

The main process listens; a child started with the ``spawn`` method connects
and sends 16 frames allocated from a zcio pool (no copy at all) and one array
sent with ``send_array`` (copied once into shared memory). The receiver reads
every frame in place; each frame's buffer goes back to the sender's pool when
the receiver's array is gone.
"""

import multiprocessing as mp
import os
import tempfile

import numpy as np

import zcio

FRAMES = 16
SHAPE = (720, 1280, 3)


def sender(path: str) -> None:
    pool = zcio.Pool("frames")
    with zcio.Channel.connect(path, timeout=10) as ch:
        for i in range(FRAMES):
            frame = pool.empty(SHAPE, dtype=np.uint8, timeout=10)  # memory *is* a pool buffer
            frame[:] = i  # produce in place
            ch.send_array(frame, timeout=10)  # zero copy; frame is read-only now
            del frame  # the pool may reuse it once the receiver is done
        ch.send_array(np.linspace(0.0, 1.0, 1000), timeout=10)  # a private array: one copy
        ch.flush()


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="zcio-example-"), "frames.sock")
    with zcio.Listener(path) as listener:
        child = mp.get_context("spawn").Process(target=sender, args=(path,))
        child.start()
        with listener.accept(timeout=10) as ch:
            for i in range(FRAMES):
                frame = ch.recv_array(timeout=10)  # read-only, in the sender's pages
                assert frame.shape == SHAPE and frame.dtype == np.uint8
                assert int(frame.max()) == i, f"frame {i} holds {int(frame.max())}"
                # zcio.is_volatile(frame): the sender kept a writable mapping;
                # copy out (frame.copy()) what must not change under you.
                del frame  # the deallocation notice goes back
            tail = ch.recv_array(timeout=10)
            print(f"received {FRAMES} frames of {SHAPE} and an array of {tail.size} floats ending in {tail[-1]}")
        child.join(10)
        if child.exitcode != 0:
            raise SystemExit(f"sender exited with {child.exitcode}")


if __name__ == "__main__":
    main()
