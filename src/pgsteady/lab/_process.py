"""Finding, starting and always stopping the server processes the lab runs.

PostgreSQL and PgBouncer refuse to run as root, so when we are root they run as an
unprivileged OS user (Debian's packages create ``postgres``). Every child gets a
parent-death signal, so even a ``kill -9`` of the Python process leaves no server behind.

On Linux that signal fires when the *thread* that forked the child ends, not the process, so
children are forked by the main thread or by one daemon thread that lives as long as the
process (:func:`popen`): a cluster started from a short-lived thread keeps its servers.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import logging
import os
import pwd
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pgsteady.errors import LabError, VersionNotInstalled

log = logging.getLogger("pgsteady.lab")

_PR_SET_PDEATHSIG = 1
_T = TypeVar("_T")
_APT_HINT = "install it with: apt-get install -y postgresql pgbouncer (or run `make demo`)"
_VERSIONS_SCRIPT = "scripts/postgres-versions.sh"


@dataclass(frozen=True)
class Binaries:
    """Where PostgreSQL's server programs and PgBouncer live."""

    pg_bindir: Path
    pgbouncer: Path

    @property
    def postgres(self) -> Path:
        return self.pg_bindir / "postgres"

    @property
    def initdb(self) -> Path:
        return self.pg_bindir / "initdb"

    def postgres_version(self) -> str:
        return _version_of(str(self.postgres))

    def postgres_major(self) -> int:
        """The server's major version (15 for "postgres (PostgreSQL) 15.14 (Debian ...)")."""
        return _major_of(self.postgres_version())

    def pgbouncer_version(self) -> str:
        return _version_of(str(self.pgbouncer))

    def pgbouncer_version_tuple(self) -> tuple[int, ...]:
        digits = self.pgbouncer_version().split()[-1]
        return tuple(int(part) for part in digits.split(".") if part.isdigit())


@cache
def _version_of(program: str) -> str:
    out = subprocess.run([program, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0].strip() if out.stdout else "unknown"


def _major_of(version: str) -> int:
    """``postgres --version`` output -> its major: "postgres (PostgreSQL) 18.4" -> 18."""
    for word in version.split():
        head = word.split(".")[0]
        if head.isdigit():
            return int(head)
    raise LabError(f"cannot read a PostgreSQL version from {version!r}")


def find_binaries(pg_version: int | None = None) -> Binaries:
    """Locate ``postgres``/``initdb`` and ``pgbouncer``, or say how to install them.

    Order: ``$PGSTEADY_PG_BINDIR``, ``pg_config --bindir``, ``/usr/lib/postgresql/*/bin``
    (newest first), then ``PATH``; PgBouncer: ``$PGSTEADY_PGBOUNCER``, ``PATH``, ``/usr/sbin``.
    With ``pg_version``, only a server of that major will do: the system's, or the one
    ``scripts/postgres-versions.sh`` installed under :func:`versions_root`.
    """
    bindir = _find_pg_bindir() if pg_version is None else _find_versioned_bindir(pg_version)
    return Binaries(pg_bindir=bindir, pgbouncer=_find_pgbouncer())


def versions_root() -> Path:
    """Where ``scripts/postgres-versions.sh`` puts the other majors: ``$PGSTEADY_PG_VERSIONS``,
    else the checkout's git-ignored ``.pg/`` (this file sits in ``<checkout>/src/pgsteady/lab``)."""
    if env := os.environ.get("PGSTEADY_PG_VERSIONS"):
        return Path(env)
    return Path(__file__).resolve().parents[3] / ".pg"


def _is_server_bindir(bindir: Path) -> bool:
    return (bindir / "postgres").is_file() and (bindir / "initdb").is_file()


def installed_pg_versions() -> dict[int, Path]:
    """Every PostgreSQL major installed here, oldest first, with its bin directory: the
    system's (``/usr/lib/postgresql/N``) and those under :func:`versions_root`."""
    found: dict[int, Path] = {}
    for pattern in (str(versions_root() / "*" / "bin"), "/usr/lib/postgresql/*/bin"):
        for path in map(Path, glob.glob(pattern)):
            if path.parent.name.isdigit() and _is_server_bindir(path):
                found[int(path.parent.name)] = path  # the system's wins: listed last
    return dict(sorted(found.items()))


def _find_versioned_bindir(pg_version: int) -> Path:
    if env := os.environ.get("PGSTEADY_PG_BINDIR"):
        bindir = Path(env)
        if _is_server_bindir(bindir) and \
                _major_of(_version_of(str(bindir / "postgres"))) == pg_version:
            return bindir
    if installed := installed_pg_versions().get(pg_version):
        return installed
    raise VersionNotInstalled(
        f"PostgreSQL {pg_version} is not installed here; install it with "
        f"{_VERSIONS_SCRIPT} {pg_version} (or `make setup`), which puts it in "
        f"{versions_root()}/{pg_version}")


def _find_pg_bindir() -> Path:
    candidates: list[Path] = []
    if env := os.environ.get("PGSTEADY_PG_BINDIR"):
        candidates.append(Path(env))
    if pg_config := shutil.which("pg_config"):
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0 and out.stdout.strip():
            candidates.append(Path(out.stdout.strip()))

    def major(path: str) -> float:
        name = Path(path).parent.name
        return float(name) if name.replace(".", "", 1).isdigit() else 0.0

    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=major,
                                           reverse=True)]
    if on_path := shutil.which("postgres"):
        candidates.append(Path(on_path).resolve().parent)
    for bindir in candidates:
        if (bindir / "postgres").is_file() and (bindir / "initdb").is_file():
            return bindir
    raise LabError(f"PostgreSQL server binaries (postgres, initdb) not found; {_APT_HINT}")


