"""Blocking chains and lock queues from plain session and lock data (no server needed)."""

from __future__ import annotations

from pgsteady.inspect.postgres import Lock, Session, build_chains, find_lock_queues


def _s(pid: int, blocked_by: tuple[int, ...] = (), label: str = "") -> Session:
    return Session(pid, "app", "app", label, "10.0.0.1", 5000 + pid, "client backend",
                   "active", 10.0, 5.0, 5.0, 5.0, "Lock" if blocked_by else None, None, None,
                   False, f"select {pid}", blocked_by)


def _wait(pid: int, mode: str = "AccessShareLock", rel: str = "public.t", age: float = 1.0) -> Lock:
    return Lock(pid, "relation", mode, False, rel, age)


def _held(pid: int, mode: str = "AccessShareLock", rel: str = "public.t") -> Lock:
    return Lock(pid, "relation", mode, True, rel, None)


def test_seed_shape_one_root_with_the_whole_queue():
    """root -> ALTER -> 3 reads: one chain rooted at the holder, 4 queued, depths 1 and 2;
    and one lock queue naming the ALTER and the root."""
    sessions = [_s(1, label="dashboard"), _s(2, (1,)), _s(3, (2,)), _s(4, (2,)), _s(5, (2,))]
    locks = [_held(1), _wait(2, "AccessExclusiveLock", age=9.0), _wait(3), _wait(4), _wait(5)]
    chains = build_chains(sessions, locks)
    assert len(chains) == 1
    chain = chains[0]
    assert chain.root.pid == 1 and [h.mode for h in chain.holds] == ["AccessShareLock"]
    assert [(q.session.pid, q.depth) for q in chain.queued] == [(2, 1), (3, 2), (4, 2), (5, 2)]
    assert chain.queued_per_relation() == {"public.t": 4}
    assert chain.longest_wait == 9.0
    queues = find_lock_queues(sessions, locks)
    assert len(queues) == 1
    assert queues[0].waiter.pid == 2 and [r.pid for r in queues[0].roots] == [1]
    assert [s.pid for s in queues[0].queued] == [3, 4, 5]


def test_two_roots_and_a_session_behind_both():
    """A session blocked by two roots appears under each; roots with the longest wait first."""
    sessions = [_s(1), _s(2), _s(3, (1, 2)), _s(4, (2,))]
    locks = [_held(1), _held(2), _wait(3, age=2.0), _wait(4, age=7.0)]
    chains = build_chains(sessions, locks)
    assert [c.root.pid for c in chains] == [2, 1]
    assert {q.session.pid for q in chains[0].queued} == {3, 4}
    assert {q.session.pid for q in chains[1].queued} == {3}


def test_a_cycle_still_gets_a_root():
    """Sessions waiting on each other (a deadlock about to be broken) are not lost: the lowest
    pid of the cycle becomes their root."""
    sessions = [_s(7, (8,)), _s(8, (7,)), _s(9, (8,))]
    locks = [_wait(7), _wait(8), _wait(9)]
    chains = build_chains(sessions, locks)
    assert len(chains) == 1 and chains[0].root.pid == 7
    assert {q.session.pid for q in chains[0].queued} == {8, 9}


def test_no_waits_no_chains():
    """Nobody waiting: no chains, no lock queues; an ALTER waiting alone is no lock queue."""
    assert build_chains([_s(1), _s(2)], [_held(1)]) == []
    sessions = [_s(1), _s(2, (1,))]
    locks = [_held(1), _wait(2, "AccessExclusiveLock")]
    assert find_lock_queues(sessions, locks) == []
    assert len(build_chains(sessions, locks)) == 1
