"""After ``os.fork`` a child never touches what it inherited of an executor.

A process that forks after making a ``Database`` (gunicorn ``--preload``, Celery's prefork
pool, ``multiprocessing`` with the fork start method) hands its open sockets to every child.
A child that sends on one interleaves its statements with the parent's, and answers go to the
wrong process (issue 37: 527 of 1,200 answers carried another process's row). A child that
closes one sends libpq's Terminate message on the socket the parent still uses, which ends the
parent's session — and so does a connection finalised later (by the garbage collector, or a
pool's ``__del__`` at exit).

So, in the child, at the earliest moment Python offers (``os.register_at_fork``'s
``after_in_child``):

1. every connection an executor made has its socket replaced (``dup2``) by a fresh,
   unconnected one: whatever the child's objects later write or close goes nowhere, and the
   parent's socket is left alone (only the child's reference to it is dropped);
2. those connections, the old pools, threads and tasks are kept referenced for the life of the
   child, so that no finaliser ever runs on them (their locks may be held by threads that do
   not exist here: nothing may call into them);
3. each live executor resets itself (``_after_fork``): fresh locks and counts, and a new pool,
   workers and breaker window built on its first use in the child.

The parent is untouched: the hook runs in the child only.
"""

from __future__ import annotations

import logging
import os
import socket
import weakref
from typing import Any, Protocol

log = logging.getLogger("pgsteady.runner")


class Forkable(Protocol):
    def _after_fork(self) -> None: ...


_EXECUTORS: weakref.WeakSet[Any] = weakref.WeakSet()
_CONNECTIONS: weakref.WeakSet[Any] = weakref.WeakSet()
_INHERITED: list[Any] = []
"""What a child inherited and must never finalise: kept until the child exits."""


def track(executor: Forkable) -> None:
    """Reset ``executor`` in every child forked from now on."""
    _EXECUTORS.add(executor)


def remember(conn: Any) -> None:
    """A psycopg connection (sync or async) an executor opened: silenced in a forked child."""
    _CONNECTIONS.add(conn)


def keep(*objects: Any) -> None:
    """Keep inherited objects alive for the child's life (no finaliser runs on them)."""
    _INHERITED.extend(objects)


def silence(conn: Any) -> None:
    """Point the child's file descriptor of ``conn``'s socket at an unconnected socket: a
    Terminate, a ROLLBACK or a close from the child then never reaches the server."""
    try:
        fd = conn.pgconn.socket
    except Exception:  # closed or never connected: libpq holds no socket to send on
        return
    keep(conn)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dummy:
        os.dup2(dummy.fileno(), fd, inheritable=False)


def _after_fork_in_child() -> None:
    inherited = list(_CONNECTIONS)
    _CONNECTIONS.clear()
    for conn in inherited:
        try:
            silence(conn)
        except OSError as exc:  # logged: the child goes on with its own new connections
            log.warning("could not detach an inherited connection after fork: %s", exc)
    for executor in list(_EXECUTORS):
        try:
            executor._after_fork()
        except Exception:  # one executor's failure must not leave the others shared
            log.exception("could not reset %r after fork", executor)


os.register_at_fork(after_in_child=_after_fork_in_child)
