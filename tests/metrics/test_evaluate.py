"""The in-process evaluation of the alert rules (what `pgsteady watch` shows), on plain values."""

from __future__ import annotations

from pgsteady.inspect.alerts import AlertConfig
from pgsteady.inspect.evaluate import Evaluator


def _queue(length: float) -> dict:
    return {"pgsteady_lock_queue_length": [((("relation", "public.orgs"),), length)],
            "pgsteady_up": [((("source", "postgres"),), 1.0)]}


def _active(evaluation, alert):
    return [a for a in evaluation.active if a.alert == alert]


def test_lock_queue_goes_pending_then_firing_then_resolves():
    """A queue >= 5 is pending until its `for` (here 30 s) has passed, then firing; once it
    drains the alert is gone, and a new queue starts pending again."""
    ev = Evaluator(AlertConfig.of({"lock_queue_length_for": "30s"}))
    assert not _active(ev.update(_queue(3), 0.0), "PgsteadyLockQueue")
    [pending] = _active(ev.update(_queue(21), 10.0), "PgsteadyLockQueue")
    assert pending.state == "pending" and dict(pending.labels) == {"relation": "public.orgs"}
    [still] = _active(ev.update(_queue(21), 39.0), "PgsteadyLockQueue")
    assert still.state == "pending" and still.active_for == 29.0
    [firing] = _active(ev.update(_queue(22), 40.0), "PgsteadyLockQueue")
    assert firing.state == "firing" and firing.value == 22
    evaluation = ev.update(_queue(0), 41.0)
    assert not _active(evaluation, "PgsteadyLockQueue")
    assert "PgsteadyLockQueue" in evaluation.quiet
    [again] = _active(ev.update(_queue(9), 42.0), "PgsteadyLockQueue")
    assert again.state == "pending" and again.active_for == 0


def test_counter_rate_and_missing_metrics():
    """Not-ready closures: 30 in 60 s is 30 a minute (> 10: active, for 2 m before firing);
    a counter reset is counted from zero; rules without their metric have no data."""
    ev = Evaluator()
    metric = "pgsteady_pgbouncer_not_ready_closures_total"
    for t, total in ((0, 100.0), (30, 110.0), (60, 130.0)):
        evaluation = ev.update({metric: [((), total)]}, float(t))
    [active] = _active(evaluation, "PgsteadyPgbouncerNotReadyClosures")
    assert active.value == 30 and active.state == "pending"
    assert ev.per_minute(metric, (), 60, 60.0) == 30
    ev.update({metric: [((), 5.0)]}, 90.0)  # the exporter restarted
    assert ev.increase(metric, (), 60, 90.0) == 25.0
    assert "PgsteadyClientPoolSaturated" in evaluation.no_data
    assert "PgsteadyRepeatedRestarts" in evaluation.no_data


def test_source_down_fires_after_its_for():
    """pgsteady_up{source="postgres"} 0 is pending, and firing after a minute."""
    ev = Evaluator()
    down = {"pgsteady_up": [((("source", "postgres"),), 0.0)]}
    [first] = _active(ev.update(down, 0.0), "PgsteadySourceDown")
    assert first.state == "pending" and dict(first.labels) == {"source": "postgres"}
    [later] = _active(ev.update(down, 61.0), "PgsteadySourceDown")
    assert later.state == "firing"


def test_absent_fires_without_the_metric_and_missing_labels_are_left_out():
    """In-process, PgsteadyExporterAbsent is active only when no pgsteady_up series exists,
    and a lock-queue alert carries instance/job only when its series has them (as PromQL's
    `by` leaves absent labels out)."""
    ev = Evaluator()
    [absent] = _active(ev.update({"other": [((), 1.0)]}, 0.0), "PgsteadyExporterAbsent")
    assert absent.labels == () and absent.state == "pending"
    assert not _active(ev.update(_queue(9), 1.0), "PgsteadyExporterAbsent")
    labelled = {"pgsteady_lock_queue_length": [
        ((("instance", "db-a"), ("job", "pg"), ("relation", "public.orgs")), 9.0),
        ((("instance", "db-b"), ("job", "pg"), ("relation", "public.orgs")), 7.0)],
        "pgsteady_up": [((("source", "postgres"),), 1.0)]}
    found = _active(ev.update(labelled, 2.0), "PgsteadyLockQueue")
    assert sorted(dict(a.labels)["instance"] for a in found) == ["db-a", "db-b"]
