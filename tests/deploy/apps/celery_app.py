"""A Celery app whose tasks share a Database made at import: the prefork pool forks its
processes after this module is loaded (the Deploying page, docs/deploying.md).

``celery -A celery_app worker --pool=prefork --concurrency=2``
"""

import os

from celery import Celery
from celery.exceptions import SoftTimeLimitExceeded
from celery.schedules import crontab
from celery.signals import worker_process_shutdown

from pgsteady import Database, DeadlineExceeded

# The limits, shortest first: deadline < soft_time_limit < time_limit (< the broker's
# visibility timeout). A task that meets a stalled database then gives up at its deadline;
# the hard limit, which kills the process and every connection it holds, never fires.
DEADLINE = float(os.environ.get("JOB_DEADLINE", "2"))
SOFT_TIME_LIMIT = os.environ.get("JOB_SOFT_TIME_LIMIT", "10")
SOFT_TIME_LIMIT = None if SOFT_TIME_LIMIT == "none" else float(SOFT_TIME_LIMIT)
TIME_LIMIT = float(os.environ.get("JOB_TIME_LIMIT", "15"))
BURST_SPREAD = float(os.environ.get("JOB_BURST_SPREAD", "300"))  # seconds

app = Celery("jobs", broker=os.environ["CELERY_BROKER_URL"],
             backend=os.environ["CELERY_RESULT_BACKEND"])
app.conf.update(
    worker_pool="prefork",
    worker_concurrency=2,
    worker_prefetch_multiplier=1,  # a stalled task holds back one more, not four
    task_soft_time_limit=SOFT_TIME_LIMIT,
    task_time_limit=TIME_LIMIT,
    broker_connection_retry_on_startup=True,
    beat_schedule={  # `celery -A celery_app beat`: the top of the hour, as in seed 000
        "hourly-checks": {"task": "celery_app.hourly_checks", "schedule": crontab(minute=0)},
    },
)
db = Database(os.environ["PGSTEADY_DSN"], pool_size=2, pooler="transaction", service="jobs",
              lock_timeout=float(os.environ.get("LOCK_TIMEOUT", "5")),
              deadline=DEADLINE)



@worker_process_shutdown.connect
def close_database(**_):
    """A pool process that ends (a graceful stop, max_tasks_per_child) lets the jobs its
    callers left finish, and closes its connections idle."""
    db.close()


@app.task
def whoami(rid):
    """Ask for a text only this process and task know; return what came back."""
    asked = f"{os.getpid()}:{rid}"
    got = db.fetchone("select %s::text, pg_backend_pid()", (asked,))[0]
    return {"asked": asked, "got": got, "pid": os.getpid()}


def _restock(conn):
    conn.execute("insert into stock values ('mug', 1) on conflict (sku) do update "
                 "set n = stock.n + 1")
    return conn.execute("select count(*) from stock").fetchone()[0]


@app.task
def restock():
    """A transaction on a table a test may lock: the deadline, not a time limit, must end
    the wait (a process killed inside a transaction costs PgBouncer its server connection)."""
    try:
        return {"rows": db.run(_restock)}
    except DeadlineExceeded as exc:
        return {"deadline": exc.phase}
    except SoftTimeLimitExceeded:
        return {"soft_time_limit": True}


@app.task
def hourly_checks(jobs=60):
    """What beat starts at the top of the hour: spread the jobs over BURST_SPREAD seconds
    instead of starting them all at once (seed 000's burst tripled the query rate)."""
    for i in range(jobs):
        whoami.apply_async((f"hourly{i}",), countdown=i * BURST_SPREAD / jobs)
    return jobs
