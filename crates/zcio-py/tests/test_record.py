"""`zcio record` read back by an independent reader: Python's `mcap`
package (requirements-dev.txt). A Python producer writes known blocks
into a ring; the `zcio` tool ($ZCIO_BIN or PATH; scripts/test-python
builds it) records them; every message must come back byte-exact, in
order, on topic ring:NAME. Nothing here asserts on time."""

from __future__ import annotations

import os
import subprocess

import pytest

import zcio
import zcio.bridge
import zcio_children as kids

T = kids.TIMEOUT


def block(i: int) -> bytes:
    n = 300 << 10 if i == 7 else 1 + (i * 7919) % 5000
    return bytes((i * 31 + j) % 251 for j in range(n))


def test_record_ring_read_by_python_mcap(ring_name, tmp_path):
    try:
        from mcap.reader import make_reader
    except ImportError:
        pytest.fail("the mcap package is missing: pip install -r crates/zcio-py/requirements-dev.txt")
    try:
        tool = zcio.bridge.find_zcio()
    except FileNotFoundError as e:
        pytest.fail(f"{e} (scripts/test-python builds it and sets ZCIO_BIN)")
    n = 30
    out = tmp_path / "r.mcap"
    env = dict(os.environ, ZCIO_RUN_DIR=str(tmp_path))
    rec = subprocess.Popen(
        [tool, "record", f"ring:{ring_name}", "-o", str(out), "--count", str(n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        prod = zcio.RingProducer(ring_name, size=4 << 20, layout="variable")
        prod.wait_for_consumers(1, timeout=T)
        for i in range(n):
            prod.write(block(i), timeout=T)
        prod.close()
        _, err = rec.communicate(timeout=T)
        assert rec.returncode == 0, err.decode()
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait()
    with open(out, "rb") as f:
        r = make_reader(f)
        got = [(c.topic, m.sequence, m.data) for _, c, m in r.iter_messages(log_time_order=False)]
        summary = r.get_summary()
    assert [g[0] for g in got] == [f"ring:{ring_name}"] * n
    assert [g[1] for g in got] == list(range(n))
    for i, g in enumerate(got):
        assert g[2] == block(i), f"message {i}"
    assert summary is not None and summary.statistics.message_count == n
