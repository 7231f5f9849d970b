"""The warm path of ``pgsteady lint``: a whole run's output, read back before anything loads.

A ``pgsteady lint ...`` process that used the cache records what it printed, its exit code
and what the run depended on: the linter's code and pglast's, the configuration file, and
every file and folder it read (path, size, modification and change times and inode, as make,
ruff and git judge them), stamped before the run reads them. The next process with the same
arguments, working directory and terminal checks those stamps and, if none changed, prints
the recorded output: before argparse, the configuration, the rules or the parser are imported,
so interpreter start-up is most of such a run.
Anything changed falls through to the normal command line, which has the content-hash cache
(:mod:`cache`) behind it.

Only runs the command line parsed and finished without a usage or syntax error are recorded
(``--no-cache`` and ``--dsn`` runs never are), so equal arguments mean an equal parse; nor is
a run during which something it read changed, or that read a file written so recently that
an edit could keep its modification time (:func:`racy`).

An entry is plain text, a row of netstrings (``5:hello,``): the folder sits in the project
being linted, where anyone who can open a pull request can put a file, so reading one must
never run code (a pickle would) nor trust a format not meant for untrusted bytes (marshal);
:mod:`cachedir` opens it without following links, reads it with a size cap and checks its
MAC, keyed with a secret kept outside the project, so a planted or forged entry is a miss.
Netstrings need no import: only os, sys, stat and the builtin BLAKE2 are loaded here
(``json`` would bring ``re`` and double a warm run). A damaged or foreign entry is a miss,
never an error, and is replaced. ``--no-cache`` and ``--dsn`` (any abbreviation argparse
takes) are seen in the arguments first: such a run reads and writes nothing.
"""

from __future__ import annotations

import os
import sys

from pgsteady.lint import cachedir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

FOLDER = ".pgsteady_cache"
MAX_ENTRIES = 64
_FORMAT = "pgsteady-lint-quick-4"
_CODE = os.path.dirname(os.path.abspath(__file__))

#: The arguments of this process's ``pgsteady lint`` run, when its output may be recorded
#: (set by the command's entry point, :func:`arm`); empty in library use and tests' main().
_ARMED: list[list[str]] = []


def file_stamps(paths: Sequence[str], newest: list[int] | None = None) -> str | None:
    """Path, size, modification and change times and inode of everything under ``paths``:
    folders walked whole (a new file, or a tool's marker file, changes it); a file given alone
    brings its folder's and the one above's times, which change when an entry is added or
    removed (the runner is detected from them). None if a path is missing. Taken before the
    files are read, so an edit during the run is a change. ``newest`` gets the latest
    modification time seen plus the filesystem's clock step (see :func:`racy`)."""
    parts: list[str] = []
    latest = 0
    for name in paths:
        try:
            top = os.stat(name)
        except OSError:
            return None
        parts.append(f"{name}\0{top.st_mtime_ns}\0")
        latest = max(latest, _settled(top.st_mtime_ns))
        if os.path.isdir(name):
            for root, folders, files in os.walk(name):  # links not followed, as by rglob
                folders.sort()
                for file in sorted(files):
                    info = os.stat(os.path.join(root, file))
                    parts.append(f"{root}/{file}:{info.st_size}:{info.st_mtime_ns}:"
                                 f"{info.st_ctime_ns}:{info.st_ino};")
                    if newest is not None:  # only when recording: the warm path skips it
                        latest = max(latest, _settled(info.st_mtime_ns))
        else:
            parts.append(f"{top.st_size}:{top.st_ctime_ns}:{top.st_ino}")
            parent = os.path.dirname(os.path.abspath(name))
            for folder in (parent, os.path.dirname(parent)):
                parts.append(f"{os.stat(folder).st_mtime_ns};")
    if newest is not None:
        newest.append(latest)
    return "".join(parts)


def _settled(mtime_ns: int) -> int:
    """When a file with this modification time can no longer be changed without the time
    changing too: a filesystem stamps times from a clock that steps (a few ms on Linux; whole
    seconds, up to 2 on some), so an edit within the same step keeps the time."""
    return mtime_ns + (2 * 10**9 if mtime_ns % 10**9 == 0 else 20 * 10**6)


def racy(newest: int, started_ns: int) -> bool:
    """Whether a file stamped at or after ``started_ns`` (before it was read) could still
    change unseen: it was written so recently that an edit after reading could keep its
    modification time (git's "racy clean" problem). Such a run is not recorded."""
    return newest >= started_ns


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


