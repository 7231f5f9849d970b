"""``[tool.pgsteady.lint]`` in pyproject.toml, merged with the command line's overrides.

Every key is optional::

    [tool.pgsteady.lint]
    paths = ["migrations"]            # what `pgsteady lint` checks when given no files
    pg_version = 15                   # the oldest server the migrations must run on
    disable = ["prefer-text-over-char"]
    enable = []                       # rules that are off by default
    warn = ["prefer-jsonb"]           # reported, but do not fail (exit 0)
    assume_runner_timeouts = true     # files run by `pgsteady migrate`, which sets timeouts
    assume_in_transaction = true      # the runner wraps each file in one transaction, as
                                      # pgsteady migrate does unless the file's header says
                                      # -- pgsteady: no-transaction (psql, Flyway: false)
    large_table = 1000000             # rows; with --dsn, bigger tables turn warnings to errors
    tool = "auto"                     # how files are run: pgsteady, prisma, goose, golang-migrate,
                                      # dbmate, flyway, diesel, sql-migrate, tern, sqitch,
                                      # alembic-sql, plain, or auto
                                      # (detected from the folder's layout); ``runner``, its
                                      # old name, is still read

The defaults describe files run by ``pgsteady migrate``. An unknown key or rule id is a usage
error (exit 2): a typo must not silently turn a rule off.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from pgsteady import _majors
from pgsteady._errors_root import UsageError
from pgsteady._record import Record
from pgsteady.lint.base import DEFAULT_PG_VERSION

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any, Final

#: Rows from which, with a database to ask, a table counts as large.
DEFAULT_LARGE_TABLE = 1_000_000
_ROWS = r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*$"  # compiled on first use (re's cache)
_ROW_UNITS = {"": 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000}


class LintConfig(Record):
    """Which rules run and what they may assume about the migrations' runner and server.

    ``assume_*`` None: as the runner profile says (pgsteady migrate: both true).
    """

    __slots__ = ("assume_in_transaction", "assume_runner_timeouts", "disable", "enable",
                 "large_table", "paths", "pg_version", "runner", "source", "warn")
    _UNCOMPARED = ("source",)

    def __init__(self, paths: tuple[str, ...] = (), pg_version: int = DEFAULT_PG_VERSION, *,
                 disable: frozenset[str] = frozenset(), enable: frozenset[str] = frozenset(),
                 warn: frozenset[str] = frozenset(),
                 assume_runner_timeouts: bool | None = None,
                 assume_in_transaction: bool | None = None,
                 large_table: int = DEFAULT_LARGE_TABLE, runner: str = "auto",
                 source: str | None = None) -> None:
        self.paths: Final = paths
        self.pg_version: Final = pg_version
        self.disable: Final = disable
        self.enable: Final = enable
        self.warn: Final = warn
        self.assume_runner_timeouts: Final = assume_runner_timeouts
        self.assume_in_transaction: Final = assume_in_transaction
        self.large_table: Final = large_table
        self.runner: Final = runner
        self.source: Final = source

    def with_overrides(self, **changes: Any) -> LintConfig:
        """A copy with the command line's non-None values applied."""
        return self.replace(**{k: v for k, v in changes.items() if v is not None})


def parse_rows(text: str | int) -> int:
    """``"1M"`` -> 1_000_000; plain numbers are rows. Raises ValueError on anything else."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"{text!r} is negative")
        return text
    m = re.match(_ROWS, str(text))
    if not m:
        raise ValueError(f"{text!r} is not a row count; write it like 500000, 250k or 1M")
    return int(float(m[1]) * _ROW_UNITS[m[2].lower()])


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start``."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(path: Path | None = None, start: Path | None = None) -> LintConfig:
    """Read ``[tool.pgsteady.lint]`` from ``path`` (or the nearest pyproject.toml)."""
    found = path is None
    if path is None:
        path = find_pyproject(start or Path.cwd())
        if path is None:
            return LintConfig()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read config {path}: {exc.strerror or exc}") from None
    if found and b"pgsteady" not in data:
        # A project's pyproject.toml with no section of ours: not parsed (tomllib is ~3 ms
        # of start-up, a tenth of a one-file lint), nor judged.
        return LintConfig()
    import tomllib  # noqa: PLC0415 -- only when there is a section to read

    try:
        document = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: not UTF-8 ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    section = document.get("tool", {}).get("pgsteady", {}).get("lint", {})
    if not isinstance(section, Mapping):
        raise UsageError(f"{path}: [tool.pgsteady.lint] must be a table")
    return from_mapping(section, source=str(path))


def from_mapping(section: Mapping[str, Any], source: str = "config") -> LintConfig:
    """Build a config from a TOML table, refusing unknown keys and wrong types."""
    known = {"paths", "pg_version", "disable", "enable", "warn", "assume_runner_timeouts",
             "assume_in_transaction", "large_table", "tool"}
    unknown = sorted(set(section) - known - {"runner"})
    if unknown:
        raise UsageError(f"{source}: unknown key(s) in [tool.pgsteady.lint]: "
                         f"{', '.join(unknown)} (known: {', '.join(sorted(known))})")
    values: dict[str, Any] = {"source": source}
    for key in ("paths", "disable", "enable", "warn"):
        if key in section:
            items = section[key]
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise UsageError(f"{source}: {key} must be a list of strings")
            values[key] = tuple(items) if key == "paths" else frozenset(items)
    for key in ("assume_runner_timeouts", "assume_in_transaction"):
        if key in section:
            if not isinstance(section[key], bool):
                raise UsageError(f"{source}: {key} must be true or false")
            values[key] = section[key]
    if "pg_version" in section:
        values["pg_version"] = parse_pg_version(section["pg_version"], source)
    if "tool" in section and "runner" in section:
        raise UsageError(f"{source}: tool and runner (its old name) are both set; keep tool")
    for key in ("tool", "runner"):  # the profile is kept as ``runner``
        if key in section:
            if not isinstance(section[key], str):
                raise UsageError(f"{source}: {key} must be a string such as \"prisma\"")
            values["runner"] = section[key]
    if "large_table" in section:
        try:
            values["large_table"] = parse_rows(section["large_table"])
        except ValueError as exc:
            raise UsageError(f"{source}: large_table: {exc}") from None
    return LintConfig(**values)


def parse_pg_version(value: object, source: str = "pg_version") -> int:
    """``15``, ``"15"`` or ``"15.4"`` -> 15; versions before 9.6 are refused."""
    text = str(value).strip()
    m = re.match(r"^(\d+)(?:\.\d+)?$", text)
    major = None if not m or isinstance(value, bool) else int(m[1])
    # 9.6 is the one two-part major lint still knows; 9.5 and older are not majors it takes.
    if major is None or not _majors.parsable(major) or (major == 9 and text != "9.6"):
        raise UsageError(f"{source}: {value!r} is not a PostgreSQL major version (e.g. 15)")
    return major


def check_rule_ids(ids: Iterable[str], known: Iterable[str], where: str) -> None:
    """Refuse rule ids that do not exist, naming the closest real one."""
    known_set = set(known)
    for rule_id in ids:
        if rule_id not in known_set:
            import difflib  # noqa: PLC0415 -- only to phrase this error

            close = difflib.get_close_matches(rule_id, sorted(known_set), n=1)
            hint = f"; did you mean {close[0]}?" if close else "; see pgsteady lint --list-rules"
            raise UsageError(f"{where}: no rule named {rule_id!r}{hint}")
