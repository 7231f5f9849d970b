"""Parsing PgBouncer's log lines into the events the pool-drain lab counts."""

from __future__ import annotations

from pgsteady.inspect.pgbouncer import LogReader, parse_lines

LINES = """\
2026-11-30 20:23:08.307 UTC [2788] LOG S-0x1: postgres/postgres@127.0.0.1:44315 new connection to server (from 127.0.0.1:60638)
2026-11-30 20:23:08.515 UTC [2788] LOG C-0x2: (nodb)/(nouser)@127.0.0.1:53838 closing because: cancel request for idle client (age=0s)
2026-11-30 20:23:09.100 UTC [2788] LOG S-0x3: postgres/postgres@127.0.0.1:44315 new connection to server (from 127.0.0.1:60640)
2026-11-30 20:23:09.101 UTC [2788] LOG S-0x3: postgres/postgres@127.0.0.1:44315 closing because: successfully sent cancel request (age=0s)
2026-11-30 20:23:09.815 UTC [2788] LOG S-0x1: postgres/postgres@127.0.0.1:44315 closing because: client disconnect while server was not ready (age=1s)
garbage line
""".splitlines()


def test_events_are_classified():
    """New server connections, dropped cancels and not-ready closures are recognised;
    a server connection that only forwarded a cancel is not counted as a refill."""
    kinds = [e.kind for e in parse_lines(LINES)]
    assert kinds == ["server_opened", "cancel_idle", "cancel_forwarded", "not_ready"]


def test_reader_counts_per_second_and_resumes(tmp_path):
    """The reader buckets events by second since a start time and only returns new lines."""
    log = tmp_path / "pgbouncer.log"
    log.write_text("\n".join(LINES[:2]) + "\n")
    reader = LogReader(log, from_start=True)
    first = reader.counts(start_epoch=parse_lines(LINES[:1])[0].epoch)
    assert first.total == {"server_opened": 1, "cancel_idle": 1}
    assert first.per_second[0] == {"server_opened": 1, "cancel_idle": 1}
    with open(log, "a") as f:
        f.write("\n".join(LINES[2:]) + "\n" + LINES[0][:20])  # a half-written last line
    second = reader.counts()
    assert second.total == {"cancel_forwarded": 1, "not_ready": 1}
