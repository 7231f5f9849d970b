"""The synthetic check of the paging list: does a query that needs the database (or a
service's deep health check) answer within its deadline? ``pgsteady probe`` runs one, every
5 minutes from a cron job or a Kubernetes CronJob, and writes its result for Prometheus
(node_exporter's textfile collector) where ``pgsteady alerts`` has rules on it.

The migration outage's uptime check never touched the database, so it stayed green while
requests failed; this one fails when the database does not answer, and says so as
``pgsteady_probe_success{probe, check} 0``.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pgsteady import _http
from pgsteady.errors import UsageError

# The one statement the probe sends before the caller's own: the deadline as the server's
# statement_timeout, for this transaction only (safe behind a transaction pooler).
SET_TIMEOUT = "select set_config('statement_timeout', %s, true)"
DEFAULT_QUERY = "select 1"

METRICS = (
    ("pgsteady_probe_success", "1 if the last probe answered within its deadline, else 0"),
    ("pgsteady_probe_duration_seconds", "how long the last probe took"),
    ("pgsteady_probe_last_run_timestamp_seconds", "when the last probe ran (Unix time)"),
)


@dataclass(frozen=True)
class ProbeResult:
    """One probe's outcome; ``reached`` is False when nothing answered at all."""

    name: str
    check: str  # "database" or "http"
    success: bool
    seconds: float
    at: float  # Unix time
    error: str | None = None
    reached: bool = True


def database(dsn: str, *, name: str = "database", query: str = DEFAULT_QUERY,
             deadline: float = 5.0) -> ProbeResult:
    """Connect, and run ``query`` in a transaction whose statement_timeout is what is left of
    ``deadline``; the connection is closed afterwards (a probe holds nothing)."""
    import psycopg  # noqa: PLC0415 - the probe's only heavy import, loaded when it runs

    start, at = time.monotonic(), time.time()
    # libpq's connect_timeout is whole seconds, at least 2: the rest of the budget is ours.
    connect_timeout = max(2, math.ceil(deadline))
    try:
        conn = psycopg.connect(dsn, connect_timeout=connect_timeout, autocommit=False,
                               application_name=f"pgsteady-probe {name}"[:63],
                               prepare_threshold=None)
    except psycopg.Error as exc:
        return ProbeResult(name, "database", False, time.monotonic() - start, at,
                           _first_line(exc), reached=False)
    try:
        with conn:
            left_ms = max(1, int((deadline - (time.monotonic() - start)) * 1000))
            conn.execute(SET_TIMEOUT, (f"{left_ms}ms",))
            conn.execute(query).fetchall()  # the operator's own read, from the command line
        seconds = time.monotonic() - start
        if seconds > deadline:
            return ProbeResult(name, "database", False, seconds, at,
                               f"answered after {seconds:.2f} s, past the {deadline:g} s deadline")
        return ProbeResult(name, "database", True, seconds, at)
    except psycopg.Error as exc:
        return ProbeResult(name, "database", False, time.monotonic() - start, at,
                           _first_line(exc))
    finally:
        conn.close()


def http_url(url: str) -> str:
    """``url`` if it is an http(s) URL, else a UsageError saying what to give."""
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--url {url!r} is not an http(s) URL; give the service's deep "
                         "health check, e.g. http://api:8000/health/deep")
    return url


def http(url: str, *, name: str = "http", deadline: float = 5.0) -> ProbeResult:
    """GET ``url`` (a service's /health/deep): success is a 200 within ``deadline``."""
    http_url(url)
    start, at = time.monotonic(), time.time()
    try:
        with urllib.request.urlopen(url, timeout=deadline) as response:  # noqa: S310 - http(s) only, checked above
            response.read(65536)
            status = response.status
    except urllib.error.HTTPError as exc:
        return ProbeResult(name, "http", False, time.monotonic() - start, at,
                           f"HTTP {exc.code} from {url}")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return ProbeResult(name, "http", False, time.monotonic() - start, at,
                           f"{url}: {reason}", reached=False)
    seconds = time.monotonic() - start
    if status != 200 or seconds > deadline:
        return ProbeResult(name, "http", False, seconds, at, f"HTTP {status} after "
                                                             f"{seconds:.2f} s from {url}")
    return ProbeResult(name, "http", True, seconds, at)


_SECRET = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def _first_line(exc: BaseException) -> str:
    """The error's first line; a password a driver message might quote is masked."""
    text = str(exc).strip().splitlines()
    return _SECRET.sub(r"\1***", text[0]) if text else type(exc).__name__


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exposition(results: Iterable[ProbeResult]) -> str:
    """Prometheus' text format, as node_exporter's textfile collector reads it."""
    results = list(results)
    lines: list[str] = []
    for metric, help_text in METRICS:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        for result in results:
            labels = f'{{probe="{_label(result.name)}",check="{result.check}"}}'
            value = {"pgsteady_probe_success": 1.0 if result.success else 0.0,
                     "pgsteady_probe_duration_seconds": round(result.seconds, 6),
                     "pgsteady_probe_last_run_timestamp_seconds": round(result.at, 3)}[metric]
            lines.append(f"{metric}{labels} {value!r}")
    return "\n".join(lines) + "\n"


def check_path(path: str | Path) -> Path:
    """Refuse, before anything runs, a path whose folder does not exist."""
    target = Path(path)
    if not target.parent.is_dir() or target.is_dir():
        raise UsageError(f"--metrics-file {path}: not a file in an existing folder; point it "
                         "at a .prom file in node_exporter's --collector.textfile.directory")
    return target


def write_textfile(path: str | Path, text: str) -> None:
    """Replace ``path`` atomically (a temporary file beside it, renamed): node_exporter never
    reads half a file."""
    target = check_path(path)
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(temp, 0o644)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


class Probing:
    """``/metrics`` that runs the probes on each scrape (blackbox-exporter style: Prometheus
    scrapes it every 5 minutes). One run at a time; a scrape that arrives while one runs
    waits for it (at most its deadline) and shares its result."""

    def __init__(self, run: Callable[[], list[ProbeResult]]) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._last: tuple[float, str] = (-math.inf, "")

    def metrics(self) -> str:
        asked = time.monotonic()
        with self._lock:  # bounded: every check in a run is bounded by its deadline
            finished, text = self._last
            if finished >= asked:
                return text
            text = exposition(self._run())
            self._last = (time.monotonic(), text)
            return text


def serve(probing: Probing, host: str = "127.0.0.1", port: int = 0) -> _http.BoundedServer:
    """Serve ``probing`` on ``GET /metrics`` (started; OSError if it cannot listen)."""
    def app(request: _http.Request) -> _http.Response:
        if request.method not in ("GET", "HEAD"):
            return _http.text(405, "only GET and HEAD")
        if request.path != "/metrics":
            return _http.text(404, "see /metrics")
        return _http.Response(200, [("Content-Type", "text/plain; version=0.0.4; "
                                                      "charset=utf-8")],
                              probing.metrics().encode())
    # A scrape may wait for a running probe: the queue's patience covers a whole run.
    limits = _http.Limits(queue_timeout=60.0, write_timeout=10.0)
    return _http.BoundedServer(app, host, port, limits, name="pgsteady-probe-http").start()
