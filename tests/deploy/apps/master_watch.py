# The tests' gunicorn config: the page's (gunicorn_conf.py) plus hooks in the master that
# use the master's own Database before the fork and after the workers are gone, and write
# what they got to MASTER_REPORT: a child must never answer for, or close, the parent's sessions.
import json
import os
import sys

from gunicorn_conf import *  # noqa: F403


def _ask(tag, calls):
    tally = {"wrong": 0, "errors": 0, "first_error": None}
    app = sys.modules.get("wsgi_app")
    if app is None:  # the ASGI app opens its pools in each worker's lifespan only
        return tally
    for i in range(calls):
        ident = f"master:{os.getpid()}:{tag}:{i}"
        try:
            tally["wrong"] += app.db.fetchone("select %s::text", (ident,), deadline=5)[0] != ident
        except Exception as exc:
            tally["errors"] += 1
            tally["first_error"] = tally["first_error"] or repr(exc)[:300]
    return tally


def when_ready(server):
    server.pgsteady_before = _ask("before", 10)


def on_exit(server):
    report = {"before": getattr(server, "pgsteady_before", None), "after": _ask("after", 20)}
    with open(os.environ["MASTER_REPORT"], "w") as out:
        json.dump(report, out)
