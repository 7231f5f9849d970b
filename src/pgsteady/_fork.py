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

One thing the parent does: it never forks while one of its threads is inside libpq making a
connection. libpq's SCRAM exchange runs in OpenSSL (psycopg's binary wheel bundles its own),
which takes process-wide locks; a fork that lands while a pool thread holds one leaves it
locked forever in the child, whose first connection then hangs (measured: 1 fork in 80 made
a few milliseconds after a pool started connecting, as gunicorn ``--preload`` does right after
importing the app). So every step of an executor's connection attempt runs under
:data:`_STEP`, and ``os.fork`` takes it first (``register_at_fork(before=...)``): the fork
waits for the step in flight, a millisecond or two.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import weakref
from collections.abc import Generator
from typing import Any, Protocol

import psycopg

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


_STEP = threading.Lock()
"""Held by a thread while it runs one step of a connection attempt (inside libpq), and by
``os.fork`` (see the module docstring)."""


def stepped(gen: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
    """psycopg's connection generator ``gen``, each step of it run under :data:`_STEP`."""
    try:
        with _STEP:
            value = next(gen)
        while True:
            sent = yield value
            with _STEP:
                value = gen.send(sent)
    except StopIteration as done:
        return done.value
    finally:
        gen.close()


class ForkSafeConnect:
    """Mixed into an executor's connection class: its connection attempts never overlap a
    fork (see the module docstring)."""

    @classmethod
    def _connect_gen(cls, conninfo: str = "") -> Any:
        return stepped(super()._connect_gen(conninfo))  # type: ignore[misc]


@functools.cache
def fork_safe(base: type[Any]) -> type[Any]:
    """``base`` (a sync or async psycopg connection class) with :class:`ForkSafeConnect`."""
    if issubclass(base, ForkSafeConnect):
        return base
    if not issubclass(base, psycopg.Connection | psycopg.AsyncConnection):
        return base  # not psycopg's: nothing of its connecting is ours to guard
    return type(base.__name__, (ForkSafeConnect, base), {"__module__": base.__module__})


def _before_fork() -> None:
    _STEP.acquire()


def _after_fork_in_parent() -> None:
    _STEP.release()


def _after_fork_in_child() -> None:
    _STEP.release()  # taken by the thread that forked, which is the child's only thread
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


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)
