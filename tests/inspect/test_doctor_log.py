"""doctor on a PgBouncer log: not-ready closures and dropped cancels per minute, by the
log's own timestamps."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from pgsteady.cli import main
from pgsteady.inspect.findings_pgbouncer import pgbouncer_findings
from pgsteady.inspect.pgbouncer import scan_log

END = datetime(2026, 10, 10, 14, 3, 30, tzinfo=UTC)


def _line(at: datetime, sock: str, message: str) -> str:
    stamp = at.strftime("%Y-%m-%d %H:%M:%S.") + f"{at.microsecond // 1000:03d}"
    return f"{stamp} UTC [2788] LOG {sock}: app/app@127.0.0.1:5432 {message}"


def _log(tmp_path, *, not_ready: int, cancels: int = 0, span: float = 59.0,
         end: datetime = END, old_burst: int = 0) -> str:
    lines = [_line(end - timedelta(hours=1), "C-0x1", "login attempt: db=app user=app")]
    for i in range(old_burst):  # an hour before: must not count as "the last minute"
        at = end - timedelta(minutes=50, seconds=i * 0.1)
        lines.append(_line(at, f"S-0x{i + 1000:x}",
                           "closing because: client disconnect while server was not ready"))
    for i in range(not_ready):
        at = end - timedelta(seconds=span * (1 - i / max(not_ready, 1)))
        lines.append(_line(at, f"S-0x{i + 1:x}", "new connection to server (from 127.0.0.1:1)"))
        lines.append(_line(at + timedelta(milliseconds=5), f"S-0x{i + 1:x}",
                           "closing because: client disconnect while server was not ready "
                           "(age=0s)"))
    for i in range(cancels):
        at = end - timedelta(seconds=30 - i * 0.1)
        lines.append(_line(at, f"C-0x{i + 5000:x}",
                           "closing because: cancel request for idle client (age=0s)"))
    lines.append(_line(end, "C-0x2", "closing because: client close request (age=1s)"))
    path = tmp_path / "pgbouncer.log"
    path.write_text("\n".join(sorted(lines)) + "\n")
    return str(path)


def _findings(path: str) -> dict[str, str]:
    return {f.id: f.severity for f in pgbouncer_findings(None, scan_log(path))}


def test_120_not_ready_closures_in_the_last_minute_are_critical(tmp_path, capsys):
    """A log with 120 not-ready closures in its last minute: pgbouncer-not-ready-closures is
    critical, from the log alone, with the per-minute counts as evidence; exit 1."""
    path = _log(tmp_path, not_ready=120)
    code = main(["doctor", "--pgbouncer-log", path, "--json"])
    out, err = capsys.readouterr()
    assert code == 1, err
    report = json.loads(out)
    finding = next(f for f in report["findings"] if f["id"] == "pgbouncer-not-ready-closures")
    assert finding["severity"] == "critical"
    assert finding["evidence"]["last_minute"]["not_ready"] == 120
    assert finding["evidence"]["log_ends_at"] == "2026-10-10T14:03:30+00:00"
    assert sum(m["not_ready"] for m in finding["evidence"]["per_minute"]) == 120
    assert report["checked"]["pgbouncer_log"]["path"] == path


def test_thresholds_per_minute(tmp_path):
    """30 a minute is a warning, 5 is nothing, and an old burst an hour before the log's end
    does not count as the last minute."""
    assert _findings(_log(tmp_path, not_ready=30))["pgbouncer-not-ready-closures"] == "warning"
    assert "pgbouncer-not-ready-closures" not in _findings(_log(tmp_path, not_ready=5))
    assert "pgbouncer-not-ready-closures" not in _findings(
        _log(tmp_path, not_ready=3, old_burst=200))
    scan = scan_log(_log(tmp_path, not_ready=3, old_burst=200))
    assert scan.peak("not_ready")[1] == 200


def test_dropped_cancels(tmp_path):
    """More than 10 dropped cancels in the last minute is a warning."""
    found = _findings(_log(tmp_path, not_ready=0, cancels=25))
    assert found == {"pgbouncer-dropped-cancels": "warning"}


def test_not_a_pgbouncer_log(tmp_path, capsys):
    """A file that is not a PgBouncer log, or no file at all: one line, exit 2."""
    other = tmp_path / "app.log"
    other.write_text("hello\nworld\n")
    for path in (str(other), str(tmp_path / "missing.log")):
        assert main(["doctor", "--pgbouncer-log", path]) == 2
        _, err = capsys.readouterr()
        assert err.count("\n") == 1
        assert "--pgbouncer-log" in err or "logfile" in err
