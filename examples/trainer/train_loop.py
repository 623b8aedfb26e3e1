#!/usr/bin/env python3
"""A training loop over Polar-TS with the ``polar_trainer`` package: async groups, a fenced weight
update every step, a JSONL export per step, a checkpoint that makes it restartable.

    POLAR_TRAINER_TOKEN=... python3 examples/trainer/train_loop.py --url URL \\
        --task examples/calculator/task.yaml --engine-url http://127.0.0.1:30000 --steps 5 --out runs/demo

``--task`` is one of the project's task files (JSON, or YAML with PyYAML, the package's ``[yaml]``
extra), read with ``polar_trainer.load_task_file``: group ``i`` runs the file's task ``i % n``.
``--group-size`` defaults to the file's ``num_samples``; given, it is every group's size and
replaces the file's ``num_samples`` (said on stderr), as a group is one task of group_size sessions.

Each step: take the next ``--rollout-batch-size`` accepted groups (GRPO advantages set), write them
to ``OUT/rollouts/step-NNNNNN.jsonl``, "train" (a policy-gradient surrogate computed from the
samples, then ``--train-seconds`` of sleep standing in for the optimizer), then the fence: pause the
queue (drain) → every engine loads checkpoint N and reports weight version N → resume with policy
version N; then the checkpoint (``OUT/checkpoint.json``) and the commit. One JSON line per step on
stdout, a summary line at the end. Killed and started again with the same ``--out``, it resumes
after its last checkpoint. The engines here are SGLang servers (or the simulated one): the update
calls ``/update_weights_from_disk`` with ``weight_version``; a real trainer writes the checkpoint
first. Exit 1 on a PolarError / SchedulerError / FenceError / EngineError, 2 on bad usage.
"""

import argparse
import json
import math
import os
import sys
import time

try:
    import polar_trainer  # noqa: F401
except ImportError:  # a checkout without the package installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))

from polar_trainer import EngineError, FenceError, PolarClient, PolarError, SchedulerError, TaskFileError, engines, load_task_file
from polar_trainer.config import SchedulerConfig
from polar_trainer.export import write_batch
from polar_trainer.scheduler import GroupScheduler


def parse_args(argv):
    p = argparse.ArgumentParser(prog="train_loop.py", description="A fenced async training loop over Polar-TS.")
    p.add_argument("--url", required=True, help="the control plane's URL")
    p.add_argument("--task", required=True, help="a task file, JSON or YAML (group i runs its task i %% n)")
    p.add_argument("--engine-url", required=True, help="the inference engines' URLs, comma-separated (each replica)")
    p.add_argument("--out", required=True, help="folder of the run: rollouts/, checkpoint.json, polar-state/")
    p.add_argument("--run-id", default=None, help="names the groups (default: from --out)")
    p.add_argument("--queue", default=None, help="the control plane queue (default: the default queue)")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--rollout-batch-size", type=int, default=2)
    p.add_argument("--group-size", type=int, default=None, help="sessions per group (default: the task file's num_samples, else 2)")
    p.add_argument("--max-async-level", type=int, default=2)
    p.add_argument("--max-off-policy-steps", type=int, default=None, help="default: --max-async-level")
    p.add_argument("--train-seconds", type=float, default=2.0, help="the simulated optimizer step")
    p.add_argument("--timeout", type=float, default=600, help="seconds a step may wait for its groups")
    return p.parse_args(argv)


def surrogate_loss(batch):
    """-mean over trained tokens of advantage × rollout logprob: what a REINFORCE-style step would
    differentiate (here only computed, to show every field a trainer needs is there)."""
    total, n = 0.0, 0
    for s in batch.samples():
        if s.removed:
            continue
        for m, lp in zip(s.loss_mask, s.rollout_logprobs):
            if m:
                total += s.advantage * lp
                n += 1
    return -total / n if n else 0.0


