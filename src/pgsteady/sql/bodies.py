"""What a function or procedure locks when it runs, read from its definition.

``SELECT backfill()`` locks what backfill's body locks, and a trigger's function runs inside
the INSERT that fires it: a preflight reading only the statement's text said ok while the
body ALTERed a table a session was reading. PostgreSQL keeps SQL and PL/pgSQL bodies as text
(``pg_get_functiondef`` gives the whole ``CREATE FUNCTION`` back) and a function created
earlier in the pending migrations is in their text: both are read here, the same way, through
the lock oracle (PL/pgSQL with :mod:`~pgsteady.sql.opaque`'s reader). Each statement found is
placed at the line of the statement that runs the function; the functions *it* calls are on
it (:attr:`~pgsteady.sql.statement.StatementInfo.calls`) for the caller to follow. Which
function a name means, and which triggers fire, only the catalog says
(:mod:`pgsteady.migrate.bodies`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pglast
from pglast import ast
from pglast.parser import ParseError

from pgsteady.sql.analysis import SqlSyntaxError, StatementInfo, analyze
from pgsteady.sql.opaque import Reading, needs_reading, read, read_plpgsql

#: Languages whose bodies are read; a C or internal function's code is out of sight.
READABLE = frozenset({"sql", "plpgsql"})


@dataclass(frozen=True)
class Definition:
    """A function or procedure as ``CREATE FUNCTION`` text says it."""

    name: str  # as written: ``schema.name`` or ``name``
    language: str
    sql: str  # the whole CREATE FUNCTION / PROCEDURE statement
    node: Any = None
    key: str = ""  # which definition this is, for a caller that reads each once


def definition(sql: str) -> Definition | None:
    """The function ``sql`` (one ``CREATE FUNCTION`` / ``PROCEDURE`` statement) creates."""
    try:
        [raw] = pglast.parse_sql(sql)
    except (ParseError, ValueError):
        return None
    node: Any = raw.stmt
    if not isinstance(node, ast.CreateFunctionStmt):
        return None
    options = {str(d.defname): d.arg for d in node.options or () if isinstance(d, ast.DefElem)}
    language = str(getattr(options.get("language"), "sval", "sql")).lower()
    name = ".".join(part.sval for part in node.funcname or ())
    return Definition(name, language, sql, node)


def read_definition(function: Definition, line: int, depth: int) -> Reading:
    """What running ``function`` locks, its statements placed at ``line`` (the statement that
    runs it) with kinds like ``UPDATE in backfill()``."""
    where = f"in {function.name}()"
    why = f"{function.name}() "
    if function.language not in READABLE:
        return Reading(unknown=[(line, f"{why}is in language {function.language}: preflight "
                                       f"reads SQL and PL/pgSQL bodies only")])
    if function.language == "plpgsql":
        try:
            tree = pglast.parse_plpgsql(function.sql)
        except (ParseError, ValueError) as exc:
            return Reading(unknown=[(line, f"{why}does not parse as PL/pgSQL: {exc}")])
        return read_plpgsql(tree, lambda _: line, depth, where, why)
    return _read_sql(function, line, depth, where, why)


def _read_sql(function: Definition, line: int, depth: int, where: str, why: str) -> Reading:
    node = function.node
    texts: list[str] = []
    if node.sql_body is not None:  # BEGIN ATOMIC ... END, or RETURN expression
        from pglast.stream import RawStream  # noqa: PLC0415 - only for these bodies

        body: Any = node.sql_body
        if isinstance(body, ast.ReturnStmt):
            returned: Any = body.returnval
            texts = ["SELECT " + RawStream()(returned)]
        else:
            texts = [RawStream()(s) for part in body for s in (part or ())]
    else:
        options = {str(d.defname): d.arg for d in node.options or ()
                   if isinstance(d, ast.DefElem)}
        source = options.get("as")
        texts = [source[0].sval] if isinstance(source, tuple) and source else []
    reading = Reading()
    for text in texts:
        try:
            statements = analyze(text)
        except SqlSyntaxError as exc:
            reading.unknown.append((line, f"{why}does not parse: {exc}"))
            continue
        for inner in statements:
            if needs_reading(inner):
                nested = read(replace(inner, line=line), depth + 1)
                reading.statements.extend(_placed(s, line, where) for s in nested.statements)
                reading.unknown.extend((line, why + reason) for _, reason in nested.unknown)
            else:
                reading.statements.append(_placed(inner, line, where))
    return reading


def _placed(statement: StatementInfo, line: int, where: str) -> StatementInfo:
    return replace(statement, line=line, kind=f"{statement.kind} {where}", node=None)
