"""The lint caches' folder and entries, safe against what a repository can carry.

The cache folder (``.pgsteady_cache/lint``) sits in the project being linted, so a pull request
decides what is there: links to other folders or to ``/dev/zero``, dangling links where lint
would write, entries forged to say "no findings". Hence:

- the folder is opened one part at a time with ``O_NOFOLLOW`` and used through its descriptor
  (``dir_fd``): a part that is a link, not the user's own, or writable by group or others is
  refused, and the run goes on without a cache;
- entries are opened with ``O_NOFOLLOW | O_NONBLOCK``, must be regular files, and are read with a
  size cap; temporary files are created exclusively (``O_CREAT | O_EXCL``) under a random name,
  then renamed (a rename replaces a link, never writes through it);
- every entry carries a MAC, keyed BLAKE2b with a secret kept outside the project
  (``$XDG_CACHE_HOME/pgsteady/secret``, created 0600 exclusively): an entry a repository
  carries, or one another user wrote, is a miss, never a verdict.

Why a secret rather than moving the cache to the XDG folder: the cache stays where users and
CI expect it (``--cache-dir`` and a ``.pgsteady_cache`` kept between CI runs still work), and
one check covers every place the cache may be, including a ``--cache-dir`` inside a project.

Only os and a builtin BLAKE2 are imported: this runs on lint's warm path.
"""

from __future__ import annotations

import os
import stat

try:  # the C module alone: hashlib would bring OpenSSL's (~3 ms) to every warm run
    from _blake2 import blake2b
except ImportError:  # pragma: no cover -- another interpreter
    from hashlib import blake2b

FOLDER = ".pgsteady_cache"
SECRET_BYTES = 32
MAC_BYTES = 32
#: The largest entry read back; a bigger file is a miss (a run of 3,000 files with findings
#: records a few MB).
MAX_ENTRY_BYTES = 64 * 2**20
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

#: Secrets already read, by folder (a process reads it once).
_SECRETS: dict[str, bytes] = {}