def _file_stamp(path: str | None, newest: list[int] | None = None) -> str:
    if path is None:
        return "-"
    try:
        info = os.stat(path)
    except OSError:
        return f"{path}:missing"
    if newest is not None:
        newest.append(_settled(info.st_mtime_ns))
    return f"{path}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}:{info.st_ino}"


def _dependencies(paths: Sequence[str], config_source: str | None, parser: str | None,
                  newest: list[int] | None = None) -> str | None:
    """Everything a run's output depends on besides its arguments, as one string: the
    files, the configuration, the linter's code and pglast's (``parser``: its package's
    ``__init__``, rewritten when another version is installed)."""
    files = file_stamps(paths, newest)
    if files is None:
        return None
    config = _file_stamp(config_source, newest)
    nearest = _file_stamp(_nearest_pyproject(os.getcwd()), newest)
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


#: Options after which nothing is read from or written to the cache (prefixes included:
#: argparse takes ``--no-c`` for ``--no-cache``).
_UNCACHED = ("--no-cache", "--dsn")


def cacheable(argv: Sequence[str]) -> bool:
    """Whether these arguments may use the cache: not with ``--no-cache`` (it reads nothing)
    nor ``--dsn`` (the database changes), in any spelling argparse accepts."""
    for arg in argv:
        if arg == "--":
            break
        name = arg.partition("=")[0]
        if len(name) > 2 and any(option.startswith(name) for option in _UNCACHED):
            return False
    return True


def _entry_name(folder: cachedir.Folder, key: tuple[str, tuple[str, ...], str, bool]) -> str:
    return f"q-{folder.name('quick', repr(key).encode('utf-8', 'surrogatepass'))}.quick"


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
    if not cacheable(argv):
        return None
    try:
        key = _key(argv)
        folder = cachedir.open_folder(folder_for(argv), create=False)
        if folder is None:
            return None
        with folder:
            body = folder.read(_entry_name(folder, key))
        if body is None:
            return None
        fields = _unpack(body)
        if len(fields) < 9 or fields[0] != _FORMAT or fields[1] != repr(key):
            return None
        config_source, parser, dependencies, out, err, code, *paths = fields[2:]
        exit_code = int(code)
        if _dependencies(paths, config_source or None, parser or None) != dependencies:
            return None
    except (OSError, ValueError):  # not one of ours
        return None
    sys.stdout.write(out)
    sys.stderr.write(err)
    return exit_code


def arm(argv: Sequence[str]) -> None:
    """Let this process's lint run record its output for :func:`replay`; the clock starts
    now, before anything (the configuration included) is read."""
    import time  # noqa: PLC0415 -- a builtin module, and not on the warm path

    if cacheable(argv):
        _ARMED[:] = [list(argv)]
        _STARTED[:] = [time.time_ns()]


#: When the armed run started (ns), and what it depended on, stamped before it read a file.
_STARTED: list[int] = []
_STAMPED: list[tuple[str, str, str | None, str | None]] = []


def stamp(paths: Sequence[str], config_source: str | None) -> None:
    """Stamp everything the run will read, before it reads the files: a file edited while
    the run lints it then differs from its stamp, and the next run is a miss."""
    _STAMPED.clear()
    if not _ARMED:
        return
    newest: list[int] = []
    parser = _pglast_file()
    dependencies = _dependencies(paths, config_source, parser, newest)
    if dependencies is not None and not racy(max(newest), _STARTED[0]):
        _STAMPED.append(("\0".join(paths), dependencies, config_source, parser))


def record(out: str, err: str, code: int, paths: Sequence[str],
           config_source: str | None) -> None:
    """Store a finished run's output, if this process was armed and nothing it read changed
    since :func:`stamp`; failures are ignored."""
    if not (_ARMED and _STAMPED):
        return
    argv = _ARMED[0]
    stamped_paths, dependencies, stamped_source, parser = _STAMPED[0]
    if stamped_paths != "\0".join(paths) or stamped_source != config_source:
        return
    if _dependencies(paths, config_source, parser) != dependencies:
        return  # edited during the run: what it printed may be of the old text
    key = _key(argv)
    entry = _pack([_FORMAT, repr(key), config_source or "", parser or "", dependencies, out,
                   err, str(code), *paths])
    folder = cachedir.open_folder(folder_for(argv), create=True)
    if folder is None:
        return
    with folder:
        if folder.write(_entry_name(folder, key), entry):
            folder.trim(MAX_ENTRIES, ".quick", (".marshal",))
