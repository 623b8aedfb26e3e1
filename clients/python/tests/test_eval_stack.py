"""Eval mode against the REAL local stack: metrics per dataset, seeds per sample, a second call
for the same run and step replays the same batches and gives the same report."""

from __future__ import annotations

import pytest

from polar_trainer.evaluation import eval_batches, evaluate


def test_batches_and_seeds_are_deterministic():
    t = {"instruction": "x", "agent": {"harness": "shell", "custom_shell": {"command": "true"}}}
    a = eval_batches("ds", [t, t, t], run_id="r", step=2, n_samples=4, seed_base=100, queue="q", max_tasks_per_batch=2)
    assert [b["batch_id"] for b in a] == ["r-eval-ds-2-c0", "r-eval-ds-2-c1"]
    seeds = [task["metadata"]["eval_sampling_seed_base"] for b in a for task in b["tasks"]]
    assert seeds == [100, 104, 108]  # sample j of task i: 100 + 4i + j
    assert a == eval_batches("ds", [t, t, t], run_id="r", step=2, n_samples=4, seed_base=100, queue="q", max_tasks_per_batch=2)
    assert a[0]["queue"] == "q" and a[0]["tasks"][0]["task_id"] == "ds-00000"
    with pytest.raises(ValueError, match="dataset name"):
        eval_batches("bad name", [t], run_id="r", step=0, n_samples=1, seed_base=None, queue=None, max_tasks_per_batch=1)


@pytest.mark.stack
def test_eval_over_two_datasets(stack, run_id):
    c = stack.client()
    datasets = {"calc": [stack.task("calculator")] * 2, "hello": [stack.task("hello")]}
    report = evaluate(c, datasets, run_id=run_id, step=7, n_samples=4, seed_base=1000, timeout=150)
    calc, hello = report.datasets["calc"], report.datasets["hello"]
    assert (calc.tasks, calc.sessions, calc.completed) == (2, 8, 8)
    # The scripted policy fixes the bug in 2 of 4 samples of every group.
    assert calc.mean_reward == 0.5 and calc.success_rate == 0.5 and calc.pass_at_n == 1.0
    assert (hello.sessions, hello.mean_reward, hello.pass_at_n) == (4, 1.0, 1.0)
    assert sorted(r["seed_base"] for r in calc.rows) == [1000] * 4 + [1004] * 4
    m = report.metrics()
    assert m["eval/calc/mean_reward"] == 0.5 and m["eval/hello/sessions"] == 4.0
    again = evaluate(c, datasets, run_id=run_id, step=7, n_samples=4, seed_base=1000, timeout=60)
    assert again.datasets["calc"].rows == calc.rows and again.metrics() == m
