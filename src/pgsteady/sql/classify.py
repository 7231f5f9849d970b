"""Which statements can wait for their analysis: a cheap look at PostgreSQL's own parse.

Loading a folder must check every statement before anything runs (it parses, it is not
transaction control, it may run in a transaction), but what each one locks is only needed
when someone may be in the way (preflight finds a session holding locks), for ``--plan``, or
to word an error. PostgreSQL's parser (libpg_query, in C) gives its tree as JSON in a few
microseconds; building pglast's Python tree and analysing it costs ~40 µs a statement. So a
statement whose top node is of a kind that always runs in a transaction (and is not
``CONCURRENTLY``) is kept as text and place only; :mod:`~pgsteady.sql.analysis` reads it
when asked. Anything else, or text that does not parse, goes the full way at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pgsteady.sql import pglast_loader
from pgsteady.sql.text import skip_blanks

# pglast's C parser alone: its AST classes and enums load only if the analysis needs them.
_parser = pglast_loader.parser()
ParseError = _parser.ParseError
parse_sql_json = _parser.parse_sql_json
fingerprint = _parser.fingerprint

# Top nodes that always run inside a transaction block and never control it.
PLAIN = frozenset({
    "AlterDomainStmt", "AlterObjectSchemaStmt", "AlterSeqStmt", "AlterTableStmt",
    "CommentStmt", "CompositeTypeStmt", "CreateDomainStmt", "CreateEnumStmt",
    "CreateFunctionStmt", "CreatePolicyStmt", "CreateSchemaStmt", "CreateSeqStmt",
    "CreateStatsStmt", "CreateStmt", "CreateTableAsStmt", "CreateTrigStmt", "DeleteStmt",
    "DropStmt", "GrantStmt", "IndexStmt", "InsertStmt", "RenameStmt", "RuleStmt",
    "SelectStmt", "TruncateStmt", "UpdateStmt", "ViewStmt",
})
_CONCURRENT = '"concurrent":true'  # IndexStmt, DropStmt, a DETACH PARTITION's PartitionCmd


@dataclass(frozen=True)
class Plain:
    """A statement of a :data:`PLAIN` kind: its text (as the analysis cuts it) and where it
    starts in the text given (1-based line and column)."""

    sql: str
    line: int
    col: int


def plain_statements(text: str) -> list[Plain] | None:
    """The statements of ``text`` if every one is plain ([] when it holds none); None when
    one needs analysing now (or the text does not parse: the analysis reports where)."""
    try:
        encoded = parse_sql_json(text)
    except ParseError:
        return None
    if _CONCURRENT in encoded:
        return None
    tree = json.loads(encoded)
    raw = text.encode() if not text.isascii() else None  # offsets are in UTF-8 bytes
    out = []
    for item in tree.get("stmts", ()):
        node = item.get("stmt") or {}
        if len(node) != 1 or next(iter(node)) not in PLAIN:
            return None
        start = item.get("stmt_location", 0)
        length = item.get("stmt_len", 0)
        if raw is not None:
            end = start + length if length else len(raw)
            before, piece = raw[:start].decode(), raw[start:end].decode()
        else:
            end = start + length if length else len(text)
            before, piece = text[:start], text[start:end]
        lead = skip_blanks(piece)
        before, piece = before + piece[:lead], piece[lead:]
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
        out.append(Plain(piece.strip().rstrip(";").rstrip(), line, col))
    return out  # [] for blanks and comments alone
