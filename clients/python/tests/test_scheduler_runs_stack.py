"""The async group scheduler against the REAL local stack, on runs that stay at version 0:
admission, selection, early stop, transports, a broken task, cancel and restart (calculator task on
the simulated engine: a group of 2 or 4 sessions always mixes rewards 1 and 0; the hello task always
gives 1). They run on ``stack.free_queue``: its own gateway and fence where the stack has one, so
they can run beside the suites that move the default queue's version."""

from __future__ import annotations

import time

import pytest

from polar_trainer.config import SchedulerConfig
from polar_trainer.errors import NotFound, SchedulerError, ServerUnavailable
from polar_trainer.scheduler import Exhausted, GroupScheduler

pytestmark = pytest.mark.stack


def owned_over_time(events):
    """Replays the audit events: the most groups owned at once, and whether some group was admitted
    while others were still in flight (no batch barrier)."""
    inflight, queued, peak, overlapped = set(), set(), 0, False
    for e in events:
        kind, gid = e["event"], e.get("group_id")
        if kind == "submit" and e["created"]:
            if inflight and len(inflight | queued) > 0 and e["index"] >= 1:
                overlapped = overlapped or bool(inflight)
            inflight.add(gid)
        elif kind == "accept":
            inflight.discard(gid)
            queued.add(gid)
        elif kind in ("reject", "drop"):
            inflight.discard(gid)
            queued.discard(gid)
        elif kind == "lease":
            queued.discard(gid)
        peak = max(peak, len(inflight | queued))
    return peak, overlapped


def test_groups_are_admitted_continuously_within_the_bound_and_steps_take_the_first_accepted(stack, run_id, state_dir):
    cfg = SchedulerConfig(run_id=run_id, queue=stack.free_queue, rollout_batch_size=1, group_size=2, max_async_level=3, admission="in_flight", max_groups=6, poll_wait_seconds=5)
    task = stack.task("calculator")
    with GroupScheduler(stack.client(), cfg, [task], state_dir) as sched:
        batches = []
        for _ in range(3):
            b = sched.next_batch(timeout=150)
            # The step takes the first accepted groups, in acceptance order.
            accepted = [e["group_id"] for e in sched.events if e["event"] == "accept"]
            leased_before = [g for bb in batches for g in bb.group_ids]
            assert b.group_ids == [g for g in accepted if g not in leased_before][:1]
            batches.append(b)
            time.sleep(0.5)  # a simulated training step: rollouts go on meanwhile
            sched.commit(b.step)
        events = list(sched.events)
        counters = sched.counters()
    assert [b.step for b in batches] == [1, 2, 3]
    peak, overlapped = owned_over_time(events)
    assert peak <= cfg.max_in_flight == 3
    assert overlapped, "a group should be admitted while others are still in flight"
    assert counters["consumed"] == 3 and counters["staleness"] == {"0": 3}
    for b in batches:
        for g in b.groups:
            assert g.task_id == g.group_id and len(g.sessions) == 2 and g.staleness == 0
            assert sorted(o.reward for o in g.sessions) == [0.0, 1.0]
            # GRPO with a shared std: +a for the fix, -a for the other.
            advs = sorted(s.advantage for s in g.samples())
            assert advs[0] == pytest.approx(-advs[-1]) and advs[-1] > 0, [(o.kind, o.reason, o.reward, len(o.samples)) for o in g.sessions]
            for s in g.samples():
                assert len(s.loss_mask) == len(s.rollout_logprobs) == len(s.token_versions) == s.response_length
    # Every group's task carried its stamp in metadata (the result echoes it).
    g0 = batches[0].groups[0]
    assert g0.sessions[0].samples[0].group_id == g0.group_id


def test_selection_drops_all_equal_groups_and_admits_others(stack, run_id, state_dir):
    hello = stack.task("hello")  # session_completed: every session gets reward 1
    calc = stack.task("calculator")
    cfg = SchedulerConfig(run_id=run_id, queue=stack.free_queue, rollout_batch_size=2, group_size=2, max_async_level=2, drop_all_equal_groups=True, max_groups=6, poll_wait_seconds=5)
    with GroupScheduler(stack.client(), cfg, [hello, calc], state_dir) as sched:
        b = sched.next_batch(timeout=150)
        counters = sched.counters()
    assert all(g.index % 2 == 1 for g in b.groups)  # only calculator groups
    assert counters["dropped"]["all_equal"] >= 2


def test_early_stop_cancels_stragglers_which_are_excluded(stack, run_id, state_dir):
    calc = stack.task("calculator")
    slow = stack.task("calculator")
    # Sample 3 of each group sleeps: the early stop (2 usable of 4) must not wait for it.
    slow["agent"]["custom_shell"]["command"] = 'case "$POLAR_SESSION_ID" in *.3) sleep 60;; esac; ' + calc["agent"]["custom_shell"]["command"]
    cfg = SchedulerConfig(run_id=run_id, queue=stack.free_queue, rollout_batch_size=1, group_size=4, min_complete_fraction=0.25, early_stop_grace_sessions=1, max_groups=1, poll_wait_seconds=5)
    assert cfg.groups.early_stop_min_usable_sessions == 2
    t0 = time.monotonic()
    with GroupScheduler(stack.client(), cfg, [slow], state_dir) as sched:
        b = sched.next_batch(timeout=150)
        counters = sched.counters()
        assert sched.next_batch().group_ids == b.group_ids  # an uncommitted step is offered again
        sched.commit(b.step)
        with pytest.raises(Exhausted):
            sched.next_batch(timeout=30)
    assert time.monotonic() - t0 < 55
    kinds = sorted((o.kind, o.reason) for o in b.groups[0].sessions)
    assert ("excluded", "early_stop") in kinds or ("excluded", "cancelled") in kinds
    assert sum(1 for k, _ in kinds if k == "trainable") >= 2
    assert counters["early_stops"] == 1


