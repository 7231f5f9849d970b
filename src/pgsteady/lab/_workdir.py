"""The lab's private directories: one per cluster, owned by the servers' OS user, and swept
when a killed lab left one behind.

Each directory records its owner (``owner.pid``: pid and start time, so a reused pid does not
count); a later start removes the directories of owners that are gone.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from pgsteady.errors import LabError, UsageError
from pgsteady.lab._process import RunAs

log = logging.getLogger("pgsteady.lab")

_OWNER = "owner.pid"
_PREFIXES = ("pgsteady-lab-", "pgsteady-test-")
_SWEEP_LIMIT = 1000


def make_workdir(base_dir: str | Path | None, who: RunAs, prefix: str = "pgsteady-lab-") -> Path:
    """A fresh private directory the servers' OS user owns; a clear error if we cannot.

    ``base_dir`` must exist: a mistyped ``--dir`` is refused, not created. Directories that
    killed labs left there (their owner process is gone) are removed first.
    """
    base = Path(base_dir) if base_dir is not None else Path(tempfile.gettempdir())
    if not base.is_dir():
        raise UsageError(f"{base} is not an existing directory; create it first or pass "
                         f"another --dir")
    sweep_stale(base)
    try:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        # Written whole, then renamed: a concurrent sweep never reads half an owner.
        (path / ".owner.tmp").write_text(_process_identity(os.getpid()) or "")
        os.replace(path / ".owner.tmp", path / _OWNER)
    except OSError as exc:
        raise LabError(f"cannot create the lab directory under {base}: {exc.strerror}; "
                       f"pass a writable directory (--dir) instead") from None
    who.chown(path)
    if who.uid is not None and not _reachable_by(path.parent, who):
        shutil.rmtree(path, ignore_errors=True)
        raise LabError(f"{base} is not reachable by OS user {who.user!r}, which runs the "
                       f"servers; pass a directory it can enter (--dir), e.g. /tmp")
    return path


def remove_tree(path: Path, *, within: float = 3.0) -> None:
    """Remove ``path``, again until it is gone or ``within`` seconds pass: an initdb that Ctrl-C
    interrupted leaves its backend writing there for a moment, and one pass would leave a
    directory without an owner file, which no sweep removes."""
    give_up = time.monotonic() + within
    while True:
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            return
        if time.monotonic() >= give_up:
            log.warning("could not remove %s; remove it by hand", path)
            return
        time.sleep(0.05)


def _process_identity(pid: int) -> str | None:
    """``"pid starttime"`` (a pid the kernel reuses gets a new start time); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return f"{pid} {stat.rsplit(')', 1)[1].split()[19]}"


def sweep_stale(base: Path) -> list[Path]:
    """Remove lab directories under ``base`` whose owner process no longer runs (a ``kill -9``
    leaves them: 40 MB each). Only ours: other users' are not ours to judge, and a
    directory without an owner file is left alone."""
    removed: list[Path] = []
    try:
        entries = [e for _, e in zip(range(_SWEEP_LIMIT), os.scandir(base), strict=False)]
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(_PREFIXES) or not entry.is_dir(follow_symlinks=False):
            continue
        owner = Path(entry.path) / _OWNER
        try:
            recorded = owner.read_text().strip()
        except OSError:
            continue
        pid = recorded.split()[0] if recorded else ""
        if not pid.isdigit() or owner.stat().st_uid != os.geteuid():
            continue
        if _process_identity(int(pid)) != recorded:
            shutil.rmtree(entry.path, ignore_errors=True)
            log.info("removed %s, left by a lab whose process is gone", entry.path)
            removed.append(Path(entry.path))
    return removed


def _reachable_by(path: Path, who: RunAs) -> bool:
    """Whether ``who`` may enter every directory from / down to ``path``."""
    def enterable(part: Path) -> bool:
        st = part.stat()
        if st.st_uid == who.uid:
            return bool(st.st_mode & 0o100)
        if st.st_gid == who.gid:
            return bool(st.st_mode & 0o010)
        return bool(st.st_mode & 0o001)

    return all(enterable(part) for part in [path, *path.parents])
