"""Durations and DSN redaction: the small pieces every verb relies on."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgsteady.errors import UsageError
from pgsteady.settings import parse_duration, pg_interval, redact, scrub, to_seconds


def test_durations_accept_seconds_timedelta_and_none():
    """Float seconds, timedelta and None (no limit) are all durations."""
    assert to_seconds(0.05) == 0.05
    assert to_seconds(timedelta(milliseconds=250)) == 0.25
    assert to_seconds(None) is None


@pytest.mark.parametrize("bad", [-1, float("nan"), timedelta(seconds=-2)])
def test_negative_or_nan_durations_are_refused(bad):
    """A negative or NaN duration is a usage error naming the argument."""
    with pytest.raises(UsageError, match="deadline"):
        to_seconds(bad, "deadline")


def test_pg_interval_rounds_to_milliseconds_and_never_to_zero():
    """0.0004 s must not become 0 (which PostgreSQL reads as 'no limit')."""
    assert pg_interval(None) == "0"
    assert pg_interval(0.0004) == "1ms"
    assert pg_interval(1.5) == "1500ms"


@pytest.mark.parametrize(
    ("dsn", "secret"),
    [
        ("host=db password=hunter2 user=app", "hunter2"),
        ("host=db password='hun ter2' user=app", "hun ter2"),
        ("postgresql://app:hunter2@db:5432/app", "hunter2"),
    ],
)
def test_redact_hides_passwords(dsn, secret):
    """Keyword and URL DSNs lose their password and keep the rest."""
    assert secret not in redact(dsn)
    assert "***" in redact(dsn)
    assert secret not in scrub(f"connection to {dsn} failed")


@given(st.text(min_size=1, max_size=30).filter(lambda s: s.strip() and "'" not in s
                                                and "\\" not in s))
def test_redact_never_leaks_any_password(password):
    """Whatever the password, it does not survive redaction of a quoted keyword DSN."""
    dsn = f"host=db user=app password='{password}'"
    assert f"'{password}'" not in redact(dsn)
    assert f"'{password}'" not in scrub(dsn)


def test_redact_leaves_passwordless_dsns_alone():
    """Nothing to hide: the DSN is returned unchanged."""
    assert redact("host=127.0.0.1 port=5432 dbname=app") == "host=127.0.0.1 port=5432 dbname=app"


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://app:first@db/app?password=second",
        "host=db user=app sslpassword=second password=first",
    ],
)
def test_redact_hides_every_kind_of_password(dsn):
    """URL user info, query-string passwords and sslpassword are all masked."""
    shown = redact(dsn)
    assert "first" not in shown and "second" not in shown
    assert "db" in shown


def test_zero_is_no_limit():
    """pg_interval(0) is PostgreSQL's 0 (no limit), not 1 ms."""
    assert pg_interval(0) == "0"
    assert pg_interval(timedelta(0).total_seconds()) == "0"


@pytest.mark.parametrize("sql", [
    "ALTER ROLE app PASSWORD 'hunter2'",
    "CREATE USER MAPPING FOR app SERVER s OPTIONS (user 'u', password 'hunter2')",
    "alter user app with password 'hun''ter2'",
])
def test_scrub_hides_passwords_in_sql(sql):
    """Another session's query text may set a password; it never reaches our output."""
    assert "hunter2" not in scrub(sql) and "ter2" not in scrub(sql)


@pytest.mark.parametrize(("text", "seconds"), [("50ms", 0.05), ("1.5s", 1.5), ("2m", 120.0),
                                               ("1h", 3600.0), ("7", 7.0), (" 3 min ", 180.0)])
def test_written_durations_are_parsed_in_one_place(text, seconds):
    """parse_duration reads the units every option and phase-map axis uses."""
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "complaint"), [("soon", "write it like 50ms"),
                                                 ("-1s", "negative"), ("9999h", "too long")])
def test_bad_written_durations_say_how_to_write_them(text, complaint):
    """A duration that cannot be read is a UsageError saying what is wrong."""
    with pytest.raises(UsageError, match=complaint):
        parse_duration(text)


def test_the_model_does_not_import_the_command_line():
    """pgsteady.sim (model, phase map, validate, report) loads without pgsteady.cli."""
    code = ("import sys, pgsteady.sim.phase_map, pgsteady.sim.validate, pgsteady.sim.report; "
            "print(sorted(m for m in sys.modules if m.startswith('pgsteady.cli')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "[]"