def _find_pgbouncer() -> Path:
    env = os.environ.get("PGSTEADY_PGBOUNCER")
    for candidate in (env, shutil.which("pgbouncer"), "/usr/sbin/pgbouncer"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise LabError(f"pgbouncer not found; {_APT_HINT}")


@dataclass(frozen=True)
class RunAs:
    """The OS user the servers run as; ``None`` fields mean "as ourselves"."""

    user: str | None = None
    uid: int | None = None
    gid: int | None = None

    def chown(self, path: Path) -> None:
        if self.uid is not None and self.gid is not None:
            os.chown(path, self.uid, self.gid)


def run_as() -> RunAs:
    """Ourselves when unprivileged; when root, ``$PGSTEADY_RUN_AS`` or ``postgres``."""
    if os.geteuid() != 0:
        return RunAs()
    name = os.environ.get("PGSTEADY_RUN_AS", "postgres")
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise LabError(
            f"running as root, and PostgreSQL refuses to run as root, but there is no OS user "
            f"{name!r} to run it as; create one (useradd --system {name}) or set PGSTEADY_RUN_AS"
        ) from None
    return RunAs(user=name, uid=entry.pw_uid, gid=entry.pw_gid)


# Looked up here, in the parent: a forked child of a threaded parent must not dlopen.
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def die_with_parent(sig: int) -> Callable[[], None]:
    """A ``preexec_fn`` that has the child receive ``sig`` when its parent exits.

    The "parent" is the thread that forks the child: use :func:`popen`, which forks from a
    thread that lives as long as the process.
    """
    def preexec() -> None:
        _prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)

    return preexec


class _Forker:
    """A daemon thread that lives as long as the process and runs every fork for threads
    that may end sooner (re-created after ``os.fork``, which does not copy threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = \
            queue.SimpleQueue()
        self._pid = 0

    def call(self, fn: Callable[[], _T], timeout: float = 60.0) -> _T:
        if threading.current_thread() is threading.main_thread():
            return fn()
        with self._lock:
            if self._pid != os.getpid():
                self._jobs = queue.SimpleQueue()
                threading.Thread(target=self._serve, args=(self._jobs,), daemon=True,
                                 name="pgsteady-lab-forker").start()
                self._pid = os.getpid()
        done: Future[_T] = Future()
        self._jobs.put((fn, done))
        return done.result(timeout)

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
        while True:  # a daemon thread: ends with the process, which is the point
            fn, done = jobs.get()
            if done.set_running_or_notify_cancel():
                try:
                    done.set_result(fn())
                except BaseException as exc:
                    done.set_exception(exc)


_FORKER = _Forker()


def popen(argv: Sequence[str], death_signal: int, **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` with a parent-death signal tied to the process, not the thread."""
    return _FORKER.call(lambda: subprocess.Popen(
        list(argv), preexec_fn=die_with_parent(death_signal), **kwargs))  # noqa: PLW1509


