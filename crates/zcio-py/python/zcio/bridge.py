"""Across hosts through Zenoh: start and stop ``zcio bridge`` processes.

A zcio path leaves the host with one copy per host boundary: an
*exporting* bridge publishes a local source — every block of a named ring
(``"ring:NAME"``) or every message of every channel that connects to a
listener (``"listen:/path.sock"``) — to a Zenoh key; an *importing* bridge
writes the samples of a key into a local sink — a named ring
(``"ring:NAME"``, created if missing, the bridge its producer) or a channel
to a listener (``"connect:/path.sock"``) — where every local reader reads
them in place. The sample payload is exactly the message or block bytes
(plain Zenoh applications read and write the same keys); a ``send_array``
array crosses with its dtype, shape and strides, and an imported ring
block reads back with ``Peek.array()``.

This module drives the ``zcio`` command-line tool (``zcio bridge
export|import``): the tool is looked up in ``$ZCIO_BIN``, then as ``zcio``
on ``PATH``.

    import zcio

    # host A: channels that connect to /tmp/out.sock go to key "lab/frames"
    with zcio.bridge.export("listen:/tmp/out.sock", "lab/frames",
                            listen=["tcp/0.0.0.0:7447"]) as ex:
        ...                             # ex.endpoints: where it listens
    # host B: the key into ring "frames"
    with zcio.bridge.import_("lab/frames", "ring:frames",
                             connect=["tcp/hostA:7447"]) as im:
        im.wait()                       # until the stream ends
    print(im.stats["samples"])

Each bridge is a child process that lives as long as its :class:`Bridge`
object (it is stopped when the object is collected or the interpreter
exits) or until ``stop()``.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from ._errors import BridgeError, BridgeUsageError, TimedOut

__all__ = [
    "Bridge",
    "export",
    "import_",
    "find_zcio",
    "BridgeError",
    "BridgeUsageError",
    "EXIT_STOPPED",
]

#: The exit status of an import stopped (``stop()``, ``duration``) before
#: the exporter's end of stream: its ring was closed with an error
#: (``ECANCELED``), never as a clean end.
EXIT_STOPPED = 3

#: How long ``export``/``import_`` wait for the bridge's ``ready`` line
#: unless told otherwise (seconds).
READY_TIMEOUT = 30.0

_MISSING = (
    "zcio.bridge needs the zcio command-line tool, which was not found: set "
    "the environment variable ZCIO_BIN to its path, or put `zcio` on PATH. "
    "From a checkout of the zcio repository: `cargo build --release -p zcio-cli` "
    "builds it as target/release/zcio."
)


def find_zcio() -> str:
    """The path of the ``zcio`` tool: ``$ZCIO_BIN`` if set, else ``zcio`` on
    ``PATH``. Raises ``FileNotFoundError`` (saying what to do) if neither
    gives an executable file."""
    env = os.environ.get("ZCIO_BIN")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise FileNotFoundError(
            f"ZCIO_BIN={env!r} is not an executable file. Point ZCIO_BIN at the zcio "
            "command-line tool (`cargo build --release -p zcio-cli` builds "
            "target/release/zcio), or unset it to use `zcio` from PATH."
        )
    found = shutil.which("zcio")
    if found:
        return found
    raise FileNotFoundError(_MISSING)


def _text(what: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{what} must be a non-empty str, not {value!r}")
    if "\0" in value:
        raise ValueError(f"{what} contains a NUL character")
    return value


def _endpoints(what: str, value: str | Iterable[str]) -> list[str]:
    # One endpoint given as a plain string is one endpoint, not its letters.
    items = [value] if isinstance(value, str) else list(value)
    return [_text(f"{what} endpoint", e) for e in items]


def _size(what: str, value: int | str) -> str:
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int (bytes) or a size string such as '64MiB'")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"{what} must be positive, not {value}")
        return str(value)
    return _text(what, value)


def _seconds(what: str, value: float) -> str:
    v = float(value)
    if not (v == v and v >= 0):
        raise ValueError(f"{what} must be a non-negative number of seconds, not {value!r}")
    return repr(v)


def _common(
    listen: str | Iterable[str],
    connect: str | Iterable[str],
    config: str | os.PathLike[str] | None,
    max_size: int | str | None,
    scout: bool,
    duration: float | None,
) -> list[str]:
    args: list[str] = []
    for e in _endpoints("listen", listen):
        args += ["--listen", e]
    for e in _endpoints("connect", connect):
        args += ["--connect", e]
    if config is not None:
        args += ["--config", os.fspath(config)]
    if max_size is not None:
        args += ["--max-size", _size("max_size", max_size)]
    if scout:
        args.append("--scout")
    if duration is not None:
        args += ["--duration", _seconds("duration", duration)]
    return args


def _reap(proc: subprocess.Popen[bytes], workdir: str) -> None:
    """Stop a bridge whose object went away (or at interpreter exit)."""
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class Bridge:
    """A running ``zcio bridge export|import`` process (made by
    :func:`export` and :func:`import_`, which return once it is ready).

    ``endpoints``: the Zenoh endpoints it listens on (``--listen`` with
    port 0 resolved, e.g. ``("tcp/127.0.0.1:40123",)``). ``stop()`` ends it
    (SIGTERM), ``wait()`` waits for it to end by itself (end of stream,
    ``duration``), ``returncode`` is ``None`` while it runs, then its exit
    status (0: end of stream, or an export stopped; 1: the stream failed;
    :data:`EXIT_STOPPED`: an import stopped before the end of stream), ``stats``
    its final counters (``samples``, ``bytes``, ``oversize``, ``malformed``,
    ``gaps``, ``lost``, ``duplicates``, ``ignored``, ``lapped``,
    ``connections``, ``end`` …). A context manager: leaving the block stops
    it.
    """

    def __init__(
        self,
        args: list[str],
        *,
        ready_timeout: float = READY_TIMEOUT,
        env: Mapping[str, str] | None = None,
    ) -> None:
        exe = find_zcio()
        self._dir = tempfile.mkdtemp(prefix="zcio-bridge-")
        self._stats_path = os.path.join(self._dir, "stats.json")
        self._stderr_path = os.path.join(self._dir, "stderr")
        self.args: tuple[str, ...] = (
            exe,
            "bridge",
            *args,
            "--quiet",
            "--stats-json",
            self._stats_path,
        )
        self.endpoints: tuple[str, ...] = ()
        self._env: dict[str, str] | None = None if env is None else dict(env)
        self._stats: dict[str, Any] | None = None
        self._stderr: str | None = None
        try:
            with open(self._stderr_path, "wb") as err:
                self._proc = subprocess.Popen(
                    self.args,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    env=None if env is None else dict(env),
                    close_fds=True,
                )
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self._finalizer = weakref.finalize(self, _reap, self._proc, self._dir)
        try:
            self.endpoints = self._await_ready(ready_timeout)
        except BaseException:
            self._kill()
            raise

    # -- start-up ---------------------------------------------------------

    def _await_ready(self, timeout: float) -> tuple[str, ...]:
        """Read the one stdout line, ``ready <endpoints…>``, within
        ``timeout`` seconds."""
        out = self._proc.stdout
        assert out is not None
        fd = out.fileno()
        os.set_blocking(fd, False)
        deadline = time.monotonic() + timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._kill()
                    raise TimedOut(
                        f"zcio bridge was not ready within {timeout} s (no `ready` line)"
                        + self._stderr_tail()
                    )
                if not sel.select(left):
                    continue
                try:
                    chunk = os.read(fd, 4096)
                except BlockingIOError:
                    continue
                if not chunk:
                    break  # stdout closed: the process is ending
                buf += chunk
                if len(buf) > 1 << 16:
                    break
        line, _, _ = buf.partition(b"\n")
        words = line.decode("utf-8", "replace").split()
        if b"\n" in buf and words[:1] == ["ready"]:
            return tuple(words[1:])
        if b"\n" in buf:
            self._kill()
            raise BridgeError(f"zcio bridge printed {line[:200]!r} instead of its `ready` line")
        # Exited before it was ready: say why.
        try:
            code = self._proc.wait(10.0)
        except subprocess.TimeoutExpired:
            self._kill()
            code = self._proc.returncode
        self._collect()
        raise self._failure(code, "exited before it was ready")

    def _failure(self, code: int | None, what: str) -> BridgeError:
        err = (self._stderr or "").strip()
        cls = BridgeUsageError if code == 2 else BridgeError
        e = cls(f"zcio bridge {self.args[2]} {what} (exit status {code})" + (f": {err}" if err else ""))
        e.returncode = code
        e.stderr = err
        return e

    def _stderr_tail(self) -> str:
        try:
            with open(self._stderr_path, "rb") as f:
                text = f.read()[-4000:].decode("utf-8", "replace").strip()
        except OSError:
            return ""
        return f": {text}" if text else ""

    def _kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._collect()

    def _collect(self) -> None:
        """Once the process has ended: keep its statistics and error output,
        remove the scratch directory."""
        if self._stderr is not None:
            return
        try:
            with open(self._stderr_path, "rb") as f:
                self._stderr = f.read().decode("utf-8", "replace")
        except OSError:
            self._stderr = ""
        try:
            with open(self._stats_path, encoding="utf-8") as f:
                self._stats = json.load(f)
        except (OSError, ValueError):
            self._stats = None
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- running ----------------------------------------------------------

    @property
    def pid(self) -> int:
        """The bridge process's pid."""
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        """``None`` while the bridge runs, then its exit status (0: end of
        stream, or an export stopped; 1: the stream failed; 2: refused
        arguments; :data:`EXIT_STOPPED` (3): an import stopped before the
        exporter's end of stream; negative: killed by that signal)."""
        code = self._proc.poll()
        if code is not None:
            self._collect()
        return code

    @property
    def stats(self) -> dict[str, Any] | None:
        """The final statistics (``--stats-json``) once the bridge has ended,
        else ``None`` (also ``None`` if it was killed before writing them)."""
        if self.returncode is None:
            return None
        return self._stats

    def counters(self, timeout: float = 10.0) -> dict[str, int]:
        """The bridge's live counters while it runs, as ``zcio stat`` shows
        its registry entry: ``samples``, ``sample_bytes``, ``lost_samples``,
        ``malformed``, ``peers`` (see docs/metrics.md). Read from the
        entry's statistics page by the ``zcio`` tool, without joining the
        stream. Raises :class:`BridgeError` once the bridge has ended (use
        :attr:`stats` then) or when its entry cannot be found (a refused
        run directory: ``zcio ls`` says why)."""
        if self.returncode is not None:
            raise BridgeError(
                f"the bridge (pid {self.pid}) has ended: read its final .stats instead"
            )
        exe = self.args[0]

        def tool(*args: str) -> Any:
            r = subprocess.run(
                [exe, *args],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=self._env,
                timeout=timeout,
                check=False,
            )
            if r.returncode != 0:
                raise BridgeError(
                    f"zcio {' '.join(args)} failed: {r.stderr.decode(errors='replace').strip()}"
                )
            return json.loads(r.stdout)

        mine = [
            e
            for e in tool("ls", "--json")
            if e.get("pid") == self.pid
            and e.get("same_pid_ns")
            and e.get("kind") in ("export", "import")
            and e.get("state") == "live"
        ]
        if len(mine) != 1:
            raise BridgeError(
                f"found {len(mine)} registry entries of the bridge (pid {self.pid}), not 1: "
                "run `zcio ls` to see the run directory"
            )
        st = tool("stat", mine[0]["file"], "--json")
        return {name: int(c["value"]) for name, c in st["counters"].items()}

    @property
    def stderr(self) -> str:
        """The bridge's error output so far (all of it once it has ended)."""
        if self.returncode is not None:
            return self._stderr or ""
        try:
            with open(self._stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return self._stderr or ""

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the bridge to end by itself (end of stream, a failed
        stream, ``duration``) and return its exit status; ``zcio.TimedOut``
        if it still runs after ``timeout`` seconds (it keeps running)."""
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimedOut(f"zcio bridge (pid {self.pid}) still runs after {timeout} s") from None
        self._collect()
        return code

    def stop(self, timeout: float = 10.0) -> int:
        """Stop the bridge (SIGTERM) and wait up to ``timeout`` seconds for
        it to end; return its exit status. A listener export publishes the
        end of the stream at once (messages it accepted but had not yet
        published are dropped); an import stopped before the exporter's end
        of stream — whether or not a sample had arrived — closes its ring
        with an error code (``ECANCELED``: its readers get
        ``zcio.Disconnected`` with ``code`` 125, never a clean end) and
        returns :data:`EXIT_STOPPED`. A bridge that does not end in time is
        killed (``zcio.TimedOut``). Stopping an ended bridge returns its
        status."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill()
                raise TimedOut(
                    f"zcio bridge (pid {self.pid}) did not stop within {timeout} s; killed"
                ) from None
        self._collect()
        return self._proc.returncode

    def check(self) -> None:
        """Raise :class:`zcio.BridgeError` if the bridge ended with a failure
        (exit status 1 or 2, or killed); nothing if it runs, ended cleanly or
        was stopped (:data:`EXIT_STOPPED`: the import did not see an end of
        stream, as asked)."""
        code = self.returncode
        if code not in (None, 0, EXIT_STOPPED):
            raise self._failure(code, "failed")

    def __enter__(self) -> Bridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        code = self._proc.poll()
        state = "running" if code is None else f"exit status {code}"
        what = " ".join(self.args[2:4])
        return f"zcio.bridge.Bridge({what}, pid={self.pid}, {state})"


def export(
    source: str,
    key: str,
    *,
    listen: str | Iterable[str] = (),
    connect: str | Iterable[str] = (),
    config: str | os.PathLike[str] | None = None,
    history: int | None = None,
    copy: bool = False,
    max_size: int | str | None = None,
    start: str | None = None,
    wait: bool = True,
    scout: bool = False,
    duration: float | None = None,
    ready_timeout: float = READY_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> Bridge:
    """Publish a local source to Zenoh key ``key`` (``zcio bridge export``)
    and return the running :class:`Bridge` once it is ready.

    ``source``: ``"ring:NAME"`` (every block of a named ring, from the
    newest unless ``start="oldest"``; ends when the ring's producer closes
    it) or ``"listen:/path.sock"`` (a channel listener: every message of
    every channel that connects, until stopped; ``send_array`` arrays keep
    their dtype and shape). ``listen``/``connect``: Zenoh endpoints
    (``"tcp/127.0.0.1:0"`` picks a free port: see ``.endpoints``);
    multicast scouting stays off unless ``scout=True``. ``config``: a Zenoh
    configuration file (TLS, access control). ``history``: samples kept for
    late joiners that ask (``import_(history=True)``; default 0: no cache;
    a cache keeps copies, so ring blocks are then copied out). ``copy``:
    copy each ring block out before publishing it; without it the blocks of
    ``block`` and ``srp`` rings go to Zenoh from the ring's pages, which
    trusts the ring's producer to keep the ring protocol.
    ``wait``: read nothing from the source until a first subscriber of the
    key appears (the default: a lossless ring holds its producer back until
    the path exists); ``wait=False`` reads at once. ``max_size``: largest
    block or message published (bytes or ``"64MiB"``; larger ones are
    dropped and counted). ``duration``: stop after that many seconds.
    ``env``: the process's environment (default: this process's; e.g.
    ``RUST_LOG`` for Zenoh's logs, which go to ``Bridge.stderr``).

    Raises ``FileNotFoundError`` without the ``zcio`` tool,
    :class:`zcio.BridgeUsageError` (a ``ValueError``) for arguments it
    refuses, :class:`zcio.BridgeError` when it exits before it is ready
    (``.stderr`` says why: no such ring, a port in use …),
    :class:`zcio.TimedOut` when it is not ready within ``ready_timeout``.
    """
    args = ["export", _text("source", source), "--key", _text("key", key)]
    if history is not None:
        if isinstance(history, bool) or not isinstance(history, int) or history < 0:
            raise ValueError(f"history must be a count of samples >= 0, not {history!r}")
        args += ["--history", str(history)]
    if copy:
        args.append("--copy")
    if start is not None:
        if start not in ("newest", "oldest"):
            raise ValueError(f"start must be 'newest' or 'oldest', not {start!r}")
        args += ["--from", start]
    if not wait:
        args.append("--no-wait")
    args += _common(listen, connect, config, max_size, scout, duration)
    return Bridge(args, ready_timeout=ready_timeout, env=env)


def import_(
    key: str,
    to: str,
    *,
    listen: str | Iterable[str] = (),
    connect: str | Iterable[str] = (),
    config: str | os.PathLike[str] | None = None,
    history: bool = False,
    max_size: int | str | None = None,
    grace: float | None = None,
    connect_timeout: float | None = None,
    keep: bool = False,
    size: int | str | None = None,
    layout: str | None = None,
    policy: str | None = None,
    mode: int | None = None,
    scout: bool = False,
    duration: float | None = None,
    ready_timeout: float = READY_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> Bridge:
    """Write the samples of Zenoh key expression ``key`` into a local sink
    (``zcio bridge import``) and return the running :class:`Bridge` once it
    is ready (its subscription declared and the sink open).

    ``to``: ``"ring:NAME"`` — one block per sample; created if missing
    (``layout`` default ``"variable"``, ``size`` default 128 MiB, ``policy``,
    ``mode`` default ``0o600``), the bridge becomes its producer; any number
    of local readers read it in place (``Peek.array()`` for arrays). A ring
    the import created is removed when it ends, however it ends (readers
    that have it open read on to its end; one that comes later finds no
    ring) unless ``keep=True``; a ring that existed before is never removed —
    or
    ``"connect:/path.sock"``, one message per sample on a channel to that
    listener (``recv_array`` for arrays). The import ends with the remote
    zcio stream: end of stream closes the ring cleanly; a remote failure,
    a producer's death or the exporter vanishing (after ``grace`` seconds)
    closes it with an error code and exit status 1; ``stop()`` before the
    end of stream closes it with ``ECANCELED`` (exit status
    :data:`EXIT_STOPPED`). Samples of plain Zenoh publishers are delivered
    as they are (such an import ends when stopped). ``connect_timeout``:
    fail (exit status 1, the ring closed with ``ETIMEDOUT``) if no Zenoh
    peer is reached within that many seconds (default: keep retrying; the
    bridge is ready before a peer is reached and says on its stderr when
    the endpoints to connect to do not answer). ``history=True``: catch up
    from the exporter's cache (a late joiner gets the last samples it
    holds). ``max_size``: larger samples are dropped and counted
    (``stats["oversize"]``); so are samples whose zcio metadata is
    malformed (``stats["malformed"]``). Other arguments and exceptions as
    for :func:`export`.
    """
    args = ["import", _text("key", key), "--to", _text("to", to)]
    if history:
        args.append("--history")
    if grace is not None:
        args += ["--grace", _seconds("grace", grace)]
    if connect_timeout is not None:
        secs = _seconds("connect_timeout", connect_timeout)
        if float(secs) == 0:
            raise ValueError("connect_timeout must be a positive number of seconds, not 0")
        args += ["--connect-timeout", secs]
    if keep:
        args.append("--keep")
    if size is not None:
        args += ["--size", _size("size", size)]
    if layout is not None:
        args += ["--layout", _text("layout", layout)]
    if policy is not None:
        args += ["--policy", _text("policy", policy)]
    if mode is not None:
        if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o777:
            raise ValueError(f"mode must be permission bits (0 ..= 0o777), not {mode!r}")
        args += ["--mode", format(mode, "o")]
    args += _common(listen, connect, config, max_size, scout, duration)
    return Bridge(args, ready_timeout=ready_timeout, env=env)
