"""Health probes that match what users see, and never restart a server for a slow database.

Seed 002: the API's health check queried the database, so when the database queued every
query, healthy servers failed their checks and were restarted — and each restart leaked
sessions. The split Kubernetes expects, and what :class:`Health` gives:

- ``live()``: the process is up. No I/O, ever: a slow dependency must not kill a server.
- ``ready()``: every dependency answers within a short deadline (1 s) and no breaker is
  open; a server that is not ready is taken out of rotation, not killed, and comes back by
  itself when the dependency does.
- ``deep()``: each dependency exercised for real (a query in a transaction, a cache round
  trip), for monitoring that should page when customers would notice.

Reports follow ``application/health+json`` (draft-inadarei-api-health-check): ``status``
pass / warn / fail and ``checks`` with observed values and times. ``asgi()`` serves them at
``/health/live``, ``/health/ready`` and ``/health/deep`` (200, or 503 on fail) as a plain
ASGI app; ``serve(port)`` runs the same on a small bounded HTTP server (:mod:`pgsteady._http`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from pgsteady import _checks, _http
from pgsteady._health_serve import (
    CONTENT_TYPE,
    PATHS,
    ASGIApp,
    HealthServer,
    WSGIApp,
    asgi_app,
    status_code,
    wsgi_app,
)
from pgsteady.errors import UsageError
from pgsteady.guards.backends import RedisBackend
from pgsteady.guards.breaker import CircuitBreaker
from pgsteady.settings import scrub

__all__ = ["CONTENT_TYPE", "PATHS", "Check", "CheckResult", "Health", "HealthServer", "Status",
           "breaker_check", "db_check", "optional", "redis_check", "status_code"]

log = logging.getLogger("pgsteady.health")

Status = Literal["pass", "warn", "fail"]
Mode = Literal["ready", "deep"]


@dataclass(frozen=True)
class CheckResult:
    """What a check observed. A check may also return a plain value (pass, observed), a
    bool (False is fail) or raise (fail, with the error as output)."""

    status: Status = "pass"
    observed: Any = None
    unit: str | None = None
    output: str = ""


@dataclass(frozen=True)
class Check:
    """A named dependency's probes: ``ready(timeout)`` and ``deep(timeout)``, both sync or
    both async. ``db_check``, ``redis_check`` and ``breaker_check`` build these; a plain
    callable passed to :class:`Health` is used for both."""

    ready: Callable[[float], Any]
    deep: Callable[[float], Any]
    component_type: str = "component"
    optional: bool = False  # its failure is reported as "warn": see optional()


def _as_check(value: Check | Callable[[], Any]) -> Check:
    if isinstance(value, Check):
        return value
    if not callable(value):
        raise UsageError(f"a health check must be a callable or a Check, got {value!r}")
    if inspect.iscoroutinefunction(value):
        async def async_probe(_timeout: float) -> Any:
            return await value()
        return Check(async_probe, async_probe)
    return Check(lambda _timeout: value(), lambda _timeout: value())


def optional(check: Check | Callable[[], Any]) -> Check:
    """A dependency the service can serve without (a cache, a recommendations API): when it
    fails, ``ready()`` and ``deep()`` report it — and the whole report — as ``warn`` and still
    answer 200, so its outage degrades requests instead of taking every server out of rotation
    (which would turn a Redis outage into a full one). It is still run, timed and shown."""
    return replace(_as_check(check), optional=True)


def _settle(entry: dict[str, Any], check: Check) -> dict[str, Any]:
    """An optional check's failure is a warning (the service stays ready without it)."""
    if not check.optional or entry["status"] != "fail":
        return entry
    why = entry.get("output") or "failed"
    log.warning("optional check failed, still ready: %s", why)
    return {**entry, "status": "warn", "output": f"{why} (optional: still ready without it)"}


