"""A named ring between two processes: one producer, a consumer reading in place.

    python crates/zcio-py/examples/ring.py

The producer creates ring ``example-PID`` under /dev/shm, starts a consumer
process, waits until it has attached, writes 1000 records and closes the
stream. The consumer peeks each record in place (a read-only, volatile
buffer), copies out the field it acts on, and releases the block.
"""

import multiprocessing as mp
import os
import struct

import zcio

RECORDS = 1000
RECORD = 4096


def consumer(name: str) -> None:
    with zcio.RingConsumer(name, timeout=10) as cons:
        n = 0
        while (block := cons.peek(RECORD, timeout=10)) is not None:
            with block:  # releases the block on exit (zcio.Lapped if it was overwritten)
                (seq,) = struct.unpack_from("<Q", block)  # copy out, then validate
                if seq != n or len(block) != RECORD:
                    raise SystemExit(f"record {n}: got sequence {seq}, {len(block)} bytes")
            n += 1
        print(f"consumer: {n} records read in place from ring {name!r}")
        if n != RECORDS:
            raise SystemExit(f"expected {RECORDS} records, got {n}")


def main() -> None:
    name = f"example-{os.getpid()}"
    with zcio.RingProducer(name, size=1 << 20, layout="variable") as prod:
        child = mp.get_context("spawn").Process(target=consumer, args=(name,))
        child.start()
        try:
            if prod.wait_for_consumers(1, timeout=10) == 0:
                raise SystemExit("the consumer did not attach within 10 s")
            record = bytearray(RECORD)
            for i in range(RECORDS):
                struct.pack_into("<Q", record, 0, i)
                prod.write(record, timeout=10)
            prod.close()  # end of stream
            child.join(30)
        finally:
            zcio.ring_unlink(name)
    if child.exitcode != 0:
        raise SystemExit(f"consumer exited with {child.exitcode}")


if __name__ == "__main__":
    main()
