"""The async group scheduler against the REAL local stack where the policy version moves: stale
groups dropped after a fenced update, a queue left at another version (calculator task on the
simulated engine: a group of 2 sessions always mixes rewards 1 and 0)."""

from __future__ import annotations

import time

import pytest

from polar_trainer import engines
from polar_trainer.config import SchedulerConfig
from polar_trainer.scheduler import GroupScheduler

pytestmark = pytest.mark.stack


def test_stale_groups_are_dropped_and_counted_and_new_groups_carry_the_new_version(stack, run_id, state_dir):
    cfg = SchedulerConfig(run_id=run_id, rollout_batch_size=1, group_size=2, max_async_level=3, admission="in_flight", max_off_policy_steps=0, poll_wait_seconds=5)
    client = stack.client()
    submitted = []
    submit = client.submit
    client.submit = lambda body: (submitted.append(body), submit(body))[1]
    with GroupScheduler(client, cfg, [stack.task("calculator")], state_dir) as sched:
        # A fresh run is at version 0 and puts the queue's fence there too (turns are labelled by it).
        assert client.fence_status("default").fence.policy_version == "0"
        first = sched.next_batch(timeout=150)
        assert first.groups[0].version == 0 and first.groups[0].staleness == 0
        sched.commit(first.step)
        deadline = time.monotonic() + 150
        while sched.counters()["queued"] < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert sched.counters()["queued"] >= 2  # accepted under version 0, not taken yet
        seen = []

        def push(version: str) -> None:
            seen.append(client.fence_status("default").fence.paused)
            stack.push_weights(version)

        # The real fence: pause (drain) → the engine reports "1" → resume with version 1.
        sched.update_weights(push)
        assert seen == [True] and sched.policy_version == 1
        assert client.fence_status("default").fence.policy_version == "1"
        assert engines.weight_versions(stack.engine_url) == {stack.engine_url: "1"}
        dropped = sched.counters()["dropped"].get("stale", 0)
        assert dropped >= 2
        second = sched.next_batch(timeout=150)
        g = second.groups[0]
        # Its version is its tokens' (1), even if it was submitted just before the change (stamp 0).
        assert g.version == 1 and g.staleness == 0 and g.stamp <= 1
        trained = [v for s in g.samples() for v, m in zip(s.token_versions, s.loss_mask) if m]
        assert trained and set(trained) == {1}
        drops = [e for e in sched.events if e["event"] == "drop"]
        # Groups still in flight under version 0 when it changed are dropped when they arrive.
        assert all(e["reason"] == "stale" for e in drops) and len(drops) == sched.counters()["dropped"]["stale"] >= dropped
        assert not set(e["group_id"] for e in drops) & set(second.group_ids)
        # Groups submitted after the update need the engine at version 1 (the gateway holds their
        # turns until a replica reports it); every turn of one ran on weights "1".
        stamps = [(b["tasks"][0]["metadata"]["policy_version"], b["tasks"][0]["min_policy_version"]) for b in submitted]
        assert (1, 1) in stamps and all(v == m for v, m in stamps)


def test_a_queue_left_at_another_version_is_set_to_the_schedulers_at_start(stack, run_id, state_dir):
    client = stack.client()
    client.set_policy_version("default", 7)  # e.g. another run's last update
    cfg = SchedulerConfig(run_id=run_id, rollout_batch_size=1, group_size=2, max_groups=1, poll_wait_seconds=5)
    with GroupScheduler(client, cfg, [stack.task("calculator")], state_dir, policy_version=0) as sched:
        assert client.fence_status("default").fence.policy_version == "0"
        b = sched.next_batch(timeout=150)
    g = b.groups[0]
    # Without the sync the tokens would say 7 and the group would look 7 versions NEWER than the trainer.
    assert g.version == 0 and g.staleness == 0
    assert [e["was"] for e in sched.events if e["event"] == "fence_version"] == ["7"]
