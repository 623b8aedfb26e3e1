"""The slime bridge: config keys, the adapter against a stand-in of slime's ``Sample`` with exactly
slime's fields (``standins/slime``), the reward hooks, the data source and the weight-update hooks
(against the fence stand-in) — units, no server. ``test_slime_stack.py`` runs it end to end."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from types import SimpleNamespace

import pytest
from fence_standin import FenceStandIn
from results import result, trace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "standins"))

from slime.utils.types import Sample  # noqa: E402

from polar_trainer import FenceError  # noqa: E402
from polar_trainer.config import SchedulerConfig  # noqa: E402
from polar_trainer.groups import Group  # noqa: E402
from polar_trainer.samples import classify  # noqa: E402
from polar_trainer.scheduler import GroupScheduler  # noqa: E402
from polar_trainer.slime.adapter import to_slime_samples  # noqa: E402
from polar_trainer.slime.config import BridgeConfig  # noqa: E402
from polar_trainer.slime.data_source import PolarDataSource  # noqa: E402
from polar_trainer.slime.reward import reward_func  # noqa: E402
from polar_trainer.slime.reward_post_process import post_process_rewards  # noqa: E402
from polar_trainer.slime.rollout import Bridge, generate_rollout  # noqa: E402

TASK = {"instruction": "{instruction}", "agent": {"harness": "shell", "custom_shell": {"command": "true"}}}


def args_of(**kw):
    base = dict(polar_rollout_url="http://127.0.0.1:1", polar_trainer_token="t", polar_task_template=TASK, rollout_batch_size=2, n_samples_per_prompt=2, reward_key="score", advantage_estimator="grpo")
    base.update(kw)
    return SimpleNamespace(**base)


def test_config_reads_polar_keys_refuses_unknown_ones_and_warns_for_unused_upstream_keys(caplog):
    cfg = BridgeConfig.from_args(args_of(polar_max_async_level=3, update_weights_interval=2, polar_callback_host="10.0.0.1", polar_min_complete_accept_fraction=0.5, polar_drop_all_keep_groups=True))
    s = cfg.scheduler
    assert (s.max_in_flight, s.max_off_policy_steps, s.min_complete_fraction, s.drop_all_equal_groups) == (6, 5, 0.5, True)
    assert "polar_callback_host is not used" in caplog.text
    with pytest.raises(ValueError, match="unknown key polar_max_asynclevel"):
        BridgeConfig.from_args(args_of(polar_max_asynclevel=3))
    with pytest.raises(ValueError, match="agent"):
        BridgeConfig.from_args(args_of(polar_task_template={"instruction": "x"}))
    with pytest.raises(ValueError, match="polar_weight_update_fence"):
        BridgeConfig.from_args(args_of(polar_weight_update_fence="hold"))
    # The run id is stable for the same prompt data and save folder (a restart finds its state).
    assert BridgeConfig.from_args(args_of(save="/ckpt", prompt_data="p")).scheduler.run_id == BridgeConfig.from_args(args_of(save="/ckpt", prompt_data="p")).scheduler.run_id


def a_group(*sessions, index=5, stamp=2):
    g = Group(group_id=f"run-g{index:06d}", index=index, stamp=stamp)
    for i, kw in enumerate(sessions):
        g.sessions.append(classify(result(index=i, **kw), trajectory_index=i, group_id=g.group_id, group_index=index))
    g.staleness = 1
    return g


def test_the_adapter_fills_slimes_sample_fields():
    g = a_group({"reward": 1, "traces": [trace(reward=1), trace(reward=1, finish_reason="length")]}, {"reward": 0}, {"status": "ERROR", "reward": None, "error": {"kind": "infra", "message": "x"}})
    samples = to_slime_samples(g, args_of(), rollout_id=7, cls=Sample)
    assert all(isinstance(s, Sample) for s in samples) and len(samples) == 4  # 2 traces + 1 + a placeholder
    a, b, c, placeholder = samples
    assert a.rollout_id == b.rollout_id != c.rollout_id != placeholder.rollout_id  # one unit per session
    for s in (a, b, c):
        assert len(s.tokens) > s.response_length > 0
        assert len(s.loss_mask) == len(s.rollout_log_probs) == s.response_length
        assert s.group_index == 5 and s.remove_sample is False and s.weight_versions == ["3"]
    assert (a.status, b.status) == (Sample.Status.COMPLETED, Sample.Status.TRUNCATED)
    assert (a.reward, c.reward) == ({"score": 1.0}, {"score": 0.0})
    assert a.get_reward_value(args_of()) == 1.0
    assert placeholder.remove_sample and placeholder.loss_mask == [0] and placeholder.status == Sample.Status.ABORTED
    meta = a.metadata["polar"]
    assert (meta["accepted_rollout_id"], meta["policy_staleness"], meta["policy_version"], meta["scheduler_group_id"]) == (7, 1, 3, "run-g000005")
    assert a.train_metadata["scheduler_group_id"] == "run-g000005"
    assert len({s.index for s in samples}) == 4
    # Every field the adapter sets is one of slime's.
    names = {f.name for f in dataclasses.fields(Sample)}
    assert {"rollout_id", "weight_versions", "train_metadata", "session_id", "remove_sample"} <= names


def test_slime_v030_gets_group_id_instead_of_rollout_id():
    fields = [(f.name, f.type, f) for f in dataclasses.fields(Sample) if f.name != "rollout_id"]
    Old = dataclasses.make_dataclass("Sample", [(n, t, f) for n, t, f in fields] + [("group_id", "int | None", dataclasses.field(default=None))])
    Old.Status = Sample.Status
    samples = to_slime_samples(a_group({"reward": 1}, {"reward": 0}), args_of(), 0, cls=Old)
    assert samples[0].group_id != samples[1].group_id and not hasattr(samples[0], "rollout_id")


def test_post_process_gives_leave_one_out_advantages_per_trajectory_failed_excluded():
    g = a_group({"reward": 1, "traces": [trace(reward=1), trace(reward=1)]}, {"reward": 0}, {"reward": 1}, {"status": "ERROR", "reward": 0, "error": {"kind": "agent", "message": "x"}})
    samples = to_slime_samples(g, args_of(), 0, cls=Sample)
    raw, adv = post_process_rewards(args_of(disable_grpo_std_normalization=True), samples)
    assert raw == [1.0, 1.0, 0.0, 1.0, 0.0]
    # Trajectory rewards 1, 0, 1 (the failed one is out): baselines 0.5, 1, 0.5.
    assert adv == pytest.approx([0.5, 0.5, -1.0, 0.5, 0.0])
    _, normed = post_process_rewards(args_of(), samples)
    sd = (1 / 3) ** 0.5
    assert normed == pytest.approx([0.5 / (sd + 1e-6)] * 2 + [-1 / (sd + 1e-6), 0.5 / (sd + 1e-6), 0.0])
    same = to_slime_samples(a_group({"reward": 1}, {"reward": 1}), args_of(), 0, cls=Sample)
    assert post_process_rewards(args_of(), same)[1] == [0.0, 0.0]
    assert post_process_rewards(args_of(advantage_estimator="ppo"), same)[1] == [1.0, 1.0]
    assert post_process_rewards(args_of(polar_advantage_baseline="mean", disable_grpo_std_normalization=True), samples)[1] == pytest.approx([1 / 3, 1 / 3, -2 / 3, 1 / 3, 0.0])


def test_reward_func_reads_the_reward_on_the_sample():
    samples = to_slime_samples(a_group({"reward": 1}, {"reward": 0}), args_of(), 0, cls=Sample)
    assert asyncio.run(reward_func(args_of(), samples[0])) == 1.0
    assert asyncio.run(reward_func(args_of(), samples)) == [1.0, 0.0]


def test_data_source_rounds_the_epoch_up_and_maps_group_indices_deterministically(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"input": f"p{i}", "label": str(i), "metadata": {"i": i}}) + "\n" for i in range(5)))
    a = args_of(prompt_data=str(path), label_key="label", rollout_shuffle=True, rollout_seed=3, rollout_batch_size=2, save=str(tmp_path / "save"))
    ds = PolarDataSource(a)
    assert len(ds) == 6 and ds.get_buffer_length() == 6
    epoch0 = [ds.group_prompt(i)["prompt"] for i in range(5)]
    assert sorted(epoch0) == [f"p{i}" for i in range(5)]
    assert [PolarDataSource(a).group_prompt(i)["prompt"] for i in range(10)] == [ds.group_prompt(i)["prompt"] for i in range(10)]
    groups = ds.get_samples(2)
    assert [len(g) for g in groups] == [2, 2] and all(isinstance(s, Sample) for s in groups[0])
    assert groups[0][0].prompt == epoch0[0] and groups[1][0].group_index == 1
    ds.save(4)
    ds2 = PolarDataSource(a)
    ds2.load(4)
    assert ds2.loaded_rollout_id == 4 and ds2.offset == 2


def bridge_on(url: str, fence: str, state_dir: str) -> Bridge:
    b = Bridge.__new__(Bridge)  # the hooks without the admission thread
    b.cfg = BridgeConfig.from_args(args_of(polar_rollout_url=url, polar_trainer_token="tok", polar_weight_update_fence=fence, polar_weight_update_pause_timeout=30))
    from polar_trainer import PolarClient

    b.client = PolarClient(url, "tok", retries=0)
    b.scheduler = GroupScheduler(b.client, SchedulerConfig(run_id="r", rollout_batch_size=1, group_size=1), [TASK], state_dir)
    b.fenced = False
    return b


def test_weight_update_hooks_fence_the_queue_and_set_the_next_version(tmp_path):
    with FenceStandIn("tok") as s:
        import polar_trainer.slime.rollout as rollout

        b = bridge_on(s.url, "drain", str(tmp_path))
        rollout._BRIDGE = b
        try:
            generate_rollout.pause_for_weight_update(SimpleNamespace())
            assert s.states["default"]["paused"] and s.states["default"]["mode"] == "drain"
            assert s.requests[-1][2] == {"mode": "drain", "timeout_seconds": 30.0}
            generate_rollout.resume_after_weight_update(SimpleNamespace())
            assert not s.states["default"]["paused"] and s.states["default"]["policy_version"] == "1"
            assert b.scheduler.policy_version == 1 and b.fenced
        finally:
            rollout._BRIDGE = None
    nodes = [{"node_id": "gpu-1", "drain_seconds": 999}]
    with FenceStandIn("tok", nodes) as s:
        b = bridge_on(s.url, "abort", str(tmp_path / "b"))
        with pytest.raises(FenceError, match="not_drained"):
            b.pause()
        assert not s.states["default"]["paused"]  # undone
    with FenceStandIn("tok") as s:
        b = bridge_on(s.url, "none", str(tmp_path / "c"))
        b.pause()
        b.resume()
        # polar_weight_update_fence: none never pauses, but the queue's version still moves: turns
        # are labelled with it and groups are versioned by those labels.
        assert [(m, p) for m, p, _ in s.requests] == [("POST", "/v1/queues/default/policy_version")]
        assert s.states["default"]["policy_version"] == "1" and not s.states["default"]["paused"]
        assert b.scheduler.policy_version == 1