def db_check(db: Any) -> Check:
    """``Database``, ``AsyncDatabase``, ``Steady`` or ``AsyncSteady``: ready runs ``select 1``
    within the deadline (and fails at once while the breaker is open); deep runs a read-only
    transaction that reports whether the server is a primary."""
    from pgsteady.arunner import AsyncDatabase  # noqa: PLC0415 - avoid an import cycle

    if type(db).__name__ in ("Steady", "AsyncSteady") and \
            type(db).__module__.startswith("pgsteady."):  # SQLAlchemy's statements
        return _steady_check(db)
    if not (callable(getattr(db, "fetchone", None)) and callable(getattr(db, "run", None))):
        raise UsageError(f"db_check needs a Database or AsyncDatabase, got "
                         f"{type(db).__name__} {db!r}")
    deep_sql = "SELECT pg_is_in_recovery(), current_setting('server_version')"

    def describe(row: Any) -> CheckResult:
        role = "standby" if row[0] else "primary"
        return CheckResult(output=f"PostgreSQL {row[1]}, {role}")

    if isinstance(db, AsyncDatabase):
        async def aready(timeout: float) -> Any:
            await db.fetchone("SELECT 1", deadline=timeout)

        async def adeep(timeout: float) -> Any:
            async def work(conn: Any) -> Any:
                return await (await conn.execute(deep_sql)).fetchone()
            return describe(await db.run(work, deadline=timeout))

        return Check(aready, adeep, "datastore")

    def ready(timeout: float) -> Any:
        db.fetchone("SELECT 1", deadline=timeout)

    def deep(timeout: float) -> Any:
        return describe(db.run(lambda conn: conn.execute(deep_sql).fetchone(),
                               deadline=timeout))

    return Check(ready, deep, "datastore")


def _steady_check(steady: Any) -> Check:
    """:func:`db_check` for ``Steady``/``AsyncSteady`` (statements are SQLAlchemy's)."""
    from sqlalchemy import text  # noqa: PLC0415 - only with the sqlalchemy extra

    one = text("SELECT 1")
    deep_sql = text("SELECT pg_is_in_recovery(), current_setting('server_version')")

    def describe(row: Any) -> CheckResult:
        return CheckResult(output=f"PostgreSQL {row[1]}, {'standby' if row[0] else 'primary'}")

    if inspect.iscoroutinefunction(steady.scalar):
        async def aready(timeout: float) -> Any:
            await steady.scalar(one, deadline=timeout)

        async def adeep(timeout: float) -> Any:
            return describe((await steady.execute(deep_sql, deadline=timeout)).one())

        return Check(aready, adeep, "datastore")
    return Check(lambda timeout: steady.scalar(one, deadline=timeout),
                 lambda timeout: describe(steady.execute(deep_sql, deadline=timeout).one()),
                 "datastore")


def redis_check(client: Any) -> Check:
    """A redis-py client (sync or asyncio) or a ``RedisBackend`` (its sync client): ready is
    ``PING``; deep writes, reads back and deletes a short-lived probe key."""
    if isinstance(client, RedisBackend):
        client = client.client
    is_async = inspect.iscoroutinefunction(getattr(client, "ping", None))

    def probe_key() -> tuple[str, str]:
        return f"pgsteady:health:{uuid.uuid4().hex}", uuid.uuid4().hex

    if is_async:
        async def aready(_timeout: float) -> Any:
            await client.ping()

        async def adeep(timeout: float) -> Any:
            key, value = probe_key()
            await client.set(key, value, px=max(1000, int(timeout * 1000)))
            got = await client.get(key)
            await client.delete(key)
            return _round_trip(got, value)

        return Check(aready, adeep, "datastore")

    def ready(_timeout: float) -> Any:
        client.ping()

    def deep(timeout: float) -> Any:
        key, value = probe_key()
        client.set(key, value, px=max(1000, int(timeout * 1000)))
        got = client.get(key)
        client.delete(key)
        return _round_trip(got, value)

    return Check(ready, deep, "datastore")


def _round_trip(got: Any, value: str) -> CheckResult:
    if got is None or (got.decode() if isinstance(got, bytes) else got) != value:
        return CheckResult("fail", output="the value written was not read back")
    return CheckResult(output="set/get/delete round trip")


