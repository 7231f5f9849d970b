"""The warm path of ``pgsteady lint``: a whole run's output, read back before anything loads.

A ``pgsteady lint ...`` process that used the cache records what it printed, its exit code
and what the run depended on: the linter's code and pglast's, the configuration file, and
every file and folder it read (path, size and modification time, as make and ruff judge
them). The next process with the same arguments, working directory and terminal checks those
stamps and, if none changed, prints the recorded output: before argparse, the configuration,
the rules or the parser are imported, so interpreter start-up is most of such a run.
Anything changed falls through to the normal command line, which has the content-hash cache
(:mod:`cache`) behind it.

Only runs the command line parsed and finished without a usage or syntax error are recorded
(``--no-cache`` and ``--dsn`` runs never are), so equal arguments mean an equal parse.

An entry is plain text, a row of netstrings (``5:hello,``): the folder sits in the project
being linted, where anyone who can open a pull request can put a file, so reading one must
never run code (a pickle would) nor trust a format not meant for untrusted bytes (marshal).
Netstrings need no import: only os, sys and zlib are loaded here (``json`` would bring ``re``
and double a warm run). A damaged or foreign entry is a miss, never an error, and is replaced.
"""

from __future__ import annotations

import os
import sys
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

FOLDER = ".pgsteady_cache"
MAX_ENTRIES = 64
_FORMAT = "pgsteady-lint-quick-3"
_CODE = os.path.dirname(os.path.abspath(__file__))

#: The arguments of this process's ``pgsteady lint`` run, when its output may be recorded
#: (set by the command's entry point, :func:`arm`); empty in library use and tests' main().
_ARMED: list[list[str]] = []


def file_stamps(paths: Sequence[str]) -> str | None:
    """Path, size and modification time of everything under ``paths``: folders walked whole
    (a new file, or a tool's marker file, changes it); a file given alone brings its folder's
    and the one above's times, which change when an entry is added or removed (the runner is
    detected from them). None if a path is missing."""
    parts: list[str] = []
    for name in paths:
        try:
            top = os.stat(name)
        except OSError:
            return None
        parts.append(f"{name}\0{top.st_mtime_ns}\0")
        if os.path.isdir(name):
            for root, folders, files in os.walk(name):  # links not followed, as by rglob
                folders.sort()
                for file in sorted(files):
                    info = os.stat(os.path.join(root, file))
                    parts.append(f"{root}/{file}:{info.st_size}:{info.st_mtime_ns};")
        else:
            parts.append(f"{top.st_size}")
            parent = os.path.dirname(os.path.abspath(name))
            for folder in (parent, os.path.dirname(parent)):
                parts.append(f"{os.stat(folder).st_mtime_ns};")
    return "".join(parts)


def code_stamp() -> str:
    """The linter's own code (size and mtime of each module): an edit is a miss. Besides
    lint's folders, the tools' conventions, the SQL helpers, the package's top level
    (records) and the command line's (what a run prints)."""
    parts: list[str] = []
    package = os.path.dirname(_CODE)
    for folder in (_CODE, os.path.join(_CODE, "rules"), os.path.join(package, "tools"),
                   os.path.join(package, "sql"), package, os.path.join(package, "cli")):
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if entry.name.endswith(".py"):
                stat = entry.stat()
                parts.append(f"{entry.name}:{stat.st_size}:{stat.st_mtime_ns};")
    return "".join(parts)


def _nearest_pyproject(start: str) -> str | None:
    """The pyproject.toml :func:`config.find_pyproject` would choose (same rule, no pathlib)."""
    folder = start
    while True:
        candidate = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _file_stamp(path: str | None) -> str:
    if path is None:
        return "-"
    try:
        info = os.stat(path)
    except OSError:
        return f"{path}:missing"
    return f"{path}:{info.st_size}:{info.st_mtime_ns}"


def _dependencies(paths: Sequence[str], config_source: str | None, parser: str | None,
                  ) -> str | None:
    """Everything a run's output depends on besides its arguments, as one string: the
    files, the configuration, the linter's code and pglast's (``parser``: its package's
    ``__init__``, rewritten when another version is installed)."""
    files = file_stamps(paths)
    if files is None:
        return None
    config = _file_stamp(config_source)
    nearest = _file_stamp(_nearest_pyproject(os.getcwd()))
    return f"{code_stamp()}\0{_file_stamp(parser)}\0{config}\0{nearest}\0{files}"


def _pglast_file() -> str | None:
    """Where pglast is installed (found, not imported)."""
    loaded = sys.modules.get("pglast")
    if loaded is not None and getattr(loaded, "__file__", None):
        return str(loaded.__file__)
    import importlib.machinery  # noqa: PLC0415 -- only when recording

    spec = importlib.machinery.PathFinder.find_spec("pglast")
    return spec.origin if spec is not None else None


