"""The lab's one secret: a random password per cluster, and SCRAM-SHA-256 wherever it is used.

Only the lab's owner may connect: PostgreSQL and PgBouncer ask for SCRAM-SHA-256, and the
password lives in a 0600 libpq passfile inside the cluster's private (0700) directory. DSNs
name the file (``passfile=...``), never the secret, and work as they are for psql, psycopg
and pgbench.

PostgreSQL and PgBouncer are given the same SCRAM secret (not the password): with it,
PgBouncer checks a client without hashing the password 4096 times per connection (which
would cost the lab's collapse runs CPU PgBouncer must not spend), and logs in to PostgreSQL
with the keys of the client's own SCRAM exchange. The salt is derived from the password so
that the secret is a pure function of it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from functools import lru_cache
from pathlib import Path

from pgsteady.errors import LabError
from pgsteady.lab._process import RunAs

PASSFILE = "pgpass"
ITERATIONS = 4096  # PostgreSQL 15's fixed count; libpq and PgBouncer accept any


def new_password() -> str:
    """32 random URL-safe characters: nothing a passfile or conninfo would need to escape."""
    return secrets.token_urlsafe(24)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


@lru_cache(maxsize=16)
def _salted(password: str, salt: bytes, iterations: int) -> bytes:
    """Hi() of RFC 5802; cached, so reconnecting models pay it once per run, not per connect."""
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)


def scram_secret(password: str) -> str:
    """The ``SCRAM-SHA-256$...`` verifier PostgreSQL stores in ``pg_authid`` for ``password``."""
    salt = hashlib.sha256(b"pgsteady-lab\0" + password.encode()).digest()[:16]
    salted = _salted(password, salt, ITERATIONS)
    stored_key = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    server_key = _hmac(salted, b"Server Key")
    return f"SCRAM-SHA-256${ITERATIONS}:{_b64(salt)}${_b64(stored_key)}:{_b64(server_key)}"


def write_private(path: Path, text: str, who: RunAs | None = None) -> None:
    """Write ``path`` readable by its owner only (``who``, or us); never through a symlink."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)
    if who is not None:
        who.chown(path)


def write_passfile(path: Path, user: str, password: str, sockets: Path | None = None) -> None:
    """A libpq passfile for ``user`` on this machine's servers only (127.0.0.1, ``localhost``
    and the private socket directory, if any): the secret is never sent anywhere else."""
    hosts = ["127.0.0.1", "localhost"]
    if sockets is not None:
        hosts.append(str(sockets).replace("\\", "\\\\").replace(":", "\\:"))
    write_private(path, "".join(f"{host}:*:*:{user}:{password}\n" for host in hosts))


def read_passfile(path: Path, user: str) -> str:
    """The password for ``user`` in a passfile :func:`write_passfile` made."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise LabError(f"cannot read the lab's passfile {path}: {exc.strerror}; only the "
                       f"lab's owner can, and only while the lab runs") from None
    for line in lines:
        fields = line.replace("\\:", "").split(":")
        if len(fields) == 5 and fields[3] in (user, "*"):
            return fields[4]
    raise LabError(f"no password for {user!r} in {path}")


class ScramClient:
    """The client side of one SCRAM-SHA-256 exchange (RFC 5802/7677, no channel binding)."""

    MECHANISM = "SCRAM-SHA-256"

    def __init__(self, password: str) -> None:
        self._password = password
        self._nonce = _b64(secrets.token_bytes(18))
        self._first_bare = f"n=,r={self._nonce}"
        self._auth_message = b""
        self._server_key = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        parts = dict(p.split("=", 1) for p in server_first.decode().split(","))
        if not parts.get("r", "").startswith(self._nonce):
            raise LabError("SCRAM: the server's nonce does not extend ours")
        salted = _salted(self._password, base64.b64decode(parts["s"]), int(parts["i"]))
        client_key = _hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={parts['r']}"
        self._auth_message = f"{self._first_bare},{server_first.decode()},{without_proof}"\
            .encode()
        signature = _hmac(hashlib.sha256(client_key).digest(), self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_key = _hmac(salted, b"Server Key")
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        expected = "v=" + _b64(_hmac(self._server_key, self._auth_message))
        if not hmac.compare_digest(server_final.decode().split(",")[0], expected):
            raise LabError("SCRAM: the server's signature does not match")