_BREAKER_STATUS: dict[str, Status] = {"closed": "pass", "half-open": "warn", "open": "fail"}


def breaker_check(breaker: CircuitBreaker) -> Check:
    """No I/O: closed passes, half-open warns, open fails (observed: its state)."""
    if not isinstance(breaker, CircuitBreaker):
        raise UsageError(f"breaker_check needs a CircuitBreaker, got "
                         f"{type(breaker).__name__} {breaker!r}")

    def probe(_timeout: float) -> CheckResult:
        stats = breaker.stats()
        status = _BREAKER_STATUS[stats.state]
        output = "" if stats.state == "closed" else \
            f"circuit {stats.name!r} is {stats.state}; retry in {stats.retry_after:.1f} s"
        return CheckResult(status, stats.state, None, output)

    return Check(probe, probe, "component")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _entry(result: Any, took: float, component_type: str) -> dict[str, Any]:
    if isinstance(result, CheckResult):
        status, observed, unit, output = result.status, result.observed, result.unit, \
            result.output
    elif result is False:
        status, observed, unit, output = "fail", None, None, "the check returned False"
    else:
        status, observed, unit, output = "pass", None if result is True else result, None, ""
    entry: dict[str, Any] = {"componentType": component_type, "status": status,
                             "time": _now(), "responseTimeMs": round(took * 1000, 2)}
    if observed is not None:
        entry["observedValue"] = observed
        if unit:
            entry["observedUnit"] = unit
    if output:
        entry["output"] = output
    return entry


def _failed(exc: BaseException, took: float, component_type: str) -> dict[str, Any]:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return {"componentType": component_type, "status": "fail", "time": _now(),
            "responseTimeMs": round(took * 1000, 2),
            "output": scrub(f"{type(exc).__name__}: {text}")}


def _overall(checks: Mapping[str, list[dict[str, Any]]]) -> Status:
    statuses = {entry["status"] for entries in checks.values() for entry in entries}
    return "fail" if "fail" in statuses else "warn" if "warn" in statuses else "pass"


