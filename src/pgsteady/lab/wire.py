"""A minimal asyncio PostgreSQL wire-protocol client, for modelling other drivers exactly.

The lab's naive and cancel strategies must do on the socket precisely what pgx does when a
deadline passes: send a CancelRequest on a new connection, and/or send Terminate and close the
client connection, at a moment we choose. No Python driver exposes that (psycopg always waits
for the cancelled query; asyncpg keeps the connection "cancelling"), and reconnecting
thousands of times a second through a full driver would make the load driver the bottleneck.
So this speaks just enough of protocol 3.0 — trust or SCRAM-SHA-256 auth (the lab's), simple
Query, CancelRequest, Terminate — and nothing else. It is not a general-purpose driver.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field

from pgsteady.errors import LabError
from pgsteady.lab._auth import ScramClient

_PROTOCOL_3 = 196608
_CANCEL_REQUEST = 80877102
_HEADER = struct.Struct("!cI")


class WireError(Exception):
    """The server sent an ErrorResponse, or spoke something this client does not."""

    def __init__(self, message: str, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def _error_fields(payload: bytes) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in payload.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode("utf-8", "replace")
    return fields


@dataclass
class WireConnection:
    """One client connection, speaking the simple query protocol."""

    host: str
    port: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    backend_pid: int = 0
    backend_key: int = 0
    password: str | None = field(default=None, repr=False)
    _scram: ScramClient | None = field(default=None, repr=False)

    @classmethod
    async def connect(
        cls, host: str, port: int, *, user: str, dbname: str,
        application_name: str | None = None, password: str | None = None,
    ) -> WireConnection:
        reader, writer = await asyncio.open_connection(host, port)
        conn = cls(host, port, reader, writer, password=password)
        params = {"user": user, "database": dbname}
        if application_name:
            params["application_name"] = application_name
        body = struct.pack("!I", _PROTOCOL_3)
        body += b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in params.items())
        body += b"\0"
        writer.write(struct.pack("!I", len(body) + 4) + body)
        try:
            await conn._read_until_ready(startup=True)
        except BaseException:
            conn.close()
            raise
        return conn

    async def _read_message(self) -> tuple[bytes, bytes]:
        header = await self.reader.readexactly(5)
        kind, length = _HEADER.unpack(header)
        return kind, await self.reader.readexactly(length - 4)

    async def _read_until_ready(self, *, startup: bool = False) -> list[list[bytes | None]]:
        rows: list[list[bytes | None]] = []
        error: WireError | None = None
        while True:
            kind, payload = await self._read_message()
            if kind == b"Z":
                if error is not None:
                    raise error
                return rows
            if kind == b"D":
                rows.append(_data_row(payload))
            elif kind == b"E":
                fields = _error_fields(payload)
                error = WireError(fields.get("M", "error"), fields.get("C"))
                if startup:
                    raise error
            elif kind == b"R":
                self._authenticate(struct.unpack("!I", payload[:4])[0], payload[4:])
            elif kind == b"K":
                self.backend_pid, self.backend_key = struct.unpack("!II", payload[:8])

    def _authenticate(self, code: int, data: bytes) -> None:
        """AuthenticationOk (0), or one step of SCRAM-SHA-256: SASL (10), continue, final."""
        if code == 0:
            return
        if code == 10 and self.password is not None \
                and ScramClient.MECHANISM.encode() in data.split(b"\0"):
            self._scram = ScramClient(self.password)
            first = self._scram.first()
            body = ScramClient.MECHANISM.encode() + b"\0" + struct.pack("!i", len(first)) + first
            self._send(b"p", body)
        elif code in (11, 12) and self._scram is not None:
            try:
                if code == 11:
                    self._send(b"p", self._scram.final(data))
                else:
                    self._scram.verify(data)
            except LabError as exc:
                raise WireError(str(exc)) from None
        else:
            raise WireError(f"the lab wire client cannot answer authentication request {code} "
                            f"(it speaks trust and SCRAM-SHA-256 with a password)")

    def _send(self, kind: bytes, body: bytes) -> None:
        self.writer.write(kind + struct.pack("!I", len(body) + 4) + body)

    async def query(self, sql: str) -> list[list[bytes | None]]:
        """Send one simple Query and read its rows (as raw text values)."""
        self.send_query(sql)
        return await self.read_result()

    def send_query(self, sql: str) -> None:
        data = sql.encode() + b"\0"
        self.writer.write(b"Q" + struct.pack("!I", len(data) + 4) + data)

    async def read_result(self) -> list[list[bytes | None]]:
        return await self._read_until_ready()

    async def cancel(self, timeout: float = 5.0) -> None:
        """Send a CancelRequest for this connection's backend on a new connection, then wait
        for the server to close it, as libpq's PQcancel and pgx do. (Hanging up first is not
        what drivers do, and it can crash PgBouncer 1.18: "bad client state" in
        disconnect_client.)"""
        reader, writer = await asyncio.open_connection(self.host, self.port)
        try:
            writer.write(struct.pack("!IIII", 16, _CANCEL_REQUEST, self.backend_pid,
                                     self.backend_key))
            await writer.drain()
            async with asyncio.timeout(timeout):
                while await reader.read(1024):
                    pass
        finally:
            writer.close()

    def close(self) -> None:
        """Send Terminate and close the socket, as libpq's PQfinish and pgx's close do."""
        if not self.writer.is_closing():
            self.writer.write(b"X\0\0\0\4")
            self.writer.close()


def _data_row(payload: bytes) -> list[bytes | None]:
    (count,) = struct.unpack("!H", payload[:2])
    pos = 2
    values: list[bytes | None] = []
    for _ in range(count):
        (length,) = struct.unpack("!i", payload[pos:pos + 4])
        pos += 4
        if length < 0:
            values.append(None)
        else:
            values.append(payload[pos:pos + length])
            pos += length
    return values
