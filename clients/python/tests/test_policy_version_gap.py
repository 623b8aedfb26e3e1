"""A group whose sessions the gateway ended for ``min_policy_version`` (no engine reported the
group's version within the gateway's bound): each such session is excluded (never scored 0, never
trained), and ``next_batch()`` raises ``SchedulerError`` at once, naming the group, its version and
what the engines report, not after ``max_unusable_groups`` groups. The control plane is an
in-memory stand-in serving the results a gateway sends in that case (no stack needed)."""

from __future__ import annotations

import threading
import time

import pytest
from results import result

from polar_trainer.config import SchedulerConfig
from polar_trainer.errors import SchedulerError
from polar_trainer.samples import classify
from polar_trainer.scheduler import GroupScheduler

GAP = 'min_policy_version: needs policy version 3; replicas report 2 (http://127.0.0.1:30000: "2"); held 120 s (bound 120 s)'
TASK = {"instruction": "What is 2 + 3?", "agent": {"harness": "shell", "custom_shell": {"command": "true"}}}


def gap_result(batch: str, index: int):
    return result(index=index, reward=None, status="ERROR", error={"kind": "configuration", "message": GAP}, batch=batch, traces=[])


class GapControlPlane:
    """Takes every batch; answers each batch's results with the version-gap ERROR the gateway sends."""

    def __init__(self) -> None:
        self.submitted = []
        self.lock = threading.Lock()

    def supports_task_field(self, name):
        return True

    def submit(self, body):
        with self.lock:
            self.submitted.append(body)
        return {"created": True}

    def iter_results(self, batch_id, after=0, wait=30, timeout=None, stop=None):
        if after == 0:
            for i in range(4):
                yield i + 1, gap_result(batch_id, i)
        while stop is not None and not stop():
            time.sleep(0.05)

    def cancel(self, batch_id):
        return {}

    def cancel_task(self, batch_id, task_id):
        return {}


def test_a_version_gap_session_is_excluded_not_scored():
    o = classify(gap_result("run-g000000", 0), trajectory_index=0)
    assert (o.kind, o.reason, o.reward, o.samples) == ("excluded", "policy_version", None, [])
    # Another configuration error keeps its own reason.
    other = result(status="ERROR", reward=None, error={"kind": "configuration", "message": "builder.strategy: cannot load 'x'"}, traces=[])
    assert classify(other, trajectory_index=0).reason == "configuration"


def test_next_batch_raises_at_once_naming_the_group_and_both_versions(tmp_path):
    cp = GapControlPlane()
    config = SchedulerConfig(run_id="gap", rollout_batch_size=1, group_size=4, max_async_level=1, sync_fence_version=False, max_unusable_groups=20)
    sched = GroupScheduler(cp, config, [TASK] * 50, str(tmp_path / "state"), policy_version=3)
    started = time.monotonic()
    with pytest.raises(SchedulerError) as e:
        sched.next_batch(timeout=30)
    took = time.monotonic() - started
    sched.close()
    message = str(e.value)
    assert "group gap-g000000 (policy version 3)" in message
    assert "needs policy version 3; replicas report 2" in message
    # At the first such group: not after max_unusable_groups (20) of them, nor the timeout.
    assert len(cp.submitted) < 20 and took < 10
    assert cp.submitted[0]["tasks"][0]["min_policy_version"] == 3
