"""What preflight can still learn about a statement whose locks its text does not show.

The lock oracle (:mod:`~pgsteady.sql.analysis`) gives ``DO``, ``CALL`` and a few others
no targets (:data:`~pgsteady.sql.analysis.OPAQUE_KINDS`); a preflight that took that as
"locks nothing" said ok in front of ``DO $$ BEGIN EXECUTE 'ALTER TABLE t ...'; END $$`` while
a session held ``t``. Here a PL/pgSQL ``DO`` block is read with PostgreSQL's own PL/pgSQL
parser (``pglast.parse_plpgsql``): its static SQL, and every ``EXECUTE`` whose string is
built from literals alone (``'...'``, ``||``, ``format()``, ``quote_ident()``), go through the
same oracle (:func:`read_plpgsql` reads a function's body the same way). What stays out of
sight (an ``EXECUTE`` of a string computed when it runs, a non-PL/pgSQL ``DO``, ``DROP
OWNED``, ``REINDEX SCHEMA``) comes back as a reason, so preflight says it cannot know instead
of saying ok. The functions a statement runs (a
``CALL``'s procedure too) are on each statement (:attr:`StatementInfo.calls`): only the
database can tell a built-in from a function whose body must be read
(:mod:`~pgsteady.sql.bodies`, :mod:`~pgsteady.migrate.bodies`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pglast
from pglast import ast
from pglast.parser import ParseError

from pgsteady.sql.analysis import SqlSyntaxError, StatementInfo, analyze
from pgsteady.sql.text import shorten

_SHOWN_CHARS = 60  # of an expression quoted in a reason
_DEPTH = 4  # a DO that EXECUTEs a DO ...: deeper than this is unknown

# Statement kinds that carry no relation in their text yet lock relations: why for each.
_WHY = {
    "EXECUTE": "EXECUTE runs a prepared statement preflight does not see",
    "DROP OWNED": "it drops whatever a role owns, which only the catalog lists",
    "REASSIGN OWNED": "it changes whatever a role owns, which only the catalog lists",
    "ALTER ... ALL IN TABLESPACE": "it moves every relation of a tablespace",
    "IMPORT FOREIGN SCHEMA": "the remote server decides which foreign tables it creates",
    "ALTER EXTENSION": "the extension's script decides what it locks",
    "REINDEX SCHEMA": "it rebuilds the indexes of every table in the schema",
    "REINDEX DATABASE": "it rebuilds the indexes of every table in the database",
    "REINDEX SYSTEM": "it rebuilds the indexes of every system catalog",
}
# Without a table name these work through every table they may: none named, none known.
_EVERY_TABLE = frozenset({"VACUUM", "VACUUM FULL", "ANALYZE", "CLUSTER"})
# PL/pgSQL statements whose query is a string computed when they run, and its field.
_DYNAMIC = {"PLpgSQL_stmt_dynexecute": "query", "PLpgSQL_stmt_dynfors": "query",
            "PLpgSQL_stmt_open": "dynquery", "PLpgSQL_stmt_return_query": "dynquery"}
_ASSIGNED = re.compile(r'\s*[\w."$\[\]]+?\s*:?=\s*')  # "v := " before an assignment's value
_FORMAT = re.compile(r"%(?:(\d+)\$)?([^%sIL]*)([%sIL])")


@dataclass(frozen=True)
class Reading:
    """What preflight knows of one statement: the statements whose locks the oracle tells
    (placed at the statement's file line, each with the functions it calls), and why anything
    else is unknown."""

    statements: list[StatementInfo] = field(default_factory=list)
    unknown: list[tuple[int, str]] = field(default_factory=list)  # (file line, why)


def needs_reading(statement: StatementInfo) -> bool:
    """Whether the oracle's targets alone would hide locks the statement takes (a ``CALL``
    does not: its procedure is among its calls, which are followed like any function's)."""
    return (statement.opaque and statement.kind != "CALL") or statement.kind in _WHY or \
        (statement.kind in _EVERY_TABLE and not statement.targets)


def read(statement: StatementInfo, depth: int = 0) -> Reading:
    """What ``statement`` locks, as far as its text (and a DO block's body) can tell."""
    if statement.kind == "DO":
        return _read_do(statement, depth)
    if statement.kind == "CALL":
        return Reading(statements=[statement])
    if statement.kind in _WHY:
        return Reading(unknown=[(statement.line, _WHY[statement.kind])])
    if statement.kind in _EVERY_TABLE and not statement.targets:
        return Reading(unknown=[(statement.line, f"{statement.kind} without a table works "
                                                 "through every table")])
    if statement.opaque:
        return Reading(unknown=[(statement.line, f"preflight cannot tell what "
                                                 f"{statement.kind} locks")])
    return Reading(statements=[statement])


def _read_do(statement: StatementInfo, depth: int) -> Reading:
    def unknown(why: str) -> Reading:
        return Reading(unknown=[(statement.line, why)])

    if depth > _DEPTH:
        return unknown("a DO block nested too deep to follow")
    try:
        [raw] = pglast.parse_sql(statement.sql)
    except (ParseError, ValueError):
        return unknown("its text does not parse on its own")
    do: Any = raw.stmt
    options = {str(d.defname): d.arg for d in do.args or ()
               if isinstance(d, ast.DefElem)}
    language = getattr(options.get("language"), "sval", "plpgsql")
    body = getattr(options.get("as"), "sval", None)
    if language != "plpgsql" or body is None:
        return unknown(f"a DO block in language {language}: preflight reads PL/pgSQL only")
    tag = "pgsteady"
    while f"${tag}$" in body:
        tag += "_"
    wrapped = f"CREATE FUNCTION pgsteady_do() RETURNS void LANGUAGE plpgsql " \
              f"AS ${tag}${body}${tag}$"
    try:
        tree = pglast.parse_plpgsql(wrapped)
    except (ParseError, ValueError) as exc:
        return unknown(f"its PL/pgSQL does not parse: {exc}")
    # PL/pgSQL numbers lines from the body's start; place them in the file.
    found = statement.sql.find(body)
    first = statement.line + (statement.sql.count("\n", 0, found) if found >= 0 else 0)
    return read_plpgsql(tree, lambda n: first + n - 1 if found >= 0 else statement.line,
                        depth, "in DO")


def read_plpgsql(tree: Any, place: Callable[[int], int], depth: int, where: str,
                 why: str = "") -> Reading:
    """What a parsed PL/pgSQL function (``pglast.parse_plpgsql``) locks: its static SQL and
    literal EXECUTE strings through the oracle, each placed at ``place(body line)`` with
    ``where`` after its kind (``in DO``); ``why`` starts each reason it gives."""
    reading = Reading()
    for lineno, expression, dynamic in _expressions(tree, 1):
        _read_expression(reading, expression, dynamic, place(lineno), depth, where=where,
                         why=why)
    return reading


def _expressions(node: Any, lineno: int, dynamic: str | None = None) \
        -> Iterator[tuple[int, dict[str, Any], bool]]:
    """(body line, PLpgSQL_expr, whether its value is a query string to run) for every
    expression of a parsed PL/pgSQL function, in order."""
    if isinstance(node, list):
        for item in node:
            yield from _expressions(item, lineno)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "PLpgSQL_expr" and isinstance(value, dict):
                yield lineno, value, False
                continue
            if isinstance(value, dict) and isinstance(value.get("lineno"), int):
                inner_line = value["lineno"] or lineno
            else:
                inner_line = lineno
            if key in _DYNAMIC and isinstance(value, dict):
                for field_name, part in value.items():
                    if field_name == _DYNAMIC[key] and isinstance(part, dict) and \
                            isinstance(part.get("PLpgSQL_expr"), dict):
                        yield inner_line, part["PLpgSQL_expr"], True
                    else:
                        yield from _expressions(part, inner_line)
            else:
                yield from _expressions(value, inner_line)


def _read_expression(reading: Reading, expression: dict[str, Any], dynamic: bool,
                     line: int, depth: int, *, where: str, why: str) -> None:
    text = str(expression.get("query", ""))
    mode = expression.get("parseMode", 0)
    if dynamic:
        literal = _literal(text)
        if literal is None:
            shown = shorten(text, _SHOWN_CHARS)
            reading.unknown.append((line, f"{why}EXECUTE of a string computed when it runs "
                                          f"({shown})"))
            return
        sql = literal
    elif mode == 0:
        sql = text  # a whole SQL statement
    else:  # an expression, or "target := expression"
        assigned = _ASSIGNED.match(text) if mode != 2 else None
        sql = "SELECT " + (text[assigned.end():] if assigned else text)
    try:
        statements = analyze(sql)
    except SqlSyntaxError:
        shown = shorten(sql, _SHOWN_CHARS)
        reading.unknown.append((line, f"{why}preflight could not parse {shown}"))
        return
    for inner in statements:
        if needs_reading(inner):
            nested = read(replace(inner, line=line), depth + 1)  # a DO the block EXECUTEs
            reading.statements.extend(nested.statements)
            reading.unknown.extend((at, why + reason) for at, reason in nested.unknown)
        else:
            reading.statements.append(replace(inner, line=line, kind=f"{inner.kind} {where}",
                                              node=None))


def _literal(text: str) -> str | None:
    """The string an EXECUTE expression always yields, if it is made of literals alone."""
    try:
        [raw] = pglast.parse_sql("SELECT " + text)
    except (ParseError, ValueError):
        return None
    targets: Any = getattr(raw.stmt, "targetList", None) or ()
    if len(targets) != 1:
        return None
    return _value(targets[0].val)


def _value(node: Any) -> str | None:
    """The text a literal expression evaluates to; None when it depends on anything else."""
    if isinstance(node, ast.A_Const):
        value = node.val
        if node.isnull or value is None:
            return None
        return str(value.sval) if isinstance(value, ast.String) else \
            str(getattr(value, "ival", getattr(value, "fval", "")))
    if isinstance(node, ast.TypeCast):
        return _value(node.arg)
    expr: Any = node
    if isinstance(node, ast.A_Expr) and node.kind == pglast.enums.A_Expr_Kind.AEXPR_OP and \
            [n.sval for n in expr.name] == ["||"]:
        left, right = _value(node.lexpr), _value(node.rexpr)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.FuncCall):
        name = [n.sval for n in expr.funcname]
        if name[:-1] not in ([], ["pg_catalog"]):
            return None
        args = [_value(a) for a in expr.args or ()]
        if any(a is None for a in args) or node.agg_star or node.func_variadic:
            return None
        values = [a for a in args if a is not None]
        if name[-1] == "format" and values:
            return _format(values[0], values[1:])
        if name[-1] == "quote_ident" and len(values) == 1:
            return _ident(values[0])
        if name[-1] == "quote_literal" and len(values) == 1:
            return _quote(values[0])
        if name[-1] == "concat":
            return "".join(values)
    return None


def _format(pattern: str, args: list[str]) -> str | None:
    """PostgreSQL's ``format()`` for %s, %I, %L, %% and ``n$`` (no widths)."""
    out, at, following = [], 0, 0
    for match in _FORMAT.finditer(pattern):
        out.append(pattern[at:match.start()])
        at = match.end()
        position, flags, kind = match.groups()
        if kind == "%" and not position and not flags:
            out.append("%")
            continue
        if flags:
            return None
        index = int(position) - 1 if position else following
        following = index + 1
        if index >= len(args):
            return None
        value = args[index]
        out.append(value if kind == "s" else _ident(value) if kind == "I" else _quote(value))
    out.append(pattern[at:])
    return "".join(out)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'  # quoted always: the same name for the parser


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
