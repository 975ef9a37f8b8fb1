"""Cross-process numpy transfer benchmark: ``python -m zcio.bench [--quick]``.

Hands numpy arrays of 1 MiB … 256 MiB from one process to another, in the same run, with

* ``zcio send_array``   – a private array, written once into a zcio pool buffer by ``send_array``;
* ``zcio Pool.empty``   – an array allocated from a zcio pool and filled in place: no copy at all;
* ``mp.Queue``          – ``multiprocessing.Queue`` (pickling, two copies through a pipe);
* ``shm + pipe``        – ``multiprocessing.shared_memory`` filled in place, its name, shape and
  dtype sent through a ``multiprocessing`` pipe (segments reused, the receiver caches its
  mappings and keeps the resource tracker from unlinking them);
* ``iceoryx2``          – the ``iceoryx2`` Python binding, publish/subscribe with a byte slice
  loaned and filled in place, an event service to wake the subscriber.

What is timed, per message: from the moment the sender holds a filled array (in whatever memory
the method lets it fill: private memory, a pool buffer, a shared-memory segment, an iceoryx2 loan)
until the receiver holds a numpy array it has read once (``arr.max()``, which also checks the
content) and has said so over an acknowledgement pipe.  One message is in flight at a time.
Producing the data is not timed; copying it is, where the method copies.  The receiver is a
separate process started with the ``spawn`` method; CPU time per message (``getrusage``) is
reported for the sender (timed sections only, including threads such as the Queue feeder) and
the receiver.  Runs of all methods are interleaved and repeated; the table shows medians.

Writes a JSON file and an SVG plot (matplotlib) and checks the issue's targets.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

MiB = 1 << 20
DTYPE = np.dtype(np.uint32)
ROW = 1024  # arrays are (n, 1024) uint32: 4 KiB rows
ACK_TIMEOUT = 60.0  # seconds: no single message may take longer
START_TIMEOUT = 60.0
WARMUP = 2


# ----------------------------------------------------------------------------- formatting


def fmt_size(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_ns(ns: float | None) -> str:
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def fmt_rate(bytes_: int, ns: float | None) -> str:
    if not ns:
        return "-"
    r = bytes_ / (ns / 1e9)
    for unit, scale in (("GiB/s", 1 << 30), ("MiB/s", MiB)):
        if r >= scale:
            return f"{r / scale:.1f} {unit}"
    return f"{r / (1 << 10):.1f} KiB/s"


def parse_size(s: str) -> int:
    s = s.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": MiB, "G": 1 << 30}.get(s[-1:], 1)
    digits = s[:-1] if s[-1:] in "KMG" else s
    return int(float(digits) * mult)


def cpu_ns() -> int:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return int((ru.ru_utime + ru.ru_stime) * 1e9)


def value_of(k: int) -> int:
    """The value every element of message k holds (never 0, so a zero page is caught)."""
    return (k % 250) + 1


def shape_of(nbytes: int) -> tuple[int, int]:
    return (nbytes // (DTYPE.itemsize * ROW), ROW)


def read_once(arr: np.ndarray, k: int) -> None:
    """Read every element once and check the content."""
    got = int(arr.max())
    if got != value_of(k) or arr.shape != shape_of(arr.nbytes) or arr.dtype != DTYPE:
        raise RuntimeError(f"message {k}: bad content (max {got}, shape {arr.shape}, dtype {arr.dtype})")


# ----------------------------------------------------------------------------- methods
#
# A method is a sender class (runs in the benchmark process) and a receiver function (runs in a
# spawned child).  The sender's `produce(k)` fills message k without timing it; `send(k)` is
# timed together with the wait for the receiver's acknowledgement.


@dataclass
class RunCfg:
    method: str
    nbytes: int
    count: int
    tag: str  # unique per run: socket paths, service names


class Sender:
    def __init__(self, cfg: RunCfg) -> None:
        self.cfg = cfg
        self.shape = shape_of(cfg.nbytes)

    def setup_before_child(self) -> dict[str, Any]:
        """Resources the child needs (picklable), created before it starts."""
        return {}

    def setup_after_child(self) -> None:
        pass

    def produce(self, k: int) -> None:
        raise NotImplementedError

    def send(self, k: int) -> None:
        raise NotImplementedError

    def after_ack(self, k: int) -> None:
        pass

    def close(self) -> None:
        pass


# --- zcio ---------------------------------------------------------------------------------


class ZcioSender(Sender):
    zero_copy = False

    def setup_before_child(self) -> dict[str, Any]:
        import zcio

        self.dir = tempfile.mkdtemp(prefix="zcio-bench-")
        self.path = os.path.join(self.dir, "chan.sock")
        self.listener = zcio.Listener(self.path)
        return {"path": self.path}

    def setup_after_child(self) -> None:
        import zcio

        self.chan = self.listener.accept(timeout=START_TIMEOUT)
        self.pool = zcio.Pool(name=f"bench-{self.cfg.tag}") if self.zero_copy else None
        self.arr: np.ndarray | None = None
        if not self.zero_copy:
            self.arr = np.empty(self.shape, DTYPE)

    def produce(self, k: int) -> None:
        if self.zero_copy:
            assert self.pool is not None
            self.arr = self.pool.empty(self.shape, DTYPE)
        assert self.arr is not None
        self.arr.fill(value_of(k))

    def send(self, k: int) -> None:
        assert self.arr is not None
        self.chan.send_array(self.arr, timeout=ACK_TIMEOUT)

    def after_ack(self, k: int) -> None:
        if self.zero_copy:
            self.arr = None  # the pool may reuse the buffer once the receiver released it

    def close(self) -> None:
        self.arr = None
        self.chan.close()
        self.listener.close()
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


class ZcioPoolSender(ZcioSender):
    zero_copy = True


def zcio_receiver(res: dict[str, Any], cfg: RunCfg, ack: Any) -> Callable[[int], None]:
    import zcio

    chan = zcio.Channel.connect(res["path"], timeout=START_TIMEOUT)

    def one(k: int) -> None:
        arr = chan.recv_array(timeout=ACK_TIMEOUT)
        read_once(arr, k)
        del arr  # the deallocation notice goes back now

    one.keep = chan  # type: ignore[attr-defined]
    return one


# --- multiprocessing.Queue ---------------------------------------------------------------


class QueueSender(Sender):
    def setup_before_child(self) -> dict[str, Any]:
        self.q = mp.get_context("spawn").Queue(maxsize=1)
        self.arr = np.empty(self.shape, DTYPE)
        return {"q": self.q}

    def produce(self, k: int) -> None:
        self.arr.fill(value_of(k))

    def send(self, k: int) -> None:
        self.q.put(self.arr, timeout=ACK_TIMEOUT)

    def close(self) -> None:
        self.q.close()
        self.q.join_thread()


def queue_receiver(res: dict[str, Any], cfg: RunCfg, ack: Any) -> Callable[[int], None]:
    q = res["q"]

    def one(k: int) -> None:
        arr = q.get(timeout=ACK_TIMEOUT)
        read_once(arr, k)

    return one


# --- multiprocessing.shared_memory + pipe ------------------------------------------------


class ShmSender(Sender):
    SEGMENTS = 2

    def setup_before_child(self) -> dict[str, Any]:
        from multiprocessing import shared_memory

        self.segs = [shared_memory.SharedMemory(create=True, size=self.cfg.nbytes) for _ in range(self.SEGMENTS)]
        self.arrs = [np.ndarray(self.shape, DTYPE, buffer=s.buf) for s in self.segs]
        self.rx, self.tx = mp.get_context("spawn").Pipe(duplex=False)
        return {"conn": self.rx}

    def produce(self, k: int) -> None:
        self.arrs[k % self.SEGMENTS].fill(value_of(k))

    def send(self, k: int) -> None:
        i = k % self.SEGMENTS
        self.tx.send((self.segs[i].name, self.shape, DTYPE.str))

    def close(self) -> None:
        self.arrs = []
        for s in self.segs:
            s.close()
            s.unlink()
        self.tx.close()


def shm_receiver(res: dict[str, Any], cfg: RunCfg, ack: Any) -> Callable[[int], None]:
    from multiprocessing import shared_memory

    conn = res["conn"]
    cache: dict[str, Any] = {}

    def one(k: int) -> None:
        if not conn.poll(ACK_TIMEOUT):
            raise TimeoutError("no handle from the sender")
        name, shape, dtype = conn.recv()
        seg = cache.get(name)
        if seg is None:
            # Python < 3.13 registers an attached segment with the resource tracker, which
            # unlinks it when the tracker's processes exit, although the creator still uses it.
            # A spawned child shares its parent's tracker, so the registration is harmless
            # here (the creator unregisters when it unlinks); an unrelated process would have
            # to call resource_tracker.unregister itself.
            seg = shared_memory.SharedMemory(name=name)
            cache[name] = seg
        arr = np.ndarray(shape, np.dtype(dtype), buffer=seg.buf)
        read_once(arr, k)
        del arr

    one.keep = cache  # type: ignore[attr-defined]
    return one


# --- iceoryx2 ------------------------------------------------------------------------------


def _iox_service(node: Any, name: str, nbytes: int) -> tuple[Any, Any]:
    import ctypes

    import iceoryx2 as iox2

    pubsub = (
        node.service_builder(iox2.ServiceName.new(f"zcio-bench/{name}/data"))
        .publish_subscribe(iox2.Slice[ctypes.c_uint8])
        .payload_alignment(iox2.Alignment.new(4096))
        .open_or_create()
    )
    event = node.service_builder(iox2.ServiceName.new(f"zcio-bench/{name}/event")).event().open_or_create()
    return pubsub, event


class IoxSender(Sender):
    def setup_before_child(self) -> dict[str, Any]:
        import iceoryx2 as iox2

        iox2.set_log_level(iox2.LogLevel.Error)
        self.node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
        self.pubsub, self.event = _iox_service(self.node, self.cfg.tag, self.cfg.nbytes)
        self.publisher = self.pubsub.publisher_builder().initial_max_slice_len(self.cfg.nbytes).create()
        self.notifier = self.event.notifier_builder().create()
        self.sample: Any = None
        return {"tag": self.cfg.tag}

    def produce(self, k: int) -> None:
        sample = self.publisher.loan_slice_uninit(self.cfg.nbytes)
        view = sample.payload().as_memory_view()
        np.frombuffer(view, DTYPE).fill(value_of(k))
        del view
        self.sample = sample.assume_init()

    def send(self, k: int) -> None:
        self.sample.send()
        self.sample = None
        self.notifier.notify()

    def close(self) -> None:
        self.sample = None
        del self.notifier, self.publisher, self.event, self.pubsub, self.node


def iox_receiver(res: dict[str, Any], cfg: RunCfg, ack: Any) -> Callable[[int], None]:
    import iceoryx2 as iox2

    iox2.set_log_level(iox2.LogLevel.Error)
    node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
    pubsub, event = _iox_service(node, res["tag"], cfg.nbytes)
    subscriber = pubsub.subscriber_builder().create()
    listener = event.listener_builder().create()
    wait = iox2.Duration.from_millis(int(ACK_TIMEOUT * 1000))

    def one(k: int) -> None:
        deadline = time.monotonic() + ACK_TIMEOUT
        while True:
            sample = subscriber.receive()
            if sample is not None:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("no sample from the publisher")
            listener.timed_wait(wait)
        arr = np.frombuffer(sample.payload().as_memory_view(), DTYPE).reshape(shape_of(cfg.nbytes))
        read_once(arr, k)
        del arr, sample

    one.keep = (node, pubsub, event, subscriber, listener)  # type: ignore[attr-defined]
    return one


@dataclass
class Method:
    key: str
    label: str
    sender: type[Sender]
    receiver: Callable[[dict[str, Any], RunCfg, Any], Callable[[int], None]]
    needs: str | None = None  # module that must import


METHODS = [
    Method("zcio", "zcio send_array", ZcioSender, zcio_receiver, "zcio"),
    Method("zcio-pool", "zcio Pool.empty", ZcioPoolSender, zcio_receiver, "zcio"),
    Method("queue", "mp.Queue", QueueSender, queue_receiver),
    Method("shm", "shm + pipe", ShmSender, shm_receiver),
    Method("iceoryx2", "iceoryx2", IoxSender, iox_receiver, "iceoryx2"),
]
BY_KEY = {m.key: m for m in METHODS}


# ----------------------------------------------------------------------------- one run


def _child(method_key: str, res: dict[str, Any], cfg: RunCfg, ack: Any) -> None:
    """Receiver process: receive `count` messages (after warm-up), acknowledge each."""
    try:
        one = BY_KEY[method_key].receiver(res, cfg, ack)
        ack.send(("ready", None))
        cpu0 = 0
        for k in range(WARMUP + cfg.count):
            if k == WARMUP:
                cpu0 = cpu_ns()
            one(k)
            ack.send_bytes(b"k")
        ack.send(("done", cpu_ns() - cpu0))
    except BaseException as e:  # report, then exit non-zero
        try:
            ack.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        finally:
            os._exit(1)


@dataclass
class RunResult:
    method: str
    nbytes: int
    count: int
    e2e_ns: list[int] = field(default_factory=list)
    sender_cpu_ns: int = 0
    receiver_cpu_ns: int = 0
    error: str | None = None

    @property
    def median_ns(self) -> float | None:
        return statistics.median(self.e2e_ns) if self.e2e_ns else None


def run_once(method: Method, nbytes: int, count: int, tag: str) -> RunResult:
    cfg = RunCfg(method.key, nbytes, count, tag)
    out = RunResult(method.key, nbytes, count)
    ctx = mp.get_context("spawn")
    parent_ack, child_ack = ctx.Pipe(duplex=True)
    sender = method.sender(cfg)
    proc = None
    try:
        res = sender.setup_before_child()
        proc = ctx.Process(target=_child, args=(method.key, res, cfg, child_ack), daemon=True)
        proc.start()
        sender.setup_after_child()
        _expect(parent_ack, "ready", START_TIMEOUT, proc)
        cpu_total = 0
        for k in range(WARMUP + count):
            sender.produce(k)
            c0 = cpu_ns()
            t0 = time.perf_counter_ns()
            sender.send(k)
            if not parent_ack.poll(ACK_TIMEOUT):
                raise TimeoutError(f"no acknowledgement of message {k} within {ACK_TIMEOUT:.0f} s")
            msg = parent_ack.recv_bytes()
            t1 = time.perf_counter_ns()
            c1 = cpu_ns()
            if msg != b"k":
                raise RuntimeError(_child_error(msg))
            sender.after_ack(k)
            if k >= WARMUP:
                out.e2e_ns.append(t1 - t0)
                cpu_total += c1 - c0
        out.sender_cpu_ns = cpu_total // max(count, 1)
        out.receiver_cpu_ns = _expect(parent_ack, "done", ACK_TIMEOUT, proc) // max(count, 1)
    except Exception as e:  # a failing method is reported in the table, the run goes on
        out.error = f"{type(e).__name__}: {e}"
        out.e2e_ns = []
    finally:
        try:
            sender.close()
        except Exception:
            pass
        if proc is not None:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
    return out


def _child_error(raw: bytes) -> str:
    import pickle

    try:
        kind, detail = pickle.loads(raw)
        return f"receiver {kind}: {detail}"
    except Exception:
        return f"unexpected message from the receiver: {raw[:64]!r}"


def _expect(conn: Any, kind: str, timeout: float, proc: Any) -> Any:
    deadline = time.monotonic() + timeout
    while not conn.poll(0.1):
        if not proc.is_alive() and not conn.poll(0.1):
            raise RuntimeError(f"receiver exited with code {proc.exitcode} before '{kind}'")
        if time.monotonic() > deadline:
            raise TimeoutError(f"receiver did not report '{kind}' within {timeout:.0f} s")
    got, detail = conn.recv()
    if got != kind:
        raise RuntimeError(f"receiver {got}: {detail}")
    return detail


# ----------------------------------------------------------------------------- driver


def available(method: Method) -> str | None:
    """None if the method can run here, else the reason it is skipped."""
    if method.needs is None:
        return None
    try:
        __import__(method.needs)
        return None
    except ImportError as e:
        return f"cannot import {method.needs} ({e}); pip install {method.needs}"


def count_for(nbytes: int, quick: bool) -> int:
    budget = (256 if quick else 1024) * MiB
    return max(3 if quick else 5, min(50 if quick else 200, budget // nbytes))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m zcio.bench",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  python -m zcio.bench --quick                 # 1 and 64 MiB, one round (CI smoke run)\n"
        "  python -m zcio.bench                         # 1 MiB … 256 MiB, 3 interleaved rounds\n"
        "  python -m zcio.bench --sizes 64M --rounds 5 --methods zcio-pool,shm\n",
    )
    ap.add_argument("--quick", action="store_true", help="two sizes, one round, fewer messages")
    ap.add_argument("--sizes", help="comma-separated array sizes, e.g. 1M,16M,256M")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (medians across rounds)")
    ap.add_argument("--methods", help="comma-separated: " + ",".join(BY_KEY))
    ap.add_argument("--out", default="bench-out/python.json", help="JSON results (default %(default)s)")
    ap.add_argument("--svg", default="bench-out/python.svg", help="SVG plot (default %(default)s)")
    args = ap.parse_args(argv)

    if args.sizes:
        sizes = [parse_size(s) for s in args.sizes.split(",")]
    elif args.quick:
        sizes = [1 * MiB, 64 * MiB]
    else:
        sizes = [1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB]
    sizes = [max(DTYPE.itemsize * ROW, s - s % (DTYPE.itemsize * ROW)) for s in sizes]
    rounds = args.rounds or (1 if args.quick else 3)
    methods = [BY_KEY[k] for k in args.methods.split(",")] if args.methods else list(METHODS)
    skipped = {m.key: r for m in methods if (r := available(m)) is not None}
    for k, why in skipped.items():
        print(f"skipped: {BY_KEY[k].label}: {why}")
    methods = [m for m in methods if m.key not in skipped]

    results: dict[tuple[str, int], list[RunResult]] = {}
    total = rounds * len(sizes) * len(methods)
    done = 0
    t_start = time.monotonic()
    for r in range(rounds):
        for nbytes in sizes:
            for m in methods:
                done += 1
                tag = f"{os.getpid()}-{r}-{nbytes}-{m.key}"
                print(
                    f"\r[{done}/{total}] round {r + 1}/{rounds} {fmt_size(nbytes):>8} {m.label:<16}",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
                res = run_once(m, nbytes, count_for(nbytes, args.quick), tag)
                if res.error:
                    print(f"\n  {m.label} at {fmt_size(nbytes)} failed: {res.error}", file=sys.stderr)
                results.setdefault((m.key, nbytes), []).append(res)
    print(f"\r{' ' * 60}\r", end="", file=sys.stderr)

    summary = summarize(results, methods, sizes)
    print_table(summary, methods, sizes)
    targets = check_targets(summary, sizes)
    for t in targets:
        print(f"{'PASS' if t['met'] else 'MISS'}  {t['name']}: {t['detail']}")
    write_json(args.out, summary, targets, sizes, rounds, args.quick, time.monotonic() - t_start)
    write_svg(args.svg, summary, methods, sizes)
    print(f"wrote {args.out} and {args.svg}")
    failed = [f"{k[0]}@{fmt_size(k[1])}" for k, v in results.items() if all(x.error for x in v)]
    if failed:
        print("error: every run failed for " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


def summarize(results: dict[tuple[str, int], list[RunResult]], methods: list[Method], sizes: list[int]) -> dict:
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for m in methods:
        for n in sizes:
            runs = results.get((m.key, n), [])
            ok = [r for r in runs if not r.error]
            med = statistics.median([r.median_ns for r in ok]) if ok else None  # type: ignore[type-var]
            out.setdefault(m.key, {})[n] = {
                "e2e_ns": med,
                "sender_cpu_ns": statistics.median([r.sender_cpu_ns for r in ok]) if ok else None,
                "receiver_cpu_ns": statistics.median([r.receiver_cpu_ns for r in ok]) if ok else None,
                "runs": [
                    {"median_ns": r.median_ns, "count": r.count, "min_ns": min(r.e2e_ns) if r.e2e_ns else None,
                     "sender_cpu_ns": r.sender_cpu_ns, "receiver_cpu_ns": r.receiver_cpu_ns, "error": r.error}
                    for r in runs
                ],
            }
    return out


def print_table(summary: dict, methods: list[Method], sizes: list[int]) -> None:
    print()
    print("End-to-end time per array (sender holds a filled array → receiver has read it once), median")
    head = f"{'size':>8} | " + " | ".join(f"{m.label:>20}" for m in methods)
    print(head)
    print("-" * len(head))
    for n in sizes:
        cells = []
        for m in methods:
            e = summary[m.key][n]["e2e_ns"]
            cells.append(f"{fmt_ns(e):>9} {fmt_rate(n, e):>10}" if e else f"{'failed':>20}")
        print(f"{fmt_size(n):>8} | " + " | ".join(f"{c:>20}" for c in cells))
    print()
    print("CPU time per array: sender / receiver (getrusage)")
    print(head)
    print("-" * len(head))
    for n in sizes:
        cells = []
        for m in methods:
            s = summary[m.key][n]
            cells.append(f"{fmt_ns(s['sender_cpu_ns'])} / {fmt_ns(s['receiver_cpu_ns'])}")
        print(f"{fmt_size(n):>8} | " + " | ".join(f"{c:>20}" for c in cells))
    print()


def _e2e(summary: dict, key: str, n: int) -> float | None:
    return summary.get(key, {}).get(n, {}).get("e2e_ns")


def check_targets(summary: dict, sizes: list[int]) -> list[dict[str, Any]]:
    targets: list[dict[str, Any]] = []

    def best_zcio(n: int) -> tuple[str, float] | None:
        c = [(k, v) for k in ("zcio", "zcio-pool") if (v := _e2e(summary, k, n))]
        return min(c, key=lambda kv: kv[1]) if c else None

    n64 = 64 * MiB
    if n64 in sizes:
        z, q = best_zcio(n64), _e2e(summary, "queue", n64)
        if z and q:
            targets.append({"name": "64 MiB: zcio ≤ 1/20 of multiprocessing.Queue", "met": z[1] * 20 <= q,
                            "detail": f"{BY_KEY[z[0]].label} {fmt_ns(z[1])} vs Queue {fmt_ns(q)} ({q / z[1]:.1f}×)"})
        s = _e2e(summary, "shm", n64)
        for key in ("zcio-pool", "zcio"):
            v = _e2e(summary, key, n64)
            if v and s:
                targets.append({"name": f"64 MiB: {BY_KEY[key].label} within 10% of shared_memory + pipe",
                                "met": v <= 1.10 * s,
                                "detail": f"{fmt_ns(v)} vs {fmt_ns(s)} ({v / s:.2f}×)"})
    for n in sizes:
        z, i = best_zcio(n), _e2e(summary, "iceoryx2", n)
        if z and i:
            targets.append({"name": f"{fmt_size(n)}: zcio at least as fast as iceoryx2", "met": z[1] <= i,
                            "detail": f"{BY_KEY[z[0]].label} {fmt_ns(z[1])} vs iceoryx2 {fmt_ns(i)} ({i / z[1]:.2f}×)"})
    return targets


def write_json(path: str, summary: dict, targets: list, sizes: list[int], rounds: int, quick: bool, secs: float) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    doc = {
        "benchmark": "python numpy array transfer",
        "quick": quick,
        "rounds": rounds,
        "sizes": sizes,
        "dtype": DTYPE.str,
        "warmup_messages": WARMUP,
        "seconds": round(secs, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
        "methods": {k: {str(n): v for n, v in d.items()} for k, d in summary.items()},
        "targets": targets,
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def write_svg(path: str, summary: dict, methods: list[Method], sizes: list[int]) -> None:
    try:
        import matplotlib

        matplotlib.use("svg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("skipped: SVG plot (pip install matplotlib)", file=sys.stderr)
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 5))
    for m in methods:
        xs = [n / MiB for n in sizes if summary[m.key][n]["e2e_ns"]]
        ys = [summary[m.key][n]["e2e_ns"] / 1e6 for n in sizes if summary[m.key][n]["e2e_ns"]]
        ax.plot(xs, ys, marker="o", label=m.label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("array size (MiB)")
    ax.set_ylabel("end-to-end time per array (ms, median)")
    ax.set_title("numpy array between two processes (lower is better)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