class Health:
    """Liveness, readiness and deep checks over named dependencies (see the module doc).

    ``checks`` maps names to :class:`Check` objects (``db_check(db)``, ...) or plain
    callables. ``timeout`` is the deadline of one ``ready()``/``deep()`` as a whole; every
    check gets 90 % of it, and a check still running at the deadline is reported as failed
    (it keeps its worker thread until it returns, so give checks their own deadlines).
    """

    def __init__(self, checks: Mapping[str, Check | Callable[[], Any]] | None = None, *,
                 timeout: float = 1.0, deep_timeout: float = 3.0, service: str | None = None,
                 version: str | None = None, max_threads: int = 16) -> None:
        if checks is not None and not isinstance(checks, Mapping):
            raise UsageError(f"checks must map names to checks, e.g. {{'db': db_check(db)}}; "
                             f"got {type(checks).__name__}")
        self.checks = {_checks.text(name, "a check's name"): _as_check(check)
                       for name, check in (checks or {}).items()}
        self.timeout = _checks.finite_seconds(timeout, "timeout")
        self.deep_timeout = _checks.finite_seconds(deep_timeout, "deep_timeout")
        _checks.whole(max_threads, "max_threads")
        self.service = service
        self.version = version
        self._started = time.monotonic()
        self._threads = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_threads, thread_name_prefix="pgsteady-health")
        # Probes that arrive while the same kind is running share its result: a burst of
        # load-balancer checks costs the database one query, not one each.
        self._lock = threading.Lock()
        self._running: dict[Mode, concurrent.futures.Future[dict[str, Any]]] = {}
        # Per event loop: a Health may serve a uvicorn loop and be probed from another.
        self._arunning: dict[tuple[asyncio.AbstractEventLoop, Mode],
                             asyncio.Future[dict[str, Any]]] = {}

    def close(self) -> None:
        """Stop the check threads (checks still running finish on their own)."""
        self._threads.shutdown(wait=False, cancel_futures=True)

    def _report(self, description: str, checks: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        report: dict[str, Any] = {"status": _overall(checks), "description": description}
        if self.service:
            report["serviceId"] = self.service
        if self.version:
            report["version"] = self.version
        report["checks"] = checks
        return report

    def live(self) -> dict[str, Any]:
        """The process is up (and this thread answers): no I/O, no checks."""
        uptime = {"componentType": "system", "status": "pass", "time": _now(),
                  "observedValue": round(time.monotonic() - self._started, 3),
                  "observedUnit": "s"}
        return self._report("live", {"uptime": [uptime]})

    # -- sync ---------------------------------------------------------------------------

    def ready(self) -> dict[str, Any]:
        """Every dependency answers within ``timeout`` and no breaker is open."""
        return self._run_sync("ready", self.timeout)

    def deep(self) -> dict[str, Any]:
        """Every dependency exercised for real, within ``deep_timeout``."""
        return self._run_sync("deep", self.deep_timeout)

    def _run_sync(self, mode: Mode, timeout: float) -> dict[str, Any]:
        return self._shared(mode, timeout).result()

    def _shared(self, mode: Mode, timeout: float) -> concurrent.futures.Future[dict[str, Any]]:
        """The report of the evaluation of ``mode`` running now, or of one started now.

        Never blocks: a probe that arrives while the checks run shares their result, and the
        future completes by the deadline whatever the checks do, so no caller — a thread, or
        a deferred answer of the HTTP server — waits longer than ``timeout`` for it."""
        with self._lock:
            running = self._running.get(mode)
            if running is not None:
                return running
            mine: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
            self._running[mode] = mine
        try:
            self._evaluate_sync(mode, timeout, mine)
        except BaseException as exc:  # e.g. close()d: probes that joined must not wait forever
            with self._lock:
                self._running.pop(mode, None)
            if not mine.done():
                mine.set_exception(exc)
            raise
        return mine

    def _evaluate_sync(self, mode: Mode, timeout: float,
                       report: concurrent.futures.Future[dict[str, Any]]) -> None:
        """Start every check on the check threads; ``report`` is set when the last one ends
        or at the deadline (a timer), whichever comes first."""
        start = time.monotonic()
        budget = timeout * 0.9
        finished = threading.Event()
        futures: dict[str, concurrent.futures.Future[dict[str, Any]]] = {}

        def finish() -> None:
            with self._lock:
                if finished.is_set():
                    return
                finished.set()
            timer.cancel()
            try:
                checks: dict[str, list[dict[str, Any]]] = {}
                for name, check in self.checks.items():
                    future = futures.get(name)
                    if future is not None and future.done() and not future.cancelled():
                        entry = future.result()
                    else:
                        if future is not None:
                            future.cancel()
                        entry = _failed(TimeoutError(f"no answer within {timeout * 1000:.0f} "
                                                     f"ms"), time.monotonic() - start,
                                        check.component_type)
                    checks[name] = [_settle(entry, check)]
                result: dict[str, Any] | BaseException = self._report(mode, checks)
            except BaseException as exc:
                log.exception("building the %s report failed", mode)
                result = exc
            with self._lock:
                self._running.pop(mode, None)
            if isinstance(result, BaseException):
                report.set_exception(result)
            else:
                report.set_result(result)

        def one_done(_: object) -> None:
            if all(future.done() for future in futures.values()):
                finish()

        timer = threading.Timer(timeout, finish)
        timer.daemon = True
        timer.name = f"pgsteady-health-{mode}-deadline"
        for name, check in self.checks.items():
            futures[name] = self._threads.submit(self._one_sync, check, mode, budget)
        for future in list(futures.values()):
            future.add_done_callback(one_done)
        if not self.checks:
            finish()
        elif not finished.is_set():
            timer.start()

    @staticmethod
    def _one_sync(check: Check, mode: Mode, budget: float) -> dict[str, Any]:
        probe = check.ready if mode == "ready" else check.deep
        start = time.monotonic()
        if inspect.iscoroutinefunction(probe):
            return _failed(UsageError("an async check; use aready()/adeep() or the ASGI app"),
                           0.0, check.component_type)
        try:
            result = probe(budget)
        except Exception as exc:
            return _failed(exc, time.monotonic() - start, check.component_type)
        return _entry(result, time.monotonic() - start, check.component_type)

    # -- asyncio -------------------------------------------------------------------------

    async def aready(self) -> dict[str, Any]:
        """``ready()`` from an event loop: async checks run here, sync ones in threads."""
        return await self._run_async("ready", self.timeout)

    async def adeep(self) -> dict[str, Any]:
        return await self._run_async("deep", self.deep_timeout)

    async def _run_async(self, mode: Mode, timeout: float) -> dict[str, Any]:
        key = (asyncio.get_running_loop(), mode)
        running = self._arunning.get(key)
        if running is not None:
            return await asyncio.shield(running)
        mine = asyncio.ensure_future(self._evaluate_async(mode, timeout))
        self._arunning[key] = mine
        mine.add_done_callback(lambda _: self._arunning.pop(key, None))
        return await asyncio.shield(mine)

    async def _evaluate_async(self, mode: Mode, timeout: float) -> dict[str, Any]:
        names = list(self.checks)
        results = await asyncio.gather(
            *(self._one_async(self.checks[name], mode, timeout) for name in names))
        return self._report(mode, {name: [_settle(result, self.checks[name])]
                                   for name, result in zip(names, results, strict=True)})

    async def _one_async(self, check: Check, mode: Mode, timeout: float) -> dict[str, Any]:
        probe = check.ready if mode == "ready" else check.deep
        start = time.monotonic()
        budget = timeout * 0.9
        try:
            if inspect.iscoroutinefunction(probe):
                result = await asyncio.wait_for(probe(budget), timeout)
            else:
                loop = asyncio.get_running_loop()
                result = await asyncio.wait_for(
                    asyncio.shield(loop.run_in_executor(self._threads, probe, budget)), timeout)
        except TimeoutError:
            return _failed(TimeoutError(f"no answer within {timeout * 1000:.0f} ms"),
                           time.monotonic() - start, check.component_type)
        except Exception as exc:
            return _failed(exc, time.monotonic() - start, check.component_type)
        return _entry(result, time.monotonic() - start, check.component_type)

    # -- serving -------------------------------------------------------------------------

    def _probe(self, which: Literal["ready", "deep"]) -> concurrent.futures.Future[dict[str, Any]]:
        """The shared evaluation's report, as a future (for the bounded server's deferred
        answers: a waiting probe holds no thread)."""
        return self._shared(which, self.timeout if which == "ready" else self.deep_timeout)

    def asgi(self) -> ASGIApp:
        """An ASGI 3 app serving ``/health/live``, ``/health/ready``, ``/health/deep``,
        relative to where it is mounted (``root_path``: uvicorn's ``--root-path``, a
        Starlette/FastAPI ``Mount("/probes", app=health.asgi())``)."""
        return asgi_app(self)

    def wsgi(self) -> WSGIApp:
        """A WSGI app with the same routes and JSON, for Flask or Django (mount it with
        werkzeug's ``DispatcherMiddleware``; paths are relative to ``SCRIPT_NAME``). Each
        readiness probe holds a server thread until the shared evaluation ends (at most
        ``timeout``): WSGI has no other way to wait."""
        return wsgi_app(self)

    def serve(self, port: int = 0, host: str = "127.0.0.1", *,
              limits: _http.Limits | None = None) -> HealthServer:
        """Serve the three endpoints from a small bounded HTTP server on daemon threads (for
        workers without a web server); ``port=0`` picks a free one. ``limits`` bounds its
        threads, connections and timeouts (:class:`pgsteady._http.Limits`); readiness probes
        wait on the shared evaluation, not on its workers, so each is answered within
        ``timeout`` however many arrive. Stop it with ``stop()`` or ``with``."""
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise UsageError(f"port must be a whole number from 0 to 65535 (0: any free one), "
                             f"got {port!r}")
        return HealthServer(self, host, port, limits).start()
