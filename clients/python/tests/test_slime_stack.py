"""The slime bridge end to end against the REAL local stack, through slime's call pattern (the
stand-in's ``call_rollout_fn``): two rollouts, the reward hooks, a weight update between them
through upstream's pause/resume hooks and the control plane's fence (drain), a crash before the
checkpoint of rollout 1 (the restarted bridge gets the same groups back), and eval mode."""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "standins"))

from slime.rollout.base_types import RolloutFnEvalOutput, RolloutFnTrainOutput, call_rollout_fn  # noqa: E402
from slime.utils.types import Sample  # noqa: E402

from polar_trainer.slime import rollout  # noqa: E402
from polar_trainer.slime.data_source import PolarDataSource  # noqa: E402
from polar_trainer.slime.reward import reward_func  # noqa: E402
from polar_trainer.slime.reward_post_process import post_process_rewards  # noqa: E402

pytestmark = pytest.mark.stack


@pytest.fixture
def args(stack, tmp_path, run_id):
    calc = stack.task("calculator")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"input": calc["instruction"], "metadata": {"n": i}}) + "\n" for i in range(3)))
    template = {k: v for k, v in calc.items() if k != "instruction"}
    template["metadata"] = {"prompt_n": "{sample.metadata.n}", "example": "calculator"}
    yield SimpleNamespace(
        polar_rollout_url=stack.url,
        polar_trainer_token=stack.tokens["trainer"],
        polar_run_id=run_id,
        polar_task_template=template,
        polar_weight_update_fence="drain",
        polar_weight_update_pause_timeout=60,
        polar_max_async_level=2,
        prompt_data=str(prompts),
        eval_prompt_data=["calc", str(prompts)],
        n_samples_per_eval_prompt=2,
        rollout_batch_size=2,
        n_samples_per_prompt=2,
        reward_key="score",
        advantage_estimator="grpo",
        save=str(tmp_path / "save"),
    )
    rollout.reset()


def test_two_rollouts_a_fenced_weight_update_a_crash_before_the_checkpoint_and_eval(stack, args):
    ds = PolarDataSource(args)
    out0 = call_rollout_fn(rollout.generate_rollout, args, 0, ds, evaluation=False)
    assert isinstance(out0, RolloutFnTrainOutput) and len(out0.samples) == 2
    for group in out0.samples:
        assert len(group) == 2 and all(isinstance(s, Sample) for s in group)
        assert sorted(s.reward["score"] for s in group) == [0.0, 1.0]
        for s in group:
            assert len(s.loss_mask) == len(s.rollout_log_probs) == s.response_length > 0
            assert s.status in (Sample.Status.COMPLETED, Sample.Status.TRUNCATED)
            assert s.metadata["polar"]["accepted_rollout_id"] == 0
    flat = [s for g in out0.samples for s in g]
    import asyncio

    assert asyncio.run(reward_func(args, flat)) == [s.reward["score"] for s in flat]
    raw, adv = post_process_rewards(args, flat)
    # Per group [1, 0]: leave-one-out differences +1 / -1 over the shared std of [1, 0] (0.707).
    a = 1 / (2**-0.5 + 1e-6)
    assert sorted(adv) == pytest.approx([-a, -a, a, a])
    assert out0.metrics["polar/policy_version"] == 0.0
    assert {v for g in out0.samples for s in g for v in s.weight_versions} == {"0"}
    ds.save(0)  # slime's checkpoint of rollout 0: its groups are consumed

    # slime's weight sync between rollouts, through upstream's hooks and the REAL fence: the queue
    # is paused (drained) while slime loads weights into the engine with version "1".
    client = stack.client()
    rollout.generate_rollout.pause_for_weight_update(args)
    paused = client.fence_status("default")
    assert paused.fence.paused and paused.fence.mode == "drain" and all(n.paused and n.inflight == 0 for n in paused.nodes)
    stack.push_weights("1")
    rollout.generate_rollout.resume_after_weight_update(args)
    resumed = client.fence_status("default")
    assert not resumed.fence.paused and resumed.fence.policy_version == "1"
    assert {n.policy_version for n in resumed.nodes} == {"1"}

    out1 = call_rollout_fn(rollout.generate_rollout, args, 1, ds, evaluation=False)
    ids0 = {s.metadata["polar"]["scheduler_group_id"] for g in out0.samples for s in g}
    ids1 = [g[0].metadata["polar"]["scheduler_group_id"] for g in out1.samples]
    assert not ids0 & set(ids1)
    assert out1.metrics["polar/policy_version"] == 1.0
    for g in out1.samples:
        # Groups sampled before the update are one version behind (within polar_max_off_policy_steps).
        meta = g[0].metadata["polar"]
        assert meta["policy_staleness"] == 1 - meta["policy_version"]
        assert {v for s in g for v in s.weight_versions} <= {"0", "1"}

    # The trainer dies before its checkpoint of rollout 1; slime restarts from rollout 0's.
    rollout.reset()
    ds2 = PolarDataSource(args)
    ds2.load(0)
    again = call_rollout_fn(rollout.generate_rollout, args, 1, ds2, evaluation=False)
    assert [g[0].metadata["polar"]["scheduler_group_id"] for g in again.samples] == ids1

    ev = call_rollout_fn(rollout.generate_rollout, args, 1, ds2, evaluation=True)
    assert isinstance(ev, RolloutFnEvalOutput)
    calc = ev.data["calc"]
    assert len(calc["rewards"]) == 6, ev.metrics
    assert len(calc["rewards"]) == 6 and len(calc["samples"]) == 6 and calc["truncated"] == [False] * 6
    assert ev.metrics["polar/eval/calc/tasks"] == 3.0
