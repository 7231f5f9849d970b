"""With a database to ask (``--dsn``): the live schema, and how big the tables behind findings are.

Before linting, :func:`load_catalog` reads every user table's columns and types, the views
and the enums into the schema model, so the catalog wins over what the replay could know
(the old type of a column in a table no file created). After linting:

Rules whose cost grows with the table (index builds, rewrites, validations, backfills) name
that table in their findings. Here each one gets the planner's row estimate
(``pg_class.reltuples``, as of the last ANALYZE) and ``pg_total_relation_size``; at or above
``large_table`` rows the finding is an error, below it a warning. A table the database does
not know (or never analyzed) keeps the finding as it was: no guess makes it milder. The lock
level a statement takes comes from :mod:`pgsteady.sql.analysis`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import psycopg

from pgsteady.lint.report import FileReport, Finding, LintReport
from pgsteady.lint.schema import ColumnType, Key, Schema
from pgsteady.settings import connect_timeout_kwargs, refuse_admin_console
from pgsteady.sql import analysis

log = logging.getLogger("pgsteady.lint")

# An index resolves to its table; relkind 'i'/'I' rows carry the table's estimate.
TABLE_SIZE = """
select t.oid::regclass::text, t.reltuples::float8, pg_total_relation_size(t.oid)
from pg_class c
left join pg_index i on i.indexrelid = c.oid
join pg_class t on t.oid = coalesce(i.indrelid, c.oid)
where c.oid = to_regclass(
    case when %(schema)s::text is null then quote_ident(%(name)s::text)
         else quote_ident(%(schema)s::text) || '.' || quote_ident(%(name)s::text) end)
"""


# Columns of user tables: type names as pg_type has them (int4, varchar), modifiers raw.
CATALOG_COLUMNS = """
select n.nspname, c.relname, a.attname, t.typname, a.atttypmod, t.typelem <> 0 and t.typlen = -1
from pg_attribute a
join pg_class c on c.oid = a.attrelid
join pg_namespace n on n.oid = c.relnamespace
join pg_type t on t.oid = a.atttypid
where c.relkind in ('r', 'p') and a.attnum > 0 and not a.attisdropped
  and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname !~ '^pg_toast'
order by 1, 2, a.attnum
limit 500000
"""
CATALOG_VIEWS = """
select n.nspname, c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
where c.relkind in ('v', 'm') and n.nspname not in ('pg_catalog', 'information_schema')
limit 100000
"""
CATALOG_ENUMS = """
select n.nspname, t.typname, e.enumlabel
from pg_enum e join pg_type t on t.oid = e.enumtypid join pg_namespace n on n.oid = t.typnamespace
order by 1, 2, e.enumsortorder
limit 100000
"""


def _catalog_type(name: str, typmod: int, array: bool) -> ColumnType:
    """pg_type's name and atttypmod as the replay writes types (``varchar`` ``(36,)``)."""
    name = name.removeprefix("_") if array else name
    mods: tuple[int, ...] = ()
    if typmod >= 0:
        if name in ("varchar", "bpchar"):
            mods = (typmod - 4,)
        elif name == "numeric":
            mods = ((typmod - 4) >> 16, (typmod - 4) & 0xFFFF)
        else:
            mods = (typmod,)
    return ColumnType(name, mods, array)


def load_catalog(dsn: str) -> Schema:
    """The live database's tables, columns, views and enums as a schema to lint against."""
    schema = Schema(file_serial=-1, from_catalog=True)
    with psycopg.connect(dsn, autocommit=True, **connect_timeout_kwargs(dsn, 10)) as conn:
        refuse_admin_console(conn)
        conn.execute("set statement_timeout = '10s'")
        conn.execute("set default_transaction_read_only = on")  # catalog reads only
        tables: dict[Key, dict[str, ColumnType | None]] = {}
        for nsp, rel, column, typname, typmod, array in conn.execute(CATALOG_COLUMNS):
            tables.setdefault((str(nsp), str(rel)), {})[str(column)] = _catalog_type(
                str(typname), int(str(typmod)), bool(array))
        for key, columns in tables.items():
            schema.add_table(key, columns)
        for nsp, rel in conn.execute(CATALOG_VIEWS):
            schema.views[(str(nsp), str(rel))] = -1
        for nsp, typname, label in conn.execute(CATALOG_ENUMS):
            schema.enums.setdefault((str(nsp), str(typname)), []).append(str(label))
    return schema


