"""The scheduler's ``state.json`` keeps its format (no stack): a file in the shape the scheduler has
always written (typed in the literal below by hand: leased, accepted, given-back and in-flight
groups, the by-reason counters, the tally, ``admission_base``) loads, its leases are offered again
in their order, it is written back unchanged key for key, and a resume gives leases back in the
shape the file has always had (``step`` and ``staleness`` null, ``lease_pos`` and
``lease_version`` kept). A state edited into something else fails naming the key."""

from __future__ import annotations

import json
import time

import pytest
from results import result, with_turn_versions

from polar_trainer.config import SchedulerConfig
from polar_trainer.errors import StateError
from polar_trainer.scheduler import GroupScheduler
from polar_trainer.state import StateStore

TASK = {"instruction": "What is 2 + 3?", "agent": {"harness": "shell", "custom_shell": {"command": "true"}}}


def _body(index: int, cancelled_early: bool = False) -> str:
    gid = f"compat-g{index:06d}"
    early = ', "early_stop_min_usable_sessions": 1' if cancelled_early else ""
    return (
        f'{{"batch_id": "{gid}", "tasks": [{{"instruction": "What is 2 + 3?", "agent": {{"harness": "shell", "custom_shell": {{"command": "true"}}}},'
        f' "task_id": "add-2-3", "num_samples": 2, "metadata": {{"run_id": "compat", "group_id": "{gid}", "group_index": {index},'
        f' "policy_version": 2, "rollout_step": 1}}, "min_policy_version": 2, "engine_priority": -{index}{early}}}]}}'
    )


# state.json as the scheduler wrote it before its state was typed (pretty-printed here; the file is
# compact JSON). Groups 0 and 1 are leased to step 3; 2 was leased to a step a restart gave back;
# 3 is accepted; 4 was cut short by the early stop and is still in flight; 5 is in flight.
SAVED = f"""
{{
  "run_id": "compat",
  "next_index": 6,
  "policy_version": 4,
  "last_step": 3,
  "committed_step": 2,
  "groups": {{
    "compat-g000000": {{"index": 0, "stamp": 2, "state": "leased", "body": {_body(0)}, "cancelled": false,
                        "version": 3, "step": 3, "staleness": 1, "lease_pos": 1, "lease_version": 4}},
    "compat-g000001": {{"index": 1, "stamp": 2, "state": "leased", "body": {_body(1)}, "cancelled": false,
                        "version": 4, "step": 3, "staleness": 0, "lease_pos": 0, "lease_version": 4}},
    "compat-g000002": {{"index": 2, "stamp": 2, "state": "accepted", "body": {_body(2)}, "cancelled": false,
                        "version": 2, "step": null, "staleness": null, "lease_pos": 0, "lease_version": 2}},
    "compat-g000003": {{"index": 3, "stamp": 2, "state": "accepted", "body": {_body(3)}, "cancelled": false, "version": 4}},
    "compat-g000004": {{"index": 4, "stamp": 2, "state": "inflight", "body": {_body(4, cancelled_early=True)}, "cancelled": true}},
    "compat-g000005": {{"index": 5, "stamp": 2, "state": "inflight", "body": {_body(5)}, "cancelled": false}}
  }},
  "accepted_order": ["compat-g000002", "compat-g000003"],
  "tally": {{"mixed": 3, "all_correct": 1, "all_wrong": 0}},
  "counters": {{"submitted": 6, "replayed": 1, "accepted": 4, "consumed": 4, "early_stops": 1,
               "rejected": {{"too_few_completed": 1}}, "dropped": {{"stale": 2}},
               "sessions": {{"trainable:completed": 11, "excluded:cancelled": 1}}, "staleness": {{"0": 3, "1": 3}}}},
  "admission_base": {{"step": 0, "consumed": 0}},
  "format": 1
}}
"""


class IdleControlPlane:
    """Knows every batch (a replayed submit: ``created: false``) and has no new result for any."""

    def supports_task_field(self, name):
        return True

    def submit(self, body):
        return {"created": False}

    def iter_results(self, batch_id, after=0, wait=30, timeout=None, stop=None):
        while stop is not None and not stop():
            time.sleep(0.02)
        yield from ()

    def cancel(self, batch_id):
        return {}

    def cancel_task(self, batch_id, task_id):
        return {}