def main(argv):
    args = parse_args(argv)
    token = os.environ.get("POLAR_TRAINER_TOKEN", "")
    if not token:
        print("train_loop: POLAR_TRAINER_TOKEN is not set (the control plane's trainer token)", file=sys.stderr)
        return 2
    try:
        tasks = load_task_file(args.task)
    except TaskFileError as e:
        print(f"train_loop: --task: {e}", file=sys.stderr)
        return 2
    sizes = {t["num_samples"] for t in tasks if "num_samples" in t}
    if args.group_size is None:
        if len(sizes) > 1:
            print(f"train_loop: --task: its tasks' num_samples differ ({sorted(sizes)}); give --group-size", file=sys.stderr)
            return 2
        args.group_size = sizes.pop() if sizes else 2
    elif sizes - {args.group_size}:
        # The scheduler refuses a num_samples other than group_size; this example's flag decides.
        print(f"train_loop: --group-size {args.group_size} replaces the task file's num_samples {sorted(sizes)}", file=sys.stderr)
        tasks = [{**t, "num_samples": args.group_size} for t in tasks]
    engine_urls = [u for u in args.engine_url.split(",") if u]
    os.makedirs(os.path.join(args.out, "rollouts"), exist_ok=True)
    ckpt_path = os.path.join(args.out, "checkpoint.json")
    try:
        with open(ckpt_path, encoding="utf-8") as f:
            ckpt = json.load(f)
    except FileNotFoundError:
        ckpt = {"step": 0, "policy_version": 0}
    run_id = args.run_id or os.path.basename(os.path.abspath(args.out))
    queue = args.queue or "default"

    client = PolarClient(args.url, token)
    cfg = SchedulerConfig(
        run_id=run_id,
        rollout_batch_size=args.rollout_batch_size,
        group_size=args.group_size,
        max_async_level=args.max_async_level,
        max_off_policy_steps=args.max_off_policy_steps,
        queue=args.queue,
    )

    def push_weights(version):
        # Inside the fence: the queue is paused and drained. A real trainer saves its weights to
        # this path first; the engines load them and report `version` from now on.
        fence = client.fence_status(queue).fence
        engines.update_weights_from_disk(engine_urls, os.path.join(args.out, "checkpoints", f"step-{version}"), version)
        push_weights.seen = {"paused": fence.paused, "mode": fence.mode, "engines": engines.weight_versions(engine_urls)}

    try:
        with GroupScheduler(
            client, cfg, tasks, os.path.join(args.out, "polar-state"), resume_step=ckpt["step"], policy_version=ckpt["policy_version"]
        ) as sched:
            while ckpt["step"] < args.steps:
                batch = sched.next_batch(timeout=args.timeout)
                path = os.path.join(args.out, "rollouts", f"step-{batch.step:06d}.jsonl")
                write_batch(path, batch)
                loss = surrogate_loss(batch)
                time.sleep(args.train_seconds)
                fenced = sched.update_weights(push_weights)
                ckpt = {"step": batch.step, "policy_version": sched.policy_version}
                tmp = ckpt_path + ".tmp"
                with open(tmp, "w", encoding="utf-8") as f:
                    json.dump(ckpt, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, ckpt_path)
                sched.commit(batch.step)
                c = sched.counters()
                print(
                    json.dumps(
                        {
                            "step": batch.step,
                            "trained_under": batch.policy_version,
                            "groups": [{"group_id": g.group_id, "version": g.version, "staleness": g.staleness} for g in batch.groups],
                            "loss": loss if math.isfinite(loss) else None,
                            "export": path,
                            "new_version": sched.policy_version,
                            "fence": {**push_weights.seen, "version_after": fenced.fence.policy_version, "paused_after": fenced.fence.paused},
                            "dropped": c["dropped"],
                            "rejected": c["rejected"],
                        }
                    ),
                    flush=True,
                )
            counters = sched.counters()
            sched.close(cancel_in_flight=True)  # the run is over: stop the groups still rolling out
            print(json.dumps({"done": True, "counters": counters}), flush=True)
    except (PolarError, SchedulerError, FenceError, EngineError) as e:
        print(f"train_loop: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
