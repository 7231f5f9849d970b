"""Health probes over real HTTP (uvicorn serving the ASGI app, and the stdlib server) while
PostgreSQL is black-holed, missing at start-up, and back again."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import uvicorn

from pgsteady import AsyncDatabase, Database
from pgsteady._http import Limits
from pgsteady.guards import CircuitBreaker
from pgsteady.health import (
    CheckResult,
    Health,
    breaker_check,
    db_check,
    optional,
    redis_check,
)
from pgsteady.testing.http_load import burst


def _get(port: int, path: str) -> tuple[int, dict, float, str]:
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    ctype = response.getheader("content-type")
    return (response.status, json.loads(body) if "json" in ctype else {"text": body},
            time.perf_counter() - start, ctype)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def uvicorn_serve() -> Iterator:
    """``serve(app) -> port``: uvicorn in a thread, stopped after the test."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def serve(app, **config) -> int:
        port = _free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                               log_level="warning", lifespan="on", **config))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        return port

    yield serve
    for server, thread in servers:
        server.should_exit = True
        thread.join(10)


def _dsn(proxy) -> str:
    return f"host=127.0.0.1 port={proxy.port} dbname=postgres user=postgres"


def _check_blackholed(port: int) -> None:
    lives = [_get(port, "/health/live") for _ in range(20)]
    assert all(code == 200 for code, *_ in lives)
    took = sorted(t for _, _, t, _ in lives)
    # Liveness never waits for the database: not one probe near the readiness deadline (0.5 s).
    assert took[len(took) // 2] < 0.050 and took[-1] < 0.4
    code, body, took_ready, ctype = _get(port, "/health/ready")
    assert code == 503 and body["status"] == "fail"
    assert body["checks"]["db"][0]["status"] == "fail"
    assert took_ready < 0.5 + 0.3  # its deadline, plus HTTP
    assert ctype == "application/health+json"


def test_asgi_under_uvicorn_while_postgres_is_blackholed(pgsteady_proxy, uvicorn_serve):
    """Under uvicorn: liveness 200 within 10 ms while PostgreSQL is black-holed, readiness
    503 within its deadline, and 200 again once the network is back."""
    with Database(_dsn(pgsteady_proxy), pool_size=2, connect_timeout=2) as db:
        db.wait(10)
        health = Health({"db": db_check(db)}, timeout=0.5)
        port = uvicorn_serve(health.asgi())
        assert _get(port, "/health/ready")[0] == 200
        pgsteady_proxy.blackhole(True)
        _check_blackholed(port)
        pgsteady_proxy.blackhole(False)
        deadline = time.monotonic() + 10
        while _get(port, "/health/ready")[0] != 200:
            assert time.monotonic() < deadline, "readiness did not come back"
            time.sleep(0.1)
        assert _get(port, "/nope")[0] == 404
        health.close()


def test_stdlib_server_while_postgres_is_blackholed(pgsteady_proxy):
    """health.serve(): the same answers from the stdlib HTTP server thread."""
    with Database(_dsn(pgsteady_proxy), pool_size=2, connect_timeout=2) as db:
        db.wait(10)
        health = Health({"db": db_check(db)}, timeout=0.5)
        with health.serve(0) as server:
            pgsteady_proxy.blackhole(True)
            _check_blackholed(server.port)
            pgsteady_proxy.blackhole(False)
        health.close()


def test_a_service_starts_with_its_database_down(pgsteady_proxy):
    """Database unreachable at start: live 200, ready 503; once it answers, ready 200 —
    without a restart."""
    pgsteady_proxy.blackhole(True)
    with Database(_dsn(pgsteady_proxy), pool_size=1, connect_timeout=1) as db:
        health = Health({"db": db_check(db)}, timeout=0.3)
        with health.serve(0) as server:
            assert _get(server.port, "/health/live")[0] == 200
            assert _get(server.port, "/health/ready")[0] == 503
            pgsteady_proxy.blackhole(False)
            deadline = time.monotonic() + 20
            while _get(server.port, "/health/ready")[0] != 200:
                assert time.monotonic() < deadline, "readiness did not come back"
                time.sleep(0.2)
            assert _get(server.port, "/health/deep")[0] == 200
        health.close()


def test_open_breaker_fails_readiness_and_half_open_warns():
    """breaker_check: open fails readiness (503), half-open warns (still 200), no I/O."""
    breaker = CircuitBreaker("pg", min_calls=1, open_for=0.2)
    health = Health({"breaker": breaker_check(breaker)})
    assert health.ready()["status"] == "pass"
    with pytest.raises(OSError), breaker:
        raise OSError
    report = health.ready()
    assert report["status"] == "fail" and report["checks"]["breaker"][0]["observedValue"] == "open"
    time.sleep(0.25)
    assert health.ready()["status"] == "warn"
    health.close()


def test_deep_exercises_postgres_and_redis(pgsteady_database, pgsteady_redis):
    """deep(): a query in a transaction and a Redis set/get/delete, with observations."""
    with Database(pgsteady_database.dsn, pool_size=1) as db, pgsteady_redis.client() as client:
        health = Health({"db": db_check(db), "cache": redis_check(client),
                         "queue": lambda: CheckResult("warn", 950, "jobs", "backlog high")})
        report = health.deep()
        assert report["status"] == "warn"
        assert "primary" in report["checks"]["db"][0]["output"]
        assert report["checks"]["cache"][0]["status"] == "pass"
        assert report["checks"]["queue"][0]["observedValue"] == 950
        pgsteady_redis.stop()
        report = health.ready()
        assert report["status"] == "fail" and report["checks"]["db"][0]["status"] == "pass"
        assert pgsteady_redis.url not in json.dumps(report)
        health.close()


def test_async_checks_for_an_async_database(pgsteady_database):
    """aready() runs an AsyncDatabase check in its loop; a hung check fails at the deadline."""
    async def hang() -> None:
        await asyncio.sleep(10)

    async def main() -> dict:
        async with AsyncDatabase(pgsteady_database.dsn, pool_size=1) as db:
            health = Health({"db": db_check(db), "hung": hang}, timeout=0.3)
            start = time.monotonic()
            report = await health.aready()
            assert time.monotonic() - start < 0.6
            health.close()
            return report

    report = asyncio.run(main())
    assert report["checks"]["db"][0]["status"] == "pass"
    assert report["checks"]["hung"][0]["status"] == "fail"


def test_concurrent_probes_share_one_evaluation():
    """20 readiness probes at once, over HTTP and from asyncio, run the checks once (a probe
    burst costs the database one query)."""
    calls = []

    def slow() -> bool:
        calls.append(1)
        time.sleep(0.2)
        return True

    async def aslow() -> bool:
        calls.append(1)
        await asyncio.sleep(0.1)
        return True

    health = Health({"dep": slow})
    # As many workers as probes (the default is 4): they all wait on the one evaluation.
    with health.serve(0, limits=Limits(workers=20)) as server:
        threads = [threading.Thread(target=_get, args=(server.port, "/health/ready"))
                   for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    health.close()
    assert len(calls) <= 2  # one evaluation, or two if a probe arrived just after it ended

    calls.clear()
    health = Health({"dep": aslow})

    async def burst() -> list:
        return await asyncio.gather(*(health.aready() for _ in range(20)))

    reports = asyncio.run(burst())
    health.close()
    assert len(calls) == 1 and all(r["status"] == "pass" for r in reports)


def _burst_ready(port: int, path: str = "/health/ready") -> list:
    answers = burst(port, 50, path, within=30)
    assert len(answers) == 50 and all(a.status == 503 for a in answers), \
        Counter(a.status or a.error for a in answers)
    assert all(json.loads(a.body)["checks"]["db"][0]["status"] == "fail" for a in answers)
    return [a.seconds for a in answers]


def test_fifty_concurrent_probes_each_answered_within_the_timeout(pgsteady_proxy,
                                                                  uvicorn_serve):
    """50 readiness probes at once with PostgreSQL black-holed (timeout 1 s), on
    ``serve()``'s 4 workers and under uvicorn: every one answered in under 2 s (the old
    server queued them behind its workers: 5.8 s)."""
    with Database(_dsn(pgsteady_proxy), pool_size=2, connect_timeout=2) as db:
        db.wait(10)
        health = Health({"db": db_check(db)}, timeout=1.0)
        port = uvicorn_serve(health.asgi())
        with health.serve(0) as server:
            pgsteady_proxy.blackhole(True)
            for each in (server.port, port):
                took = _burst_ready(each) + _burst_ready(each)
                assert max(took) < 2.0, sorted(took)[-5:]
        health.close()


def test_an_optional_dependency_that_is_down_only_warns(pgsteady_database, pgsteady_redis):
    """optional(redis_check): with Redis stopped, readiness stays 200 and says warn (for
    the check and overall), while a failing required check still fails it."""
    with Database(pgsteady_database.dsn, pool_size=1) as db, pgsteady_redis.client() as client:
        health = Health({"db": db_check(db), "cache": optional(redis_check(client))})
        with health.serve(0) as server:
            code, body, _, _ = _get(server.port, "/health/ready")
            assert code == 200 and body["status"] == "pass"
            pgsteady_redis.stop()
            code, body, _, _ = _get(server.port, "/health/ready")
            assert code == 200 and body["status"] == "warn"
            assert body["checks"]["cache"][0]["status"] == "warn"
            assert "optional" in body["checks"]["cache"][0]["output"]
            assert body["checks"]["db"][0]["status"] == "pass"
            code, body, _, _ = _get(server.port, "/health/deep")
            assert code == 200 and body["checks"]["cache"][0]["status"] == "warn"
        both = Health({"cache": optional(redis_check(client)), "must": lambda: False})
        assert both.ready()["status"] == "fail"
        both.close()
        health.close()


def test_asgi_mounted_under_a_prefix(uvicorn_serve):
    """Mounted under /probes in a Starlette app, and under uvicorn's --root-path, the probes
    answer (every path was 404)."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    health = Health({"dep": lambda: True})
    site = Starlette(routes=[Route("/", lambda _: PlainTextResponse("home")),
                             Mount("/probes", app=health.asgi())])
    port = uvicorn_serve(site)
    for path in ("/probes/health/live", "/probes/health/ready", "/probes/health/deep/"):
        code, body, _, ctype = _get(port, path)
        assert code == 200 and body["status"] == "pass" and ctype == "application/health+json"
    assert _get(port, "/probes/nope")[0] == 404
    # --root-path: behind a proxy that strips /probes, uvicorn puts it back in the path.
    port = uvicorn_serve(health.asgi(), root_path="/probes")
    assert _get(port, "/health/ready")[0] == 200
    health.close()


def test_wsgi_app_under_wsgiref_and_in_flask(pgsteady_database):
    """Health.wsgi(): the same routes and JSON from a real WSGI server (wsgiref), alone and
    mounted under /probes beside a Flask app with werkzeug's DispatcherMiddleware."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args) -> None:
            pass

    def run(app) -> tuple[int, object]:
        server = make_server("127.0.0.1", 0, app, handler_class=Quiet)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server.server_address[1], server

    with Database(pgsteady_database.dsn, pool_size=1) as db:
        health = Health({"db": db_check(db), "breaker": breaker_check(CircuitBreaker("x"))})
        port, server = run(health.wsgi())
        for path in ("/health/live", "/health/ready", "/health/deep"):
            code, body, _, ctype = _get(port, path)
            assert code == 200 and body["status"] == "pass" and ctype == "application/health+json"
        assert _get(port, "/health/deep")[1]["checks"]["db"][0]["output"].startswith("PostgreSQL")
        assert _get(port, "/nope")[0] == 404
        server.shutdown()

        flask = pytest.importorskip("flask")
        from werkzeug.middleware.dispatcher import DispatcherMiddleware

        site = flask.Flask("site")
        site.add_url_rule("/", "home", lambda: "home")
        site.wsgi_app = DispatcherMiddleware(site.wsgi_app, {"/probes": health.wsgi()})
        port, server = run(site)
        code, body, _, _ = _get(port, "/probes/health/ready")
        assert code == 200 and body["checks"]["db"][0]["status"] == "pass"
        assert _get(port, "/health/ready")[0] == 404  # Flask's, not the probes'
        server.shutdown()
        health.close()