def spawn(
    argv: Sequence[str], *, log_path: Path, who: RunAs, death_signal: int, cwd: Path,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a server in its own session (Ctrl-C reaches us, not it), logging to a file."""
    with open(log_path, "ab") as out:
        who.chown(log_path)
        return popen(
            argv, death_signal,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
            user=who.uid,
            group=who.gid,
            extra_groups=[] if who.uid is not None else None,
        )


def stop(proc: subprocess.Popen[bytes], first: int, *, grace: float = 10.0) -> None:
    """Send ``first``; if the process has not exited within ``grace`` s, kill its group."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(first)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        log.warning("pid %d ignored signal %d for %.0f s; killing it", proc.pid, first, grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def check_port_free(port: int, what: str) -> None:
    """Fail with a one-line fix if ``port`` on 127.0.0.1 is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise LabError(
                    f"port {port} on 127.0.0.1 (for {what}) is taken by another process; "
                    f"choose another port or leave it unset to pick a free one"
                ) from None
            raise LabError(f"cannot use port {port} on 127.0.0.1 for {what}: {exc.strerror}")\
                from None


PORT_TRIES = 5
"""Attempts to start a server on a port picked by :func:`free_port`: on a busy machine another
process can take the port between our check and the server's bind."""


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def lost_port_race(proc: subprocess.Popen[bytes], log_path: Path, since: int) -> bool:
    """Whether ``proc`` exited because its port was taken (read from its log after ``since``)."""
    if proc.poll() is None:
        return False
    try:
        with open(log_path, "rb") as f:
            f.seek(since)
            text = f.read(65536).decode(errors="replace")
    except OSError:
        return False
    return "Address already in use" in text


def start_listening(what: str, launch: Callable[[int], subprocess.Popen[bytes]],
                    ready: Callable[[], bool], *, log_path: Path, timeout: float,
                    fixed: int | None = None, port: int | None = None) -> int:
    """Start a server that listens on 127.0.0.1 and wait until ``ready()``; its port.

    On ``fixed`` (refused with a one-line fix if taken), else on ``port`` (the one it had:
    a restart keeps it), else on a free one, picked again if another process took it before
    the server bound it (its log says so; :data:`PORT_TRIES` in all). ``launch(port)`` writes
    the server's configuration for ``port``, spawns it and keeps the process (its owner
    stops it, whether or not it became ready)."""
    if fixed:
        check_port_free(fixed, what)
    picked = not fixed and not port
    chosen = fixed or port or 0
    for attempt in range(PORT_TRIES):
        if picked:
            chosen = free_port()
        since = log_size(log_path)
        proc = launch(chosen)
        try:
            wait_until(ready, proc=proc, timeout=timeout, what=what, log_path=log_path)
        except LabError:
            if not (picked and attempt + 1 < PORT_TRIES
                    and lost_port_race(proc, log_path, since)):
                raise
            log.info("port %d was taken before %s bound it; trying another", chosen, what)
        else:
            break
    return chosen


def tail(path: Path, lines: int = 5) -> str:
    """The last lines of a log, for error messages."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def wait_until(
    ready: Callable[[], bool], *, proc: subprocess.Popen[bytes], timeout: float, what: str,
    log_path: Path,
) -> None:
    """Poll ``ready`` until true; fail naming the log if the process exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError(f"{what} exited with code {proc.returncode} while starting: "
                           f"{tail(log_path, 3)} (log: {log_path})")
        if ready():
            return
        time.sleep(0.02)
    raise LabError(f"{what} did not become ready within {timeout:.0f} s (log: {log_path})")
