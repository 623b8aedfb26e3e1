"""Admission and consumption order of the scheduler, on its state alone (no stack): the
``staleness`` admission (AReaL's rule: groups trained, leased and owned < (steps committed + bound
+ 1) × rollout_batch_size, counted from the run's start) against the ``in_flight`` cap, and a step taking
the oldest-version accepted groups first with ``consume_order="oldest"``, and ``max_steps``
(no group admitted past what the run trains; dropped groups replaced; ``Exhausted`` after it)."""

from __future__ import annotations

import pytest

from polar_trainer import PolarClient
from polar_trainer.config import SchedulerConfig
from polar_trainer.groups import Group
from polar_trainer.scheduler import Exhausted, GroupScheduler
from polar_trainer.scheduler_state import GroupRecord

TASK = {"instruction": "What is 2 + 3?", "agent": {"harness": "shell", "custom_shell": {"command": "true"}}}
# Never contacted: nothing here starts the scheduler's threads.
CLIENT = PolarClient("http://127.0.0.1:9", "unused-token")


def _sched(tmp_path, policy_version=None, **cfg):
    config = SchedulerConfig(run_id="r", group_size=2, stamp_min_policy_version=False, sync_fence_version=False, **cfg)
    sched = GroupScheduler(CLIENT, config, [TASK], str(tmp_path / "state"), policy_version=policy_version)
    sched._started = True  # next_batch without admission threads: the groups are put in by hand
    return sched


def _put(sched, index, state, version=0):
    gid = sched.cfg.group_id(index)
    sched._state.groups[gid] = GroupRecord(index=index, stamp=version, state=state, body={}, cancelled=False, version=version)
    sched._groups[gid] = Group(group_id=gid, index=index, stamp=version, task_id=gid)
    sched._results[gid] = {}
    if state == "accepted":
        sched._state.accepted_order.append(gid)
    return gid


def test_staleness_admission_admits_what_the_bound_lets_a_step_take(tmp_path):
    # B = 2, bound 1: before any step, groups of steps 1 and 2 = 4.
    sched = _sched(tmp_path, rollout_batch_size=2, max_async_level=1, admission="staleness")
    for i in range(3):
        _put(sched, i, "inflight")
    assert sched._can_admit()
    _put(sched, 3, "accepted", version=7)  # fresh at the version set below: never dropped here
    assert not sched._can_admit()  # a fifth group would be taken by step 3, 2 updates behind
    for gid in list(sched._state.groups)[:2]:
        sched._state.groups[gid].state, sched._state.groups[gid].step = "leased", 1
    assert not sched._can_admit()  # leased, not committed: still counted
    sched.commit(1)
    assert sched._can_admit()  # the bound moved by one step: 6 fit
    _put(sched, 4, "inflight")
    _put(sched, 5, "inflight")
    assert not sched._can_admit()  # 2 trained + 4 owned
    sched.set_policy_version(7)  # versions alone do not move it (they may move every k steps)
    assert not sched._can_admit()


def test_staleness_admission_counts_from_where_the_run_started(tmp_path):
    sched = _sched(tmp_path, rollout_batch_size=2, max_async_level=1, admission="staleness")
    sched._state.committed_step = sched._state.last_step = 40
    sched._state.counters.consumed = 80
    for i in range(4):
        _put(sched, i, "inflight", version=40)
    assert not sched._can_admit()  # not 40 steps of groups ahead


def test_the_in_flight_cap_is_rollout_batch_size_times_max_async_level(tmp_path):
    sched = _sched(tmp_path, rollout_batch_size=2, max_async_level=2, admission="in_flight")
    for i in range(3):
        _put(sched, i, "inflight")
    assert sched._can_admit()
    _put(sched, 3, "accepted", version=5)
    assert not sched._can_admit()
    sched.set_policy_version(5)
    assert not sched._can_admit()  # the version does not move this cap


def test_consume_order_oldest_takes_the_oldest_version_first(tmp_path):
    sched = _sched(tmp_path, policy_version=2, rollout_batch_size=2, consume_order="oldest")
    for i, v in enumerate([2, 1, 0, 1]):
        _put(sched, i, "accepted", version=v)
    batch = sched.next_batch(timeout=1)
    assert batch.group_ids == ["r-g000002", "r-g000001"]
    assert [g.staleness for g in batch.groups] == [2, 1]
    assert sched._state.accepted_order == ["r-g000000", "r-g000003"]


def test_consume_order_accepted_takes_groups_as_they_were_accepted(tmp_path):
    sched = _sched(tmp_path, policy_version=2, rollout_batch_size=2, consume_order="accepted")
    for i, v in enumerate([2, 1, 0, 1]):
        _put(sched, i, "accepted", version=v)
    assert sched.next_batch(timeout=1).group_ids == ["r-g000000", "r-g000001"]


def test_max_steps_admits_no_group_past_what_the_run_trains_and_replaces_dropped_ones(tmp_path):
    # 2 steps of 2 groups: 4 groups cover the run, whatever the in-flight cap (8) allows.
    sched = _sched(tmp_path, rollout_batch_size=2, max_async_level=4, max_steps=2)
    _put(sched, 0, "leased")
    _put(sched, 1, "leased")
    _put(sched, 2, "inflight")
    assert sched._can_admit()
    _put(sched, 3, "accepted")
    assert not sched._can_admit()
    sched.set_policy_version(3)  # group 3 (version 0) is 3 behind: within the bound 4
    assert not sched._can_admit()
    sched.set_policy_version(5)  # 5 behind: dropped, so a replacement may come
    assert sched.counters()["dropped"] == {"stale": 1}
    assert sched._can_admit()


def test_max_steps_ends_the_run_with_exhausted(tmp_path):
    sched = _sched(tmp_path, rollout_batch_size=1, max_steps=1)
    _put(sched, 0, "accepted")
    sched.commit(sched.next_batch(timeout=1).step)
    with pytest.raises(Exhausted):
        sched.next_batch(timeout=1)
