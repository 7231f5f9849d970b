"""A migration goes in one round trip, yet a failure still names its statement and position."""

from __future__ import annotations

import pytest
from migrate_helpers import FAST, history, write_migrations

from pgsteady.errors import MigrationError
from pgsteady.migrate import apply, source


def test_failed_statement_is_named_with_its_position(db, orgs_dir):
    """The third statement fails: its file:line is named, nothing of the migration stays, and
    the error position maps back inside that statement."""
    write_migrations(orgs_dir, {"0002_three.sql": "ALTER TABLE orgs ADD COLUMN a int; -- one\n"
                                                  "ALTER TABLE orgs ADD COLUMN b int;\n"
                                                  "SELECT no_such_column FROM orgs;\n"})
    migrations = source.load_dir(orgs_dir)
    with pytest.raises(MigrationError, match=r"0002_three.sql:3:8: SELECT failed: 42703") \
            as caught:
        apply.migrate(db, migrations, FAST)
    failed = caught.value.__cause__
    assert failed is not None
    position = int(failed.diag.statement_position)
    statement = migrations[1].statements[2]
    # the position counts from the start of the message; minus the offset, it is in the SELECT
    sent = caught.value.__context__
    assert sent is not None and hasattr(sent, "sent_offset")
    inner = position - sent.sent_offset
    assert statement.sql[inner - 1:].startswith("no_such_column")
    assert history(db) == [1]
