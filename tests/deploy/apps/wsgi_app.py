"""A WSGI service that makes its Database at import, as a module gunicorn serves does.

``gunicorn -c gunicorn_conf.py wsgi_app:app``: with ``preload_app`` the master imports this
once and forks its workers, each of which then uses ``db`` (the Deploying page, docs/deploying.md).
"""

import atexit
import json
import os
from urllib.parse import parse_qs

from pgsteady import Database, DeadlineExceeded, Overloaded
from pgsteady.health import Health, db_check

# Behind PgBouncer in transaction mode. The request deadline is the first of the limits:
# deadline < gunicorn's --timeout (gunicorn_conf.py), so a stalled database ends a request,
# never a worker (whose connections PgBouncer would then have to destroy).
DEADLINE = float(os.environ.get("WEB_DEADLINE", "2"))
db = Database(os.environ["PGSTEADY_DSN"], pool_size=2, pooler="transaction", service="web",
              lock_timeout=float(os.environ.get("LOCK_TIMEOUT", "5")),
              deadline=DEADLINE)
# On a graceful stop (SIGTERM) a worker closes its Database: a job whose caller already left
# finishes and its connection closes idle, not mid-transaction (a not-ready closure).
atexit.register(db.close)
probes = Health({"db": db_check(db)}, service="web").wsgi()


def app(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    if path.startswith("/health/"):  # /health/live, /health/ready, /health/deep
        return probes(environ, start_response)
    query = parse_qs(environ.get("QUERY_STRING", ""))
    try:
        if path == "/whoami":  # the question only this process and request can ask
            asked = f"{os.getpid()}:{query['rid'][0]}"
            got = db.fetchone("select %s::text, pg_backend_pid()", (asked,))[0]
            body = {"asked": asked, "got": got, "pid": os.getpid()}
        elif path == "/restock":  # a transaction on a table a test may lock (a stall)
            body = {"rows": db.run(_restock)}
        else:
            return _send(start_response, 404, {"detail": "not found"})
    except DeadlineExceeded as exc:
        return _send(start_response, 504, {"detail": str(exc)})
    except Overloaded as exc:
        return _send(start_response, 503, {"detail": str(exc)})
    return _send(start_response, 200, body)


def _restock(conn):
    conn.execute("insert into stock values ('mug', 1) on conflict (sku) do update "
                 "set n = stock.n + 1")
    return conn.execute("select count(*) from stock").fetchone()[0]


def _send(start_response, code, body):
    phrase = {200: "OK", 404: "Not Found", 503: "Service Unavailable",
              504: "Gateway Timeout"}[code]
    data = json.dumps(body).encode()
    start_response(f"{code} {phrase}", [("Content-Type", "application/json"),
                                        ("Content-Length", str(len(data)))])
    return [data]
