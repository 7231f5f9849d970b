"""A Celery app whose tasks share a Database made at import: the prefork pool forks its
processes after this module is loaded (the Deploying page, docs/deploying.md).

``celery -A celery_app worker --pool=prefork --concurrency=2``
"""

import os

from celery import Celery
from celery.exceptions import SoftTimeLimitExceeded
from celery.schedules import crontab

from pgsteady import Database, DeadlineExceeded

# The limits, shortest first: deadline < soft_time_limit < time_limit (< the broker's
# visibility timeout). A task that meets a stalled database then gives up at its deadline;
# the hard limit, which kills the process and every connection it holds, never fires.
DEADLINE = float(os.environ.get("JOB_DEADLINE", "2"))
SOFT_TIME_LIMIT = float(os.environ.get("JOB_SOFT_TIME_LIMIT", "10"))
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
              deadline=DEADLINE)


@app.task
def whoami(rid):
    """Ask for a text only this process and task know; return what came back."""
    asked = f"{os.getpid()}:{rid}"
    got = db.fetchone("select %s::text, pg_backend_pid()", (asked,))[0]
    return {"asked": asked, "got": got, "pid": os.getpid()}


@app.task
def count_stock():
    """Read a table a test may lock: the deadline, not a time limit, must end the wait."""
    try:
        return {"rows": db.fetchone("select count(*) from stock")[0]}
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