def _option(argv: Sequence[str], name: str) -> str | None:
    """The value of ``--name VALUE`` or ``--name=VALUE`` (the last one, as argparse keeps)."""
    found = None
    for index, arg in enumerate(argv):
        if arg == name and index + 1 < len(argv):
            found = argv[index + 1]
        elif arg.startswith(name + "="):
            found = arg[len(name) + 1:]
    return found


def folder_for(argv: Sequence[str]) -> str:
    """Where entries for these arguments live: ``--cache-dir``, else ``.pgsteady_cache/lint``
    next to ``--config`` or the nearest pyproject.toml, else in the current folder (where the
    content cache keeps its entries too)."""
    chosen = _option(argv, "--cache-dir")
    if chosen is not None:
        return chosen
    config = _option(argv, "--config") or _nearest_pyproject(os.getcwd())
    root = os.path.dirname(config) if config else os.getcwd()
    return os.path.join(root, FOLDER, "lint")


def _key(argv: Sequence[str]) -> tuple[str, tuple[str, ...], str, bool]:
    """What besides the files decides the output: arguments, directory, colour."""
    isatty = getattr(sys.stdout, "isatty", None)
    color = bool(isatty and isatty()) and not os.environ.get("NO_COLOR")
    return (_FORMAT, tuple(argv), os.getcwd(), color)


def _entry_path(argv: Sequence[str], key: tuple[str, tuple[str, ...], str, bool]) -> str:
    name = zlib.crc32(repr(key).encode("utf-8", "surrogatepass"))
    return os.path.join(folder_for(argv), f"q-{name:08x}.quick")


def _pack(fields: Sequence[str]) -> bytes:
    return "".join(f"{len(field)}:{field}," for field in fields).encode("utf-8", "surrogatepass")


def _unpack(data: bytes) -> list[str]:
    """The fields :func:`_pack` wrote; ValueError if ``data`` is anything else."""
    text = data.decode("utf-8", "surrogatepass")
    fields: list[str] = []
    at = 0
    while at < len(text):
        colon = text.index(":", at, at + 12)
        digits = text[at:colon]
        if not (digits.isascii() and digits.isdigit()):
            raise ValueError(f"no length at {at}")
        end = colon + 1 + int(digits)
        if text[end:end + 1] != ",":
            raise ValueError(f"no end at {end}")
        fields.append(text[colon + 1:end])
        at = end + 1
    return fields


def replay(argv: Sequence[str]) -> int | None:
    """Print the recorded output of ``pgsteady lint ARGV`` and return its exit code, if
    nothing it depended on changed; else None (lint normally)."""
    try:
        key = _key(argv)
        with open(_entry_path(argv, key), "rb") as handle:
            fields = _unpack(handle.read())
        if len(fields) < 9 or fields[0] != _FORMAT or fields[1] != repr(key):
            return None
        config_source, parser, dependencies, out, err, code, *paths = fields[2:]
        exit_code = int(code)
        if _dependencies(paths, config_source or None, parser or None) != dependencies:
            return None
    except (OSError, ValueError):  # no entry, or not one of ours
        return None
    sys.stdout.write(out)
    sys.stderr.write(err)
    return exit_code


def arm(argv: Sequence[str]) -> None:
    """Let this process's lint run record its output for :func:`replay`."""
    _ARMED[:] = [list(argv)]


def record(out: str, err: str, code: int, paths: Sequence[str],
           config_source: str | None) -> None:
    """Store a finished run's output, if this process was armed; failures are ignored."""
    if not _ARMED:
        return
    argv = _ARMED[0]
    key = _key(argv)
    parser = _pglast_file()
    dependencies = _dependencies(paths, config_source, parser)
    if dependencies is None:
        return
    target = _entry_path(argv, key)
    entry = _pack([_FORMAT, repr(key), config_source or "", parser or "", dependencies, out,
                   err, str(code), *paths])
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        temporary = f"{target}.{os.getpid()}.tmp"
        with open(temporary, "wb") as handle:
            handle.write(entry)
        os.replace(temporary, target)
        _trim(os.path.dirname(target))
    except OSError:
        return


def _trim(folder: str) -> None:
    import contextlib  # noqa: PLC0415 -- not on the warm path

    entries = [e for e in os.scandir(folder) if e.name.startswith("q-")
               and e.name.endswith(".quick")]
    for stale in os.scandir(folder):  # older versions' entries: never read
        if stale.name.startswith("q-") and stale.name.endswith(".marshal"):
            with contextlib.suppress(OSError):
                os.unlink(stale.path)
    entries.sort(key=lambda e: e.stat().st_mtime_ns)
    for old in entries[:-MAX_ENTRIES]:
        with contextlib.suppress(OSError):
            os.unlink(old.path)