def _trusted(info: os.stat_result) -> bool:
    """A folder this user owns and no one else can write to."""
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _open_part(parent: int | None, name: str, create: bool, mode: int = 0o755) -> int | None:
    """A descriptor of folder ``name`` (under ``parent``'s descriptor), never through a link;
    None if it is missing (and not created), a link, or not :func:`_trusted`."""
    try:
        try:
            fd = os.open(name, _DIRECTORY, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
            _make_folder(name, mode, parent)
            fd = os.open(name, _DIRECTORY, dir_fd=parent)
    except OSError:  # a link (ELOOP), not a folder (ENOTDIR), no permission
        return None
    try:
        trusted = _trusted(os.fstat(fd))
    except OSError:
        trusted = False
    if not trusted:
        os.close(fd)
        return None
    return fd


class Folder:
    """An open cache folder: entries are read and written through its descriptor only."""

    def __init__(self, fd: int, secret: bytes) -> None:
        self.fd = fd
        self.secret = secret

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:  # a Cache left open by its caller: no descriptor leaks
        self.close()

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def name(self, kind: str, key: bytes) -> str:
        """An entry's file name: keyed, so no one without the secret can predict it."""
        return blake2b(kind.encode() + b"\0" + key, key=self.secret, digest_size=16).hexdigest()

    def _mac(self, name: str, body: bytes) -> bytes:
        return blake2b(name.encode() + b"\0" + body, key=self.secret,
                       digest_size=MAC_BYTES).digest()

    def read(self, name: str, limit: int = MAX_ENTRY_BYTES) -> bytes | None:
        """The body of entry ``name`` if this user's secret signed it for that name; None
        for anything else (missing, a link, not a regular file, too big, forged, damaged)."""
        try:
            fd = os.open(name, _READ, dir_fd=self.fd)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > limit + MAC_BYTES:
                return None
            data = _read_at_most(fd, limit + MAC_BYTES)
        except OSError:
            return None
        finally:
            os.close(fd)
        if data is None or len(data) < MAC_BYTES:
            return None
        mac, body = data[:MAC_BYTES], data[MAC_BYTES:]
        if not _equal(mac, self._mac(name, body)):
            return None
        return body

    def write(self, name: str, body: bytes) -> bool:
        """Store entry ``name`` atomically: a new file made exclusively under a random name,
        then renamed over the entry. False if it could not be written."""
        temporary = f".{name}.{os.urandom(8).hex()}.tmp"
        try:
            fd = os.open(temporary, _CREATE, 0o600, dir_fd=self.fd)
        except OSError:
            return False
        try:
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(self._mac(name, body) + body)
                os.replace(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
            except OSError:
                os.unlink(temporary, dir_fd=self.fd)
                return False
        except OSError:
            return False
        return True

    def trim(self, keep: int, suffix: str, stale: tuple[str, ...] = ()) -> None:
        """Keep the newest ``keep`` entries ending in ``suffix``; delete older versions' entries
        (names ending in ``stale``). Links are removed as links, never followed."""
        entries: list[tuple[int, str]] = []
        try:
            with os.scandir(self.fd) as found:
                for entry in found:
                    name = entry.name
                    if stale and name.endswith(stale):
                        _unlink(name, self.fd)
                    elif name.endswith(suffix):
                        info = entry.stat(follow_symlinks=False)
                        entries.append((info.st_mtime_ns, name))
        except OSError:
            return
        entries.sort()
        for _, name in entries[:-keep]:
            _unlink(name, self.fd)


def _make_folder(name: str, mode: int, parent: int | None) -> None:
    try:
        os.mkdir(name, mode, dir_fd=parent)
    except FileExistsError:  # another process, or a dangling link: the open refuses it
        return


def _unlink(name: str, folder: int) -> None:
    try:
        os.unlink(name, dir_fd=folder)
    except OSError:  # gone already
        return


def _equal(left: bytes, right: bytes) -> bool:
    """Compare in time independent of where they differ (hmac.compare_digest, without hmac)."""
    difference = len(left) ^ len(right)
    for a, b in zip(left, right, strict=False):
        difference |= a ^ b
    return difference == 0


def _read_at_most(fd: int, limit: int) -> bytes | None:
    """The file's bytes, or None if it holds more than ``limit`` (a growing file, a device)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None


def secret_folder() -> str | None:
    """``$XDG_CACHE_HOME/pgsteady`` (an absolute XDG_CACHE_HOME only, as the spec says), else
    ``~/.cache/pgsteady``; None without a home folder (never a folder relative to here)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pgsteady") if os.path.isabs(base) else None


def secret(create: bool) -> bytes | None:
    """This user's cache secret, made on first use (``create``) as a 0600 file created
    exclusively; None if it cannot be read safely (then nothing is cached)."""
    where = secret_folder()
    if where is None:
        return None
    known = _SECRETS.get(where)
    if known is not None:
        return known
    parent, name = os.path.split(where)
    if create:
        try:
            os.makedirs(parent, 0o700, exist_ok=True)
        except OSError:
            return None
    try:
        top = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        folder = _open_part(top, name, create, 0o700)
    finally:
        os.close(top)
    if folder is None:
        return None
    try:
        value = _read_secret(folder)
        if value is None and create:
            value = _make_secret(folder)
    finally:
        os.close(folder)
    if value is not None:
        _SECRETS[where] = value
    return value


def _read_secret(folder: int) -> bytes | None:
    try:
        fd = os.open("secret", _READ, dir_fd=folder)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid()
                or info.st_mode & 0o077 or info.st_size != SECRET_BYTES):
            return None
        value = os.read(fd, SECRET_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return value if len(value) == SECRET_BYTES else None


def _make_secret(folder: int) -> bytes | None:
    """Write a new secret under a temporary name, then link it in place: a second process
    doing the same at once loses the link and reads the winner's."""
    temporary = f".secret.{os.urandom(8).hex()}"
    try:
        fd = os.open(temporary, _CREATE, 0o600, dir_fd=folder)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(os.urandom(SECRET_BYTES))
        os.link(temporary, "secret", src_dir_fd=folder, dst_dir_fd=folder,
                follow_symlinks=False)
    except FileExistsError:  # another process won: read its secret
        pass
    except OSError:
        return None
    finally:
        _unlink(temporary, folder)
    return _read_secret(folder)


def open_folder(path: str, create: bool) -> Folder | None:
    """The cache folder at ``path``, checked part by part; None if there is no secret or the
    folder is unsafe (see the module's docstring), or is missing and not ``create``.

    The parts checked are the folder itself and, for ``<dir>/.pgsteady_cache/<name>``, the
    ``.pgsteady_cache`` above it (both are what a repository could carry); what lies above is
    the user's choice. A created ``.pgsteady_cache`` gets a ``.gitignore``, made exclusively
    (a dangling link there is left alone, never followed)."""
    key = secret(create)
    if key is None:
        return None
    path = os.path.abspath(path)
    parent, name = os.path.split(path)
    above, parent_name = os.path.split(parent)
    parts = [parent_name, name] if parent_name == FOLDER else [name]
    base = above if parent_name == FOLDER else parent
    try:
        if create:  # the folders above are the user's choice (--cache-dir a/b/c)
            os.makedirs(base, exist_ok=True)
        fd: int | None = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    for part in parts:
        assert fd is not None
        inner = _open_part(fd, part, create)
        if inner is not None and create and part == FOLDER:
            _write_gitignore(inner)
        os.close(fd)
        fd = inner
        if fd is None:
            return None
    assert fd is not None
    return Folder(fd, key)


def _write_gitignore(folder: int) -> None:
    try:
        fd = os.open(".gitignore", _CREATE, 0o644, dir_fd=folder)
    except OSError:  # there already (a file, or a link we will not follow)
        return
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write("# Automatically created by pgsteady lint.\n*\n")
    except OSError:  # a full disk: the cache is not worth an error
        return
