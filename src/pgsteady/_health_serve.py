"""The HTTP faces of :class:`pgsteady.health.Health`: an ASGI app, a WSGI app, and the bounded
stdlib server. One routing rule and one JSON body for all three, so a probe gets the same answer
whichever way a service mounts it:

- paths are taken relative to where the app is mounted (ASGI ``root_path``, WSGI
  ``SCRIPT_NAME``), so ``/probes/health/ready`` works under a ``Mount("/probes", ...)``;
- ``GET``/``HEAD`` only; 200, or 503 when the report fails (``warn`` is still ready);
- on the bounded server a readiness probe is a deferred answer: it waits on the shared
  evaluation's future, not in a worker thread (see :mod:`pgsteady._http`).
"""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self

from pgsteady import _http
from pgsteady.errors import UsageError

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

Which = Literal["live", "ready", "deep"]
CONTENT_TYPE = "application/health+json"
PATHS: dict[str, Which] = {"/health/live": "live", "/health/ready": "ready",
                           "/health/deep": "deep"}
NOT_FOUND: dict[str, Any] = {"status": "fail", "output": "not found; try /health/live, "
                             "/health/ready or /health/deep"}
HEADERS = [("Content-Type", CONTENT_TYPE), ("Cache-Control", "no-store")]

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]
WSGIApp = Callable[["WSGIEnvironment", "StartResponse"], Iterable[bytes]]


class Probed(Protocol):
    """What the HTTP faces ask of :class:`pgsteady.health.Health`: its probes. A protocol,
    so this module needs nothing of ``health`` (which imports this one)."""

    def live(self) -> dict[str, Any]: ...
    def ready(self) -> dict[str, Any]: ...
    def deep(self) -> dict[str, Any]: ...
    async def aready(self) -> dict[str, Any]: ...
    async def adeep(self) -> dict[str, Any]: ...
    def _probe(self, which: Literal["ready", "deep"],
               ) -> concurrent.futures.Future[dict[str, Any]]: ...


def status_code(report: Mapping[str, Any]) -> int:
    """The HTTP status for a report: 503 when it fails, else 200 (warn is still ready)."""
    return 503 if report.get("status") == "fail" else 200


def route(path: str, method: str) -> Which | None:
    """Which probe ``method path`` asks for (``path`` relative to the mount point)."""
    if method not in ("GET", "HEAD"):
        return None
    return PATHS.get(path.rstrip("/"))


def encode(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, default=str).encode()


def asgi_app(health: Probed) -> ASGIApp:
    """See :meth:`Health.asgi`."""
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        # ASGI: ``path`` is the full path and ``root_path`` where the app is mounted (uvicorn's
        # --root-path, Starlette's Mount); servers that already strip it leave no prefix.
        path, root = scope["path"], scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        which = route(path, scope["method"])
        if which is None:
            code, body = 404, NOT_FOUND
        else:
            body = health.live() if which == "live" else \
                await (health.aready() if which == "ready" else health.adeep())
            code = status_code(body)
        data = encode(body)
        headers = [(name.lower().encode(), value.encode()) for name, value in HEADERS]
        await send({"type": "http.response.start", "status": code,
                    "headers": [*headers, (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body",
                    "body": b"" if scope["method"] == "HEAD" else data})
    return app


def wsgi_app(health: Probed) -> WSGIApp:
    """See :meth:`Health.wsgi`."""
    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        # WSGI: PATH_INFO is already relative to SCRIPT_NAME (the mount point).
        which = route(environ.get("PATH_INFO", "") or "/", method)
        if which is None:
            code, body = 404, NOT_FOUND
        else:
            body = getattr(health, which)()
            code = status_code(body)
        data = encode(body)
        start_response(f"{code} {HTTPStatus(code).phrase}",
                       [*HEADERS, ("Content-Length", str(len(data)))])
        return [b"" if method == "HEAD" else data]
    return app


class HealthServer:
    """A running ``Health.serve()``: ``.port``, ``.url(path)``, ``stop()``.

    It runs on :class:`~pgsteady._http.BoundedServer`: a fixed number of threads however many
    probes connect, slow or silent connections closed after ``limits.header_timeout``, and
    readiness probes waiting on the shared evaluation (a future), not on a worker."""

    def __init__(self, health: Probed, host: str, port: int,
                 limits: _http.Limits | None = None) -> None:
        self.health = health

        def respond(body: Mapping[str, Any]) -> _http.Response:
            return _http.Response(status_code(body), list(HEADERS), encode(body))

        def app(request: _http.Request) -> _http.Answer:
            which = route(request.path, request.method)
            if which is None:
                return _http.Response(404, list(HEADERS), encode(NOT_FOUND))
            if which == "live":
                return respond(health.live())
            report = health._probe(which)  # its own HTTP face
            answer: concurrent.futures.Future[_http.Response] = concurrent.futures.Future()

            def done(future: concurrent.futures.Future[dict[str, Any]]) -> None:
                try:
                    answer.set_result(respond(future.result()))
                except Exception as exc:  # _http answers 500 and logs it
                    answer.set_exception(exc)
            report.add_done_callback(done)
            return answer

        try:
            self._server = _http.BoundedServer(app, host, port, limits,
                                               name="pgsteady-health-http")
        except OSError as exc:
            raise UsageError(f"cannot serve health on {host}:{port}: {exc.strerror}; choose "
                             f"another port (0 picks a free one)") from None
        self.host = host
        self.port: int = self._server.port

    @property
    def threads(self) -> int:
        """Threads serving HTTP (fixed: ``limits.workers`` + 1)."""
        return self._server.threads

    def start(self) -> Self:
        self._server.start()
        return self

    def url(self, path: str = "/health/live") -> str:
        return f"http://{self.host}:{self.port}{path}"

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
