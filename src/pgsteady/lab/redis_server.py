"""A throwaway Redis (Debian's ``redis-server``) for the lab and tests: the shared store the
guards use across processes (seed 002's "public statistics from a shared cache").

It listens on 127.0.0.1 on a free port and on a private unix socket (mode 700), needs a
random password (so other users of the machine cannot use it), keeps nothing on disk, and is
stopped on every way out like the other lab servers (parent-death signal, ``stop()``).
The password lives only in memory and in the 0600 config file in its temp directory; it is
never printed (``repr`` and ``safe_url`` hide it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Self

from pgsteady._extras import needs
from pgsteady.errors import LabError
from pgsteady.lab import _process
from pgsteady.lab._process import RunAs

if TYPE_CHECKING:
    import redis


def find_redis_server() -> Path:
    """``$PGSTEADY_REDIS_SERVER``, ``PATH``, then ``/usr/bin``; or say how to install it."""
    for candidate in (os.environ.get("PGSTEADY_REDIS_SERVER"), shutil.which("redis-server"),
                      "/usr/bin/redis-server"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise LabError("redis-server not found; install it with: apt-get install -y "
                   "redis-server (or run `make setup`)")


class RedisServer:
    """``RedisServer(workdir).start()``; ``.url`` for redis-py, ``.client()``, ``.stop()``."""

    def __init__(self, workdir: Path, *, port: int | None = None,
                 who: RunAs | None = None) -> None:
        self.binary = find_redis_server()
        self.who = who or _process.run_as()
        self.workdir = workdir
        self.socket_path = workdir / "redis.sock"
        self.log_path = workdir / "redis.log"
        self._conf_path = workdir / "redis.conf"
        self._fixed_port = port
        self.port = port or 0
        self._password = secrets.token_urlsafe(24)
        self._proc: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        return f"<RedisServer {self.safe_url} running={self.running}>"

    @property
    def url(self) -> str:
        """``redis://:<password>@127.0.0.1:<port>/0`` — secret: do not print it."""
        return f"redis://:{self._password}@127.0.0.1:{self.port}/0"

    @property
    def safe_url(self) -> str:
        return f"redis://:***@127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def client(self, **kwargs: object) -> redis.Redis:
        """A redis-py client for this server (closed by the caller)."""
        with needs("redis", "the lab's Redis client"):
            import redis as redis_py  # noqa: PLC0415 - the redis extra is optional

        options: dict[str, object] = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}
        return redis_py.Redis.from_url(self.url, **{**options, **kwargs})

    def _write_config(self) -> None:
        lines = [
            "bind 127.0.0.1",
            f"port {self.port}",
            "protected-mode yes",
            "daemonize no",
            'save ""',
            "appendonly no",
            f'dir "{self.workdir}"',
            f'unixsocket "{self.socket_path}"',
            "unixsocketperm 700",
            f"requirepass {self._password}",
            'logfile ""',
        ]
        fd = os.open(self._conf_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as conf:
            conf.write("\n".join(lines) + "\n")
        self.who.chown(self._conf_path)

    def start(self) -> Self:
        if self._fixed_port:  # checked as redis-server binds (see _wait_for_port)
            self._wait_for_port(0.0)

        def launch(port: int) -> subprocess.Popen[bytes]:
            self.port = port
            self._write_config()
            self._proc = _process.spawn([str(self.binary), str(self._conf_path)],
                                        log_path=self.log_path, who=self.who,
                                        death_signal=signal.SIGTERM, cwd=self.workdir)
            return self._proc

        _process.start_listening("Redis", launch, self._answers, log_path=self.log_path,
                                 timeout=20, port=self._fixed_port or self.port)
        return self

    def _answers(self) -> bool:
        import redis as redis_py  # noqa: PLC0415

        try:
            with self.client(socket_timeout=0.5, socket_connect_timeout=0.5) as client:
                return bool(client.ping())
        except redis_py.RedisError:
            return False

    def stop(self) -> None:
        """Stop it (SIGTERM; nothing to save, so it is quick)."""
        if self._proc is not None:
            _process.stop(self._proc, signal.SIGTERM, grace=5)
            self._proc = None

    def restart(self, *, port_wait: float = 5.0) -> None:
        """Stop and start on the same port with the same password (the data is gone),
        waiting up to ``port_wait`` s for the old listener to be gone."""
        self.stop()
        self._fixed_port = self.port
        self._wait_for_port(port_wait)
        self.start()

    def _wait_for_port(self, wait: float) -> None:
        """Until nothing listens on our port. The probe binds with SO_REUSEADDR, as
        redis-server does: the TIME_WAIT sockets a client's connections leave behind must
        not count as "taken" (a plain bind said so on every restart after a client)."""
        port = self._fixed_port or self.port
        deadline = time.monotonic() + wait
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError as exc:
                    if time.monotonic() >= deadline:
                        raise LabError(f"port {port} on 127.0.0.1 (for Redis) is taken by "
                                       f"another process ({exc.strerror}); choose another "
                                       f"port or leave it unset to pick a free one") from None
                else:
                    return
            time.sleep(0.05)

    @contextlib.contextmanager
    def hung(self) -> Iterator[None]:
        """Redis stops answering (SIGSTOP: connections stay open, nothing replies) for the
        block, then answers again (SIGCONT): the outage a timeout is for."""
        if self._proc is None:
            raise LabError("Redis is not running")
        pid = self._proc.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)
