"""``SchedulerConfig.engine_priority``: with ``oldest_first`` (the default) each group's task carries
``engine_priority`` = −(group index), so an engine that schedules by priority serves the oldest
group's model calls first; a task's own value is kept; ``none``, or a control plane whose schema
has no such field, leaves it unset. The control plane is an in-memory stand-in that takes every
batch and never answers (the groups stay in flight), so only what was submitted is looked at."""

from __future__ import annotations

import threading
import time

import pytest

from polar_trainer.config import SchedulerConfig
from polar_trainer.scheduler import GroupScheduler

TASK = {"instruction": "What is 2 + 3?", "agent": {"harness": "shell", "custom_shell": {"command": "true"}}}


class SilentControlPlane:
    """Takes every batch, answers none; ``fields`` are the task fields its schema has."""

    def __init__(self, fields=("min_policy_version", "engine_priority")) -> None:
        self.fields = set(fields)
        self.submitted = []
        self.lock = threading.Lock()

    def supports_task_field(self, name):
        return name in self.fields

    def submit(self, body):
        with self.lock:
            self.submitted.append(body)
        return {"created": True}

    def iter_results(self, batch_id, after=0, wait=30, timeout=None, stop=None):
        while stop is not None and not stop():
            time.sleep(0.02)
        return iter(())

    def cancel(self, batch_id):
        return {}

    def cancel_task(self, batch_id, task_id):
        return {}


def submitted_tasks(tmp_path, cp, tasks, groups=3, **cfg):
    config = SchedulerConfig(run_id="prio", rollout_batch_size=1, group_size=2, max_async_level=groups, sync_fence_version=False, **cfg)
    sched = GroupScheduler(cp, config, tasks, str(tmp_path / "state"))
    sched.start()
    deadline = time.monotonic() + 20
    while len(cp.submitted) < groups and time.monotonic() < deadline:
        time.sleep(0.02)
    sched.close()
    assert len(cp.submitted) == groups
    return sorted((b["tasks"][0] for b in cp.submitted), key=lambda t: t["metadata"]["group_index"])


def test_oldest_first_stamps_minus_the_group_index(tmp_path):
    tasks = submitted_tasks(tmp_path, SilentControlPlane(), [TASK])
    assert [t["engine_priority"] for t in tasks] == [0, -1, -2]


def test_a_tasks_own_priority_is_kept(tmp_path):
    own = {**TASK, "engine_priority": 50}
    tasks = submitted_tasks(tmp_path, SilentControlPlane(), [own, TASK])
    assert [t["engine_priority"] for t in tasks] == [50, -1, 50]


def test_none_and_a_server_without_the_field_leave_it_unset(tmp_path):
    off = submitted_tasks(tmp_path / "off", SilentControlPlane(), [TASK], engine_priority="none")
    assert all("engine_priority" not in t for t in off)
    old = submitted_tasks(tmp_path / "old", SilentControlPlane(fields=("min_policy_version",)), [TASK])
    assert all("engine_priority" not in t for t in old)
    assert all("min_policy_version" in t for t in old)


def test_an_unknown_setting_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="engine_priority must be oldest_first or none, got 'newest'"):
        SchedulerConfig(run_id="r", rollout_batch_size=1, group_size=1, engine_priority="newest")
