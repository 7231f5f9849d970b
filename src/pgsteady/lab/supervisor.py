"""A supervisor that treats gateway replicas the way Kubernetes treats pods.

Every ``probe_interval`` it probes each replica's liveness and readiness (each with a 1 s
timeout). After ``failures`` consecutive liveness failures the replica is SIGKILLed and started
again (a restart, counted); after ``failures`` consecutive readiness failures it is taken out of
rotation until one readiness probe passes — never killed for it. A deploy is a rolling update:
the new version starts next to the old one, and the old one is stopped (SIGTERM) once the new
one is ready.

It runs on its own thread with its own event loop, and that thread starts every replica, so
the replicas' parent-death signal (SIGKILL) fires if the supervisor ends without stopping them.
``stop()`` ends them all on every way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from pgsteady.errors import LabError
from pgsteady.lab import _process
from pgsteady.lab.gateway import ENV, GatewayConfig
from pgsteady.lab.traffic import get

log = logging.getLogger("pgsteady.lab")

PROBES = {"naive": ("/health", "/ping"), "steady": ("/health/live", "/health/ready")}
STOP_GRACE = 3.0


@dataclass
class Replica:
    """One running (or restarting) replica process and what the probes saw of it."""

    config: GatewayConfig
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    live_failures: int = 0
    ready_failures: int = 0
    ready: bool = False
    retiring: bool = False
    starts: int = 0


@dataclass
class Events:
    """What happened, in seconds since ``t0``: restarts (name) and deploy steps."""

    restarts: list[tuple[float, str]] = field(default_factory=list)
    rolled_out_at: float | None = None


class Supervisor:
    """Start replicas, probe them, restart the dead, route only to the ready."""

    def __init__(self, configs: list[GatewayConfig], *, workdir: Path, probe_interval: float,
                 probe_timeout: float = 1.0, failures: int = 3,
                 initial_delay: float = 2.0) -> None:
        self.replicas = [Replica(c) for c in configs]
        self.workdir = workdir
        self.probe_interval = probe_interval
        self.probe_timeout = probe_timeout
        self.failures = failures
        self.initial_delay = initial_delay
        self.events = Events()
        self.pids: list[int] = []  # every process started, for checks that none is left
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self._commands: list[GatewayConfig] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="pgsteady-lab-supervisor",
                                        daemon=True)
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._dying: list[tuple[float, subprocess.Popen[bytes]]] = []

    # -- the outside ---------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self._started.wait(30)
        if self._error is not None:
            raise LabError(f"the supervisor could not start the replicas: {self._error}")

    def wait_ready(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.ready_ports()) < count:
            if time.monotonic() > deadline:
                raise LabError(f"only {len(self.ready_ports())} of {count} gateway replicas "
                               f"became ready within {timeout:.0f} s (logs in {self.workdir})")
            time.sleep(0.1)

    def ready_ports(self) -> list[int]:
        with self._lock:
            return [r.config.port for r in self.replicas if r.ready and not r.retiring]

    def deploy(self, config: GatewayConfig) -> None:
        """Roll out ``config`` next to the replica of the same base name (thread-safe)."""
        with self._lock:
            self._commands.append(config)

    def restarts(self) -> int:
        with self._lock:
            return len(self.events.restarts)

    def stop(self) -> None:
        """Stop every replica (SIGTERM, then SIGKILL) and the supervisor thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(STOP_GRACE * 2 + 10)
        self._reap_all()  # in case the thread could not

    # -- the thread ------------------------------------------------------------------------

    def _main(self) -> None:
        try:
            for replica in self.replicas:
                self._spawn(replica)
        except BaseException as exc:
            self._error = exc
            self._started.set()
            self._reap_all()
            return
        self._started.set()
        try:
            asyncio.run(self._loop())
        except Exception:
            log.exception("the supervisor stopped")
        finally:
            self._reap_all()

    async def _loop(self) -> None:
        next_probe = time.monotonic()
        while not self._stop.is_set():
            self._take_commands()
            self._reap_dying()
            if time.monotonic() >= next_probe:
                next_probe += self.probe_interval
                await self._probe_all()
            await asyncio.sleep(min(0.05, max(0.0, next_probe - time.monotonic())))

    def _take_commands(self) -> None:
        with self._lock:
            commands, self._commands = self._commands, []
        for config in commands:
            self.replicas.append(Replica(config))
            self._spawn(self.replicas[-1])

    async def _probe_all(self) -> None:
        live_path = PROBES[self.replicas[0].config.strategy][0]
        ready_path = PROBES[self.replicas[0].config.strategy][1]
        current = [r for r in self.replicas if r.proc is not None]
        results = await asyncio.gather(*(
            asyncio.gather(get(r.config.port, live_path, self.probe_timeout),
                           get(r.config.port, ready_path, self.probe_timeout))
            for r in current))
        for replica, (live, ready) in zip(current, results, strict=True):
            self._judge(replica, live == 200, ready == 200)
        self._retire_replaced()

    def _judge(self, replica: Replica, live: bool, ready: bool) -> None:
        if time.monotonic() - replica.started_at < self.initial_delay and not live:
            return  # still starting: probes do not count yet
        replica.live_failures = 0 if live else replica.live_failures + 1
        replica.ready_failures = 0 if ready else replica.ready_failures + 1
        with self._lock:
            if ready:
                replica.ready = True
            elif replica.ready_failures >= self.failures:
                replica.ready = False
        if replica.live_failures >= self.failures:
            log.info("replica %s failed %d liveness probes: SIGKILL and restart",
                     replica.config.name, replica.live_failures)
            self._kill(replica, signal.SIGKILL)
            with self._lock:
                replica.ready = False
                self.events.restarts.append((time.monotonic() - self.t0, replica.config.name))
            self._spawn(replica)

    def _retire_replaced(self) -> None:
        """Once a new version is ready, stop the old replica it replaces."""
        for new in self.replicas:
            if not new.ready or new.config.version == 1:
                continue
            base = new.config.name.split("-")[0]
            for old in self.replicas:
                if old.config.name == base and old.proc is not None and not old.retiring:
                    with self._lock:
                        old.retiring = True
                        if self.events.rolled_out_at is None:
                            self.events.rolled_out_at = time.monotonic() - self.t0
                    self._terminate(old)

    # -- processes ---------------------------------------------------------------------------

    def _spawn(self, replica: Replica) -> None:
        replica.starts += 1
        replica.live_failures = replica.ready_failures = 0
        log_path = self.workdir / f"replica-{replica.config.name}.log"
        env = {**os.environ, ENV: replica.config.to_env()}
        with open(log_path, "ab") as out:
            replica.proc = subprocess.Popen(
                [sys.executable, "-m", "pgsteady.lab.gateway"], stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                cwd=self.workdir,
                preexec_fn=_process.die_with_parent(signal.SIGKILL),  # noqa: PLW1509
            )
        replica.started_at = time.monotonic()
        self.pids.append(replica.proc.pid)

    def _kill(self, replica: Replica, sig: int) -> None:
        proc, replica.proc = replica.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(STOP_GRACE)

    def _terminate(self, replica: Replica) -> None:
        """SIGTERM without waiting: reaped (or killed after the grace) by ``_reap_dying``."""
        proc, replica.proc = replica.proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            self._dying.append((time.monotonic() + STOP_GRACE, proc))

    def _reap_dying(self) -> None:
        still = []
        for until, proc in self._dying:
            if proc.poll() is not None:
                continue
            if time.monotonic() > until:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(STOP_GRACE)
                continue
            still.append((until, proc))
        self._dying = still

    def _reap_all(self) -> None:
        for _, dying in self._dying:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(dying.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                dying.wait(STOP_GRACE)
        self._dying = []
        for replica in self.replicas:
            if replica.proc is not None and replica.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    replica.proc.send_signal(signal.SIGTERM)
        for replica in self.replicas:
            proc, replica.proc = replica.proc, None
            if proc is None:
                continue
            try:
                proc.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(STOP_GRACE)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # anything it left in its group


def new_version(config: GatewayConfig, port: int, *, migrate_on_start: bool) -> GatewayConfig:
    """The replica that replaces ``config`` in a deploy: version 2, its own port."""
    return replace(config, name=f"{config.name}-v2", port=port, version=2,
                   migrate_on_start=migrate_on_start)