def _folder(tmp_path, saved: str = SAVED):
    """A state folder holding ``saved`` and a full spool for each finished group (a finished group
    short of results would be read again, so it would not stay accepted or leased)."""
    folder = tmp_path / "state"
    store = StateStore(str(folder))
    with open(store.path, "w", encoding="utf-8") as f:
        f.write(saved)
    for index, version in enumerate([3, 4, 2, 4]):
        gid = f"compat-g{index:06d}"
        for k, reward in enumerate([1, 0]):
            store.spool_append(gid, k + 1, with_turn_versions(result(index=k, reward=reward, batch=gid), [version] * 10))
    return str(folder)


def _sched(folder: str, **kwargs) -> GroupScheduler:
    config = SchedulerConfig(run_id="compat", rollout_batch_size=2, group_size=2, sync_fence_version=False)
    return GroupScheduler(IdleControlPlane(), config, [TASK], folder, **kwargs)


def _saved(folder: str):
    with open(StateStore(folder).path, encoding="utf-8") as f:
        return json.load(f)


def test_a_state_file_of_the_untyped_scheduler_loads_and_is_written_back_key_for_key(tmp_path):
    folder = _folder(tmp_path)
    sched = _sched(folder)  # loads, recovers the groups from their spools and saves
    expected = json.loads(SAVED)
    # json.dumps keeps key order: the same keys, in the same order, with the same values and types.
    assert json.dumps(_saved(folder)) == json.dumps(expected)
    c = sched.counters()
    assert (c["policy_version"], c["step"], c["committed_step"], c["next_index"]) == (4, 3, 2, 6)
    assert (c["in_flight"], c["queued"], c["leased"]) == (2, 2, 2)
    assert (c["submitted"], c["replayed"], c["accepted"], c["consumed"], c["early_stops"]) == (6, 1, 4, 4, 1)
    assert c["dropped"] == {"stale": 2} and c["staleness"] == {"0": 3, "1": 3}
    assert c["tally"] == {"mixed": 3, "all_correct": 1, "all_wrong": 0}


def test_the_loaded_leases_are_offered_again_in_their_order(tmp_path):
    sched = _sched(_folder(tmp_path))
    try:
        batch = sched.next_batch(timeout=5)
    finally:
        sched.close()
    assert batch.step == 3 and batch.policy_version == 4
    assert batch.group_ids == ["compat-g000001", "compat-g000000"]
    assert [g.task_id for g in batch.groups] == ["add-2-3", "add-2-3"]
    assert [g.staleness for g in batch.groups] == [0, 1]


def test_a_resume_gives_leases_back_in_the_shape_the_file_has_always_had(tmp_path):
    folder = _folder(tmp_path)
    _sched(folder, resume_step=2)
    saved = _saved(folder)
    expected = json.loads(SAVED)
    for gid in ("compat-g000000", "compat-g000001"):
        given_back = dict(expected["groups"][gid], state="accepted", step=None, staleness=None)
        assert json.dumps(saved["groups"][gid]) == json.dumps(given_back)
    assert saved["accepted_order"] == ["compat-g000001", "compat-g000000", "compat-g000002", "compat-g000003"]
    assert (saved["committed_step"], saved["last_step"]) == (2, 2)


def test_a_state_of_another_run_or_edited_into_another_shape_is_refused_naming_it(tmp_path):
    with pytest.raises(StateError, match="belongs to run 'other', not 'compat'"):
        _sched(_folder(tmp_path / "a", SAVED.replace('"run_id": "compat"', '"run_id": "other"')))
    with pytest.raises(StateError, match=r"groups\['compat-g000003'\]: 'stamp' must be a number"):
        _sched(_folder(tmp_path / "b", SAVED.replace('"index": 3, "stamp": 2', '"index": 3, "stamp": "2"')))
    with pytest.raises(StateError, match=r"'state' must be one of inflight, accepted, leased, got 'done'"):
        _sched(_folder(tmp_path / "c", SAVED.replace('"state": "inflight", "body": ' + _body(5), '"state": "done", "body": ' + _body(5))))