@dataclass(frozen=True)
class TableSize:
    """What the catalog says about one table; ``rows`` is None if it was never analyzed."""

    name: str
    rows: int | None
    size_bytes: int


def table_size(conn: psycopg.Connection[tuple[object, ...]], schema: str | None,
               name: str) -> TableSize | None:
    """The table (or an index's table) named as written; None if the database lacks it."""
    row = conn.execute(TABLE_SIZE, {"schema": schema, "name": name}).fetchone()
    if row is None:
        return None
    rows = float(str(row[1]))
    return TableSize(str(row[0]), None if rows < 0 else round(rows), int(str(row[2])))


def human_bytes(size: int) -> str:
    """``1536`` -> ``"1.5 kB"``, as pg_size_pretty would round it."""
    value = float(size)
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"  # pragma: no cover


def annotate(report: LintReport, dsn: str, large_table: int) -> LintReport:
    """Add sizes and lock levels to size-aware findings; grade them against ``large_table``."""
    if not any(f.table for f in report.findings):
        return report
    with psycopg.connect(dsn, autocommit=True, **connect_timeout_kwargs(dsn, 10)) as conn:
        refuse_admin_console(conn)
        conn.execute("set statement_timeout = '10s'")
        conn.execute("set default_transaction_read_only = on")  # catalog reads only
        cache: dict[str, TableSize | None] = {}
        files = [_annotate_file(conn, cache, file, large_table) for file in report.files]
    return LintReport(files)


def _annotate_file(conn: psycopg.Connection[tuple[object, ...]],
                   cache: dict[str, TableSize | None], file: FileReport,
                   large_table: int) -> FileReport:
    if not any(f.table for f in file.findings):
        return file
    locks = _statement_locks(file.path)
    out = []
    for finding in file.findings:
        if finding.table is None:
            out.append(finding)
            continue
        if finding.table not in cache:
            schema, _, name = finding.table.rpartition(".")
            cache[finding.table] = table_size(conn, schema or None, name)
        out.append(_graded(finding, cache[finding.table], large_table,
                           locks.get((finding.statement_line, finding.statement_col))))
    return file.replace(findings=out)


def _graded(finding: Finding, size: TableSize | None, large_table: int,
            lock: str | None) -> Finding:
    held = f"takes {lock} on " if lock else "on "
    if size is None:
        return finding.replace(
            lock=lock, message=f"{finding.message}; {held}{finding.table}: not in the database")
    if size.rows is None:
        return finding.replace(lock=lock, size_bytes=size.size_bytes,
                               message=f"{finding.message}; {held}{size.name}: never analyzed, "
                                       f"{human_bytes(size.size_bytes)}")
    large = size.rows >= large_table
    verdict = "large table" if large else f"below --large-table {large_table:,}"
    return finding.replace(
        lock=lock, rows=size.rows, size_bytes=size.size_bytes,
        severity="error" if large else "warning",
        message=(f"{finding.message}; {held}{size.name}: ~{size.rows:,} rows, "
                 f"{human_bytes(size.size_bytes)} ({verdict})"))


def _statement_locks(path: str) -> dict[tuple[int, int], str]:
    """(line, col) of each statement -> the strongest lock it takes, per the shared analysis."""
    try:
        infos = analysis.analyze(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError, AttributeError, TypeError, KeyError) as exc:
        # Lock levels are a courtesy in the message; never let them cost the report.
        log.debug("no lock levels for %s: %s", path, exc)
        return {}
    return {(info.line, info.col): str(info.strongest_lock)
            for info in infos if info.strongest_lock is not None}
