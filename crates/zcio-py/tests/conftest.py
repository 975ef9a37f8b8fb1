"""Shared fixtures: short socket paths, unique ring names, and children
started with the spawn method under a watchdog."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sys
import tempfile
import uuid

import pytest

# The children's entry points live in zcio_children.py next to this file.
sys.path.insert(0, os.path.dirname(__file__))

SPAWN = multiprocessing.get_context("spawn")

#: Longest any child may take (a hung child fails its test, it never hangs
#: the suite; pytest-timeout is a second, outer watchdog).
CHILD_TIMEOUT = 60.0


@pytest.fixture
def sock_path():
    # Unix socket paths are limited to 107 bytes: pytest's tmp_path can be
    # longer, so use a short directory of our own.
    d = tempfile.mkdtemp(prefix="zcio-py-", dir="/tmp")
    yield os.path.join(d, "s")
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def ring_name():
    import zcio

    name = f"pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        zcio.ring_unlink(name)
    except zcio.RingError:
        pass


class Child:
    """A spawned child process that must finish cleanly (exit code 0)."""

    def __init__(self, target, *args):
        self.proc = SPAWN.Process(target=target, args=args, daemon=True)
        self.proc.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def join_ok(self, timeout: float = CHILD_TIMEOUT) -> None:
        self.proc.join(timeout)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
            pytest.fail(f"child {self.proc.pid} did not finish within {timeout} s")
        assert self.proc.exitcode == 0, f"child failed with exit code {self.proc.exitcode}"

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)


@pytest.fixture
def child():
    """child(target, *args) -> Child; every child is killed at teardown."""
    started: list[Child] = []

    def start(target, *args) -> Child:
        c = Child(target, *args)
        started.append(c)
        return c

    yield start
    for c in started:
        c.kill()
