"""An embedded PostgreSQL + PgBouncer (+ fault proxy) on loopback, for labs, tests and users.

``Cluster`` is the sandbox ``pgsteady lab up`` prints DSNs for; ``Postgres`` and ``PgBouncer``
are its parts, usable alone (the pytest plugin shares one PostgreSQL across a session and
starts a PgBouncer per test, as PgBouncer's own suite does). Everything lives in one private
temp directory and listens on 127.0.0.1 only. Only the owner gets in: SCRAM-SHA-256 with a
random password per cluster, kept in a 0600 passfile the DSNs name (see ``_auth``), so DSNs
carry no secret and work as they are. Everything is stopped and removed on every way out:
normal exit, exception, Ctrl-C, test failure, even ``kill -9`` of Python (the servers carry a
parent-death signal; see ``_process``).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Self, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgsteady import _majors
from pgsteady.errors import LabError
from pgsteady.inspect.pgbouncer import LogReader, admin
from pgsteady.lab import _auth, _process
from pgsteady.lab._process import Binaries, RunAs
from pgsteady.lab._workdir import make_workdir as make_workdir  # noqa: PLC0414 - re-exported
from pgsteady.lab._workdir import remove_tree as remove_tree  # noqa: PLC0414 - re-exported
from pgsteady.lab.proxy import FaultProxy, ProxyProcess
from pgsteady.lab.redis_server import RedisServer

log = logging.getLogger("pgsteady.lab")

SUPERUSER = "postgres"
_T = TypeVar("_T")
Setting = str | int | float | bool

# Settings that make a throwaway server fast; durability is not the point here. A crash or an
# immediate stop loses commits callers were told had succeeded: ``durable=True`` (``--durable``)
# keeps PostgreSQL's own defaults for the three, for tests of what survives a crash.
NOT_DURABLE_PG_SETTINGS: dict[str, Setting] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}
FAST_PG_SETTINGS: dict[str, Setting] = {
    **NOT_DURABLE_PG_SETTINGS,
    "max_connections": 200,
    "shared_buffers": "64MB",
}


def _conf_value(value: Setting) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _dsn(port: int, dbname: str, passfile: Path, params: Mapping[str, Any]) -> str:
    """A libpq DSN naming the passfile, not the password; ``params`` add or override keys."""
    base: dict[str, Any] = {"host": "127.0.0.1", "port": port, "dbname": dbname,
                            "user": SUPERUSER, "passfile": str(passfile)}
    return make_conninfo("", **{**base, **params})


def _password_for(passfile: Path) -> str:
    """The password of an existing cluster directory, or a new one."""
    if passfile.exists():
        return _auth.read_passfile(passfile, SUPERUSER)
    return _auth.new_password()


class Postgres:
    """A throwaway PostgreSQL: initdb into ``workdir``, listening on 127.0.0.1 only."""

    def __init__(
        self, workdir: Path, *, port: int | None = None,
        settings: Mapping[str, Setting] | None = None, binaries: Binaries | None = None,
        who: RunAs | None = None, durable: bool = False, pg_version: int | None = None,
    ) -> None:
        """``pg_version``: run that PostgreSQL major (the system's or one installed by
        ``scripts/postgres-versions.sh``; :class:`~pgsteady.errors.VersionNotInstalled` if
        neither); default: the system's newest."""
        self.binaries = binaries or _process.find_binaries(pg_version)
        self.who = who or _process.run_as()
        self.workdir = workdir
        self.data_dir = workdir / "pgdata"
        self.log_path = workdir / "postgres.log"
        self.passfile = workdir / _auth.PASSFILE
        self.password = _password_for(self.passfile)
        self._fixed_port = port
        self.port = port or 0
        fast = {name: value for name, value in FAST_PG_SETTINGS.items()
                if not (durable and name in NOT_DURABLE_PG_SETTINGS)}
        self.settings = {**fast, **(settings or {})}
        self._proc: subprocess.Popen[bytes] | None = None

    def dsn(self, dbname: str = "postgres", **params: Any) -> str:
        """A libpq DSN for this server, secret-free (it names the passfile); extra keywords
        (``application_name=...``, or ``port=`` of a proxy in front) are added or override."""
        return _dsn(self.port, dbname, self.passfile, params)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def initdb(self) -> None:
        # initdb stores an already-hashed password as it is: the server's OS user never sees
        # the password itself, and PgBouncer can be given the very same secret.
        if not self.workdir.exists():  # a library caller's fresh path: made for the server
            self.workdir.mkdir(parents=True, mode=0o700)
            self.who.chown(self.workdir)
        pwfile = self.workdir / "initdb.pw"
        _auth.write_private(pwfile, _auth.scram_secret(self.password) + "\n", self.who)
        try:
            out = subprocess.run(
                [str(self.binaries.initdb), "-D", str(self.data_dir), "-U", SUPERUSER,
                 "--auth=scram-sha-256", f"--pwfile={pwfile}", "--encoding=UTF8",
                 "--locale=C", "--no-sync",
                 # 13's initdb has no --no-instructions (the hint it prints goes nowhere)
                 *(["--no-instructions"]
                   if _majors.supports(self.major, _majors.INITDB_NO_INSTRUCTIONS) else [])],
                capture_output=True, text=True, cwd=self.workdir, check=False,
                user=self.who.uid, group=self.who.gid,
                extra_groups=[] if self.who.uid is not None else None,
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if out.returncode != 0:
            lines = (out.stderr.strip() or out.stdout.strip()).splitlines()
            last = [ln for ln in lines if not ln.startswith("Try ")][-1:] or ["no output"]
            raise LabError(f"initdb failed (exit {out.returncode}): {last[0]}; "
                           f"check that {self.workdir} is writable by the server's OS user")
        if not _majors.supports(self.major, _majors.INITDB_PWFILE_SCRAM):
            self._store_secret_single_user()
        (self.data_dir / "pg_hba.conf").write_text(
            "# pgsteady lab: its owner only (SCRAM, password in the owner's passfile)\n"
            "local all all scram-sha-256\n"
            "host  all all 127.0.0.1/32 scram-sha-256\n"
        )
        if not self.passfile.exists():
            _auth.write_passfile(self.passfile, SUPERUSER, self.password, self.workdir)

    def _store_secret_single_user(self) -> None:
        """13's initdb hashes the SCRAM secret it is given once more, as if it were the
        password (14's stores it as it is); a single-user backend's ALTER ROLE stores it as
        it is, and PgBouncer, which holds the same secret, can then log in with it."""
        secret = _auth.scram_secret(self.password)
        out = subprocess.run(
            [str(self.binaries.postgres), "--single", "-D", str(self.data_dir), "postgres"],
            input=f"ALTER ROLE {SUPERUSER} PASSWORD '{secret}'\n", capture_output=True,
            text=True, cwd=self.workdir, check=False, user=self.who.uid, group=self.who.gid,
            extra_groups=[] if self.who.uid is not None else None,
        )
        if out.returncode != 0 or "ERROR" in out.stderr:
            raise LabError(f"could not set the owner's password on PostgreSQL {self.major}: "
                           f"{out.stderr.strip().splitlines()[-1:]}")

    def _write_settings(self) -> None:
        lines = [
            "listen_addresses = '127.0.0.1'",
            f"port = {self.port}",
            f"unix_socket_directories = {_conf_value(str(self.workdir))}",
            "logging_collector = off",
        ]
        lines += [f"{name} = {_conf_value(value)}" for name, value in self.settings.items()]
        path = self.data_dir / "pgsteady.conf"
        path.write_text("\n".join(lines) + "\n")
        self.who.chown(path)
        conf = self.data_dir / "postgresql.conf"
        if "include 'pgsteady.conf'" not in conf.read_text():
            with open(conf, "a") as f:
                f.write("\ninclude 'pgsteady.conf'\n")

    def start(self) -> Self:
        if not self.data_dir.exists():
            self.initdb()

        def launch(port: int) -> subprocess.Popen[bytes]:
            self.port = port
            self._write_settings()
            self._proc = _process.spawn(
                [str(self.binaries.postgres), "-D", str(self.data_dir)],
                log_path=self.log_path, who=self.who, death_signal=signal.SIGQUIT,
                cwd=self.workdir)
            return self._proc

        _process.start_listening("PostgreSQL", launch, self._accepts, log_path=self.log_path,
                                 timeout=60, fixed=self._fixed_port, port=self.port)
        return self

    def _accepts(self) -> bool:
        try:
            with psycopg.connect(self.dsn(), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def stop(self, *, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (SIGINT, rolls back sessions) or ``immediate`` (SIGQUIT)."""
        if self._proc is not None:
            _process.stop(self._proc, signal.SIGINT if mode == "fast" else signal.SIGQUIT)
            self._proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def version(self) -> str:
        with psycopg.connect(self.dsn()) as conn:
            return str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]

    @property
    def major(self) -> int:
        """The PostgreSQL major this server runs (read from its binary: no connection)."""
        return self.binaries.postgres_major()

    def create_database(self, name: str) -> str:
        """Create an empty database and return its DSN."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            if not _majors.supports(self.major, _majors.DROP_DATABASE_FORCE):  # end its sessions
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                             " WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
                return
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


class PgBouncer:
    """A PgBouncer in front of ``upstream_port``, its admin console on, every connect logged."""

    def __init__(
        self, workdir: Path, upstream_port: int, *, pool_mode: str = "transaction",
        pool_size: int = 4, min_pool_size: int = 0, max_client_conn: int = 1000,
        query_wait_timeout: float = 120, port: int | None = None,
        settings: Mapping[str, Setting] | None = None, users: Iterable[str] = (),
        binaries: Binaries | None = None, who: RunAs | None = None, password: str | None = None,
    ) -> None:
        """``password``: the upstream PostgreSQL's (``Postgres.password``); PgBouncer asks its
        clients for the same one. Extra ``users`` log in with it too (create their roles with
        it), in plain text in PgBouncer's private auth file."""
        if pool_mode not in ("session", "transaction", "statement"):
            raise LabError(f"unknown pool_mode {pool_mode!r}; use session, transaction or "
                           f"statement")
        self.binaries = binaries or _process.find_binaries()
        self.who = who or _process.run_as()
        self.workdir = workdir
        self.upstream_port = upstream_port
        self.pool_mode = pool_mode
        self.pool_size = pool_size
        self.config: dict[str, Setting] = {
            "pool_mode": pool_mode,
            "default_pool_size": pool_size,
            "min_pool_size": min_pool_size,
            "max_client_conn": max_client_conn,
            "query_wait_timeout": query_wait_timeout,
            # Back within a second of PostgreSQL after a restart (PgBouncer's default: 15 s).
            "server_login_retry": 1,
            **(settings or {}),
        }
        self.users = {SUPERUSER, *users}
        self.passfile = workdir / _auth.PASSFILE
        self.password = password or _password_for(self.passfile)
        self._fixed_port = port
        self.port = port or 0
        self.ini_path = workdir / "pgbouncer.ini"
        self.log_path = workdir / "pgbouncer.log"
        self._stderr_path = workdir / "pgbouncer.stderr"
        self._proc: subprocess.Popen[bytes] | None = None

    def dsn(self, dbname: str = "postgres", **params: Any) -> str:
        """A libpq DSN through this PgBouncer, secret-free (it names the passfile)."""
        return _dsn(self.port, dbname, self.passfile, params)

    @property
    def admin_dsn(self) -> str:
        return self.dsn("pgbouncer")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def admin(self, command: str) -> list[dict[str, Any]]:
        """An admin-console command, e.g. ``admin("SHOW POOLS")``, as dict rows."""
        return admin(self.admin_dsn, command)

    def log_reader(self, *, from_start: bool = False) -> LogReader:
        return LogReader(self.log_path, from_start=from_start)

    def _write_config(self) -> None:
        settings: dict[str, Setting] = {
            "listen_addr": "127.0.0.1",
            "listen_port": self.port,
            "unix_socket_dir": "",
            "auth_type": "scram-sha-256",
            "auth_file": str(self.workdir / "userlist.txt"),
            "admin_users": SUPERUSER,
            "stats_users": SUPERUSER,
            "logfile": str(self.log_path),
            "pidfile": str(self.workdir / "pgbouncer.pid"),
            "log_connections": 1,
            "log_disconnections": 1,
            "log_pooler_errors": 1,
            **self.config,
        }
        body = [f"[databases]\n* = host=127.0.0.1 port={self.upstream_port}\n", "[pgbouncer]"]
        body += [f"{k} = {_ini_value(v)}" for k, v in settings.items()]
        self.ini_path.write_text("\n".join(body) + "\n")
        self.who.chown(self.ini_path)
        # The owner's SCRAM secret, as PostgreSQL has it: PgBouncer logs in to the server with
        # the keys of the client's own exchange. Other users need the password itself.
        entries = {u: self.password for u in self.users}
        entries[SUPERUSER] = _auth.scram_secret(self.password)
        _auth.write_private(self.workdir / "userlist.txt",
                            "".join(f'"{u}" "{entries[u]}"\n' for u in sorted(entries)),
                            self.who)
        if not self.passfile.exists():
            _auth.write_passfile(self.passfile, SUPERUSER, self.password)

    def start(self) -> Self:
        env = {**os.environ, "TZ": "UTC"}  # log timestamps the log reader can place exactly

        def launch(port: int) -> subprocess.Popen[bytes]:
            self.port = port
            self._write_config()
            self._proc = _process.spawn(
                [str(self.binaries.pgbouncer), str(self.ini_path)], log_path=self._stderr_path,
                who=self.who, death_signal=signal.SIGTERM, cwd=self.workdir, env=env)
            return self._proc

        _process.start_listening("PgBouncer", launch, self._accepts,
                                 log_path=self._stderr_path, timeout=30,
                                 fixed=self._fixed_port, port=self.port)
        return self

    def _accepts(self) -> bool:
        try:
            self.admin("SHOW VERSION")
        except psycopg.OperationalError:
            return False
        return True

    def reload(self, **settings: Setting) -> None:
        """Change settings on the running PgBouncer (``RELOAD``), e.g. ``reload(pool_size=8)``."""
        self.config.update(settings)
        self._write_config()
        self.admin("RELOAD")

    def stop(self) -> None:
        if self._proc is not None:
            # Before 1.23 SIGTERM is an immediate shutdown; from 1.23 on that is SIGQUIT.
            immediate = (signal.SIGQUIT if self.binaries.pgbouncer_version_tuple() >= (1, 23)
                         else signal.SIGTERM)
            _process.stop(self._proc, immediate, grace=5)
            self._proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


def _ini_value(value: Setting) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


_LIVE: set[Cluster] = set()


@atexit.register
def _stop_leftovers() -> None:
    for cluster in list(_LIVE):
        cluster.stop()


class Cluster:
    """PostgreSQL, optionally the fault proxy, and PgBouncer, wired in that order.

    ``with Cluster(pool_size=1, proxy=True) as c: psycopg.connect(c.pooled_dsn())``.
    ``redis=True`` adds a password-protected Redis (``redis_url()``). PostgreSQL runs with fsync
    and synchronous_commit off unless ``durable=True``: a crash may lose acknowledged commits.
    ``pg_version=16`` runs that PostgreSQL major (see ``scripts/postgres-versions.sh``).
    Pass ``postgres=`` to put a new proxy + PgBouncer in front of a server you already have;
    the cluster then stops only what it started. ``proxy_process=True`` runs the proxy in a
    child process, out of the way of a CPU-heavy load driver in this one.
    """

    def __init__(
        self, *, pool_mode: str = "transaction", pool_size: int = 4, min_pool_size: int = 0,
        max_client_conn: int = 1000, query_wait_timeout: float = 120, proxy: bool = False,
        connect_delay: float = 0.0, pg_settings: Mapping[str, Setting] | None = None,
        pgbouncer_settings: Mapping[str, Setting] | None = None, pg_port: int | None = None,
        pgbouncer_port: int | None = None, base_dir: str | Path | None = None,
        keep: bool = False, postgres: Postgres | None = None, users: Iterable[str] = (),
        proxy_process: bool = False, redis: bool = False, durable: bool = False,
        pg_version: int | None = None,
    ) -> None:
        self.binaries = postgres.binaries if postgres else _process.find_binaries(pg_version)
        self.who = postgres.who if postgres else _process.run_as()
        self.keep = keep
        self._base_dir = base_dir
        self._owns_postgres = postgres is None
        self._pg_args: dict[str, Any] = {"port": pg_port, "settings": pg_settings,
                                         "durable": durable}
        self._bouncer_args: dict[str, Any] = {
            "pool_mode": pool_mode, "pool_size": pool_size, "min_pool_size": min_pool_size,
            "max_client_conn": max_client_conn, "query_wait_timeout": query_wait_timeout,
            "port": pgbouncer_port, "settings": pgbouncer_settings, "users": users,
        }
        self._want_proxy = proxy or connect_delay > 0
        self._connect_delay = connect_delay
        self._proxy_process = proxy_process
        self.dir: Path | None = None
        self.postgres: Postgres | None = postgres
        self.proxy: FaultProxy | ProxyProcess | None = None
        self.pgbouncer: PgBouncer | None = None
        self._want_redis = redis
        self.redis: RedisServer | None = None

    def start(self) -> Self:
        _LIVE.add(self)
        try:
            self.dir = make_workdir(self._base_dir, self.who)
            if self.postgres is None:
                self.postgres = Postgres(self.dir, binaries=self.binaries, who=self.who,
                                         **self._pg_args)
                self.postgres.start()
            upstream = self.postgres.port
            if self._want_proxy:
                kind = ProxyProcess if self._proxy_process else FaultProxy
                self.proxy = kind(upstream, connect_delay=self._connect_delay).start()
                upstream = self.proxy.port
            self.pgbouncer = PgBouncer(self.dir, upstream, binaries=self.binaries, who=self.who,
                                       password=self.postgres.password, **self._bouncer_args)
            self.pgbouncer.start()
            if self._want_redis:
                self.redis = RedisServer(self.dir, who=self.who).start()
        except BaseException:
            self.stop()
            raise
        log.info("lab cluster up in %s", self.dir)
        return self

    def stop(self) -> None:
        """Stop everything this cluster started and remove its directory (unless ``keep``)."""
        _LIVE.discard(self)
        for step in (self._stop_pgbouncer, self._stop_proxy, self._stop_postgres,
                     self._stop_redis):
            try:
                step()
            except Exception:
                log.exception("while stopping the lab cluster")
        self.pgbouncer = self.proxy = self.redis = None
        if self._owns_postgres:
            self.postgres = None  # a second start() begins from scratch
        if self.dir is not None and not self.keep:
            remove_tree(self.dir)
            self.dir = None

    def _stop_pgbouncer(self) -> None:
        if self.pgbouncer is not None:
            self.pgbouncer.stop()

    def _stop_proxy(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()

    def _stop_redis(self) -> None:
        if self.redis is not None:
            self.redis.stop()

    def _stop_postgres(self) -> None:
        if self.postgres is not None and self._owns_postgres:
            self.postgres.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------------------

    def direct_dsn(self, dbname: str = "postgres", **params: Any) -> str:
        """Straight to PostgreSQL (bypasses the proxy and PgBouncer)."""
        return self._require(self.postgres).dsn(dbname, **params)

    def pooled_dsn(self, dbname: str = "postgres", **params: Any) -> str:
        """Through PgBouncer (and the proxy, if there is one)."""
        return self._require(self.pgbouncer).dsn(dbname, **params)

    @property
    def admin_dsn(self) -> str:
        return self._require(self.pgbouncer).admin_dsn

    def redis_url(self) -> str:
        """The lab Redis (``Cluster(redis=True)``), password included: do not print it."""
        return self._require(self.redis).url

    @staticmethod
    def _require(part: _T | None) -> _T:
        if part is None:
            raise LabError("the lab cluster is not running; call start() or use `with`")
        return part

    def server_connections(self, dbname: str) -> int:
        """PgBouncer's server connections to ``dbname``: logging in, idle, active or used."""
        bouncer = self._require(self.pgbouncer)
        return sum(p["sv_login"] + p["sv_idle"] + p["sv_active"] + p["sv_used"]
                   for p in bouncer.admin("SHOW POOLS") if p["database"] == dbname)

    def wait_pool_filled(self, dbname: str, servers: int, timeout: float = 10.0) -> None:
        """Wait until PgBouncer holds ``servers`` idle+active server connections for ``dbname``."""
        bouncer = self._require(self.pgbouncer)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pools = [p for p in bouncer.admin("SHOW POOLS") if p["database"] == dbname]
            if pools and sum(p["sv_idle"] + p["sv_active"] + p["sv_used"] for p in pools) \
                    >= servers:
                return
            time.sleep(0.05)
        raise LabError(f"PgBouncer did not open {servers} server connections to {dbname} "
                       f"within {timeout:.0f} s")

    def drop_server_connections(self, dbname: str, timeout: float = 10.0) -> int:
        """End every server connection PgBouncer holds to ``dbname`` (from the server side, as a
        database restart or an idle timeout would) and wait until PgBouncer has let go of them.

        PgBouncer keeps what it learned at its first login (the parameters it greets clients
        with), so afterwards clients log in at once and their first queries find no server
        connection: a truly cold pool. Returns how many backends were ended."""
        query = sql.SQL(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = {} AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).format(sql.Literal(dbname))
        with psycopg.connect(self.direct_dsn(dbname), autocommit=True) as conn:
            row = conn.execute(query).fetchone()
        deadline = time.monotonic() + timeout
        while self.server_connections(dbname):
            if time.monotonic() > deadline:
                raise LabError(f"PgBouncer still holds server connections to {dbname} "
                               f"{timeout:.0f} s after they were ended")
            time.sleep(0.05)
        return int(row[0]) if row else 0


def versions(binaries: Binaries | None = None) -> dict[str, str]:
    """``{"postgresql": ..., "pgbouncer": ...}``, or "not found" for what is missing."""
    try:
        b = binaries or _process.find_binaries()
    except LabError:
        return {"postgresql": "not found", "pgbouncer": "not found"}
    with contextlib.suppress(OSError):
        return {"postgresql": b.postgres_version(), "pgbouncer": b.pgbouncer_version()}
    return {"postgresql": "unknown", "pgbouncer": "unknown"}