def test_results_by_sse_transport(stack, run_id, state_dir):
    cfg = SchedulerConfig(run_id=run_id, queue=stack.free_queue, rollout_batch_size=1, group_size=2, max_groups=1, results_transport="sse")
    with GroupScheduler(stack.client(), cfg, [stack.task("calculator")], state_dir) as sched:
        b = sched.next_batch(timeout=150)
    assert len(b.groups[0].sessions) == 2


def test_a_task_that_cannot_work_stops_the_scheduler_with_its_error(stack, run_id, state_dir):
    broken = stack.task("calculator")
    broken["agent"]["custom_shell"]["command"] = "echo no model today >&2; exit 3"
    cfg = SchedulerConfig(run_id=run_id, queue=stack.free_queue, rollout_batch_size=1, group_size=2, max_unusable_groups=3, poll_wait_seconds=5)
    with GroupScheduler(stack.client(), cfg, [broken], state_dir) as sched:
        with pytest.raises(SchedulerError, match="3 groups in a row had no trainable session") as e:
            sched.next_batch(timeout=120)
        assert "agent_error" in str(e.value) and "exited with code 3" in str(e.value)
        assert sched.counters()["next_index"] <= 3 + cfg.max_in_flight  # admission stopped


def test_a_run_closed_with_cancel_in_flight_restarts_without_resubmitting(stack, run_id, state_dir):
    slow = stack.task("calculator")
    slow["agent"]["custom_shell"]["command"] = "sleep 30; " + slow["agent"]["custom_shell"]["command"]
    cfg = SchedulerConfig(run_id=run_id, queue=stack.free_queue, rollout_batch_size=1, group_size=2, max_async_level=2, max_groups=2, poll_wait_seconds=5)
    sched = GroupScheduler(stack.client(), cfg, [slow], state_dir).start()
    deadline = time.monotonic() + 60
    while sched.counters()["submitted"] < 2:
        assert time.monotonic() < deadline, sched.counters()
        time.sleep(0.2)
    sched.close(cancel_in_flight=True)
    # The restart reads the cancelled groups' results instead of resubmitting them (a 409).
    with GroupScheduler(stack.client(), cfg, [slow], state_dir) as again:
        with pytest.raises(Exhausted):
            again.next_batch(timeout=90)
        c = again.counters()
    assert c["submitted"] == 2 and c["replayed"] == 0 and c["accepted"] == 0
    assert sum(c["rejected"].values()) == 2 and c["sessions"].get("excluded:cancelled") == 4


class _SubmitsOnlyFirst:
    """The real client, except that every submit after the first fails as a 503 would (a control
    plane the POST never reached): the second group is written ahead, never posted."""

    def __init__(self, client):
        self._client, self.submits, self.cancels = client, 0, []

    def submit(self, body):
        self.submits += 1
        if self.submits > 1:
            raise ServerUnavailable(503, "unavailable", "the POST never reached the control plane")
        return self._client.submit(body)

    def cancel(self, batch_id):
        self.cancels.append(batch_id)
        return self._client.cancel(batch_id)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_close_with_cancel_in_flight_leaves_a_group_never_posted_for_the_restart_to_submit(stack, run_id, state_dir):
    # Cancelling an id the control plane never saw leaves a tombstone (so it could never be
    # submitted, nor read): close must cancel only the groups whose POST was answered.
    # Sessions that take 5 s: the first group is still running when close cancels it.
    slow = stack.task("calculator")
    slow["agent"]["custom_shell"]["command"] = "sleep 5; " + slow["agent"]["custom_shell"]["command"]
    cfg = SchedulerConfig(run_id=run_id, queue=stack.free_queue, rollout_batch_size=1, group_size=2, max_async_level=2, max_groups=2, poll_wait_seconds=5)
    flaky = _SubmitsOnlyFirst(stack.client())
    sched = GroupScheduler(flaky, cfg, [slow], state_dir).start()
    deadline = time.monotonic() + 60
    while flaky.submits < 2:
        assert time.monotonic() < deadline, sched.counters()
        time.sleep(0.2)
    sched.close(cancel_in_flight=True)
    first, second = cfg.group_id(0), cfg.group_id(1)
    assert second not in flaky.cancels
    with pytest.raises(NotFound):
        stack.client().status(second)  # no tombstone: the id is still free
    assert flaky.cancels == [first]
    # The restart reads the cancelled first group (rejected) and submits the second, which trains.
    with GroupScheduler(stack.client(), cfg, [slow], state_dir) as again:
        batch = again.next_batch(timeout=150)
        c = again.counters()
    assert batch.group_ids == [second]
    assert c["submitted"] == 2 and c["replayed"] == 0
    assert sum(c["rejected"].values()) == 1 and c["sessions"].get("excluded:cancelled") == 2
