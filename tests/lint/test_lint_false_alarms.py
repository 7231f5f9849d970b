"""False alarms found on real migration folders (issue 27 item 8), checked against the server
where the rule's reason is the server's behaviour."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from _cases import CASES, lint_case
from psycopg.pq import TransactionStatus

ONE_QUERY = sorted((CASES / "transaction-nesting").glob("one_query_*.sql"))


@pytest.mark.parametrize("case", ONE_QUERY, ids=[p.stem for p in ONE_QUERY])
def test_one_query_files_are_judged_as_the_server_runs_them(pgsteady_database, case: Path):
    """Sent as one query (Prisma, golang-migrate), a file is reported exactly when the server warns or is left in a transaction."""
    sql = case.read_text(encoding="utf-8")
    warnings: list[str] = []
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id bigint PRIMARY KEY); "
                     "CREATE TYPE \"Role\" AS ENUM ('USER', 'ADMIN', 'GUEST')")
        conn.add_notice_handler(lambda d: warnings.append(d.message_primary or "")
                                if d.severity_nonlocalized == "WARNING" else None)
        conn.execute(sql)  # no parameters: the simple protocol, one multi-statement query
        left_open = conn.info.transaction_status != TransactionStatus.IDLE
        if left_open:
            conn.execute("ROLLBACK")
    reported = [f for f in lint_case(sql, str(case)).findings if f.rule == "transaction-nesting"]
    assert bool(reported) == bool(warnings or left_open), (warnings, left_open, reported)
    assert case.stem.endswith("_bad") == bool(reported)
