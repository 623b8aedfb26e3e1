#!/usr/bin/env python3
"""The trainer side of ``npm run bench:pipeline``: one schedule of the long-tail workload, driven
with the ``polar_trainer`` package against a running stack, measured on the simulated engine.

    python3 bench/pipeline_driver.py CONFIG_JSON      (bench/pipeline.ts builds the config)

Config keys: ``url``, ``token``, ``engine_url``, ``mode`` (``sync`` | ``async``), ``run_id``,
``steps``, ``rollout_batch_size``, ``group_size``, ``max_async_level``, ``max_off_policy_steps``
(null: the package's default), ``admission`` and ``consume_order`` (null: the package's default;
async only), ``max_steps`` (null: none; async only), ``fence_mode`` (``drain`` | ``abort``; async only), ``train_seconds``,
``engine_priority`` (``oldest_first`` | ``none``: the package's option; in ``sync`` mode the
same stamp, −index, set by the driver), ``agent`` (the agent's command line after ``node agent.mjs``, without ``--group``), ``agent_path``
(the agent file, uploaded into each session), ``timeout_seconds``, ``state_dir``.

Modes (same workload, same simulated training step, a fenced weight update each step in both):

* ``sync`` — synchronous batches: submit ``rollout_batch_size`` groups, wait for every session,
  judge the groups (the package's acceptance rules), train, update the weights behind the fence,
  repeat. Nothing rolls out while the trainer trains.
* ``async`` — the package's ``GroupScheduler`` with ``max_async_level``: up to
  ``rollout_batch_size × max_async_level`` groups in flight, admitted as slots free; a step takes the
  first ``rollout_batch_size`` accepted groups; stale groups (more than ``max_off_policy_steps``
  versions behind; by default ``max_async_level``) are dropped.

The update (both modes): ``PolarClient.weight_update`` / ``GroupScheduler.update_weights`` = pause
(drain) → ``/update_weights_from_disk`` with the new version on the engine → resume with it.

Prints ONE JSON line: wall seconds (first submit → last step committed), groups trained and
accepted, the staleness histogram of trained groups, drops and rejections by reason, the per-step
timings (with each step's end and the engine's busy counters then), and the engine's counters over
the same window (``/sim/stats``: busy seconds = time with
at least one request running, running-request seconds, generation tokens, queue seconds).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.request
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "clients", "python", "src"))

from polar_trainer import PolarClient, engines  # noqa: E402
from polar_trainer.advantages import apply as apply_advantages  # noqa: E402
from polar_trainer.config import SchedulerConfig  # noqa: E402
from polar_trainer.groups import Group, SelectionTally, judge  # noqa: E402
from polar_trainer.samples import classify, trajectory_index_of  # noqa: E402
from polar_trainer.scheduler import GroupScheduler  # noqa: E402

QUEUE = "default"


def sim_stats(engine_url: str) -> Dict[str, Any]:
    with urllib.request.urlopen(f"{engine_url}/sim/stats", timeout=30) as r:
        return json.load(r)


def engine_window(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, float]:
    keys = ("busy_seconds", "running_request_seconds", "generation_tokens_total", "finished_total", "queue_seconds_total", "requests_total")
    return {k: after[k] - before[k] for k in keys}


def step_record(cfg: Dict[str, Any], t0: float, s0: float, s1: float, s2: float, s3: float, trained: int) -> Dict[str, Any]:
    """One step's timings (seconds: waiting for groups, training, the fence), its trained groups, and
    when it ended with the engine's counters then (for windows that leave out the first step)."""
    stats = sim_stats(cfg["engine_url"])
    return {
        "wait": s1 - s0,
        "train": s2 - s1,
        "fence": s3 - s2,
        "trained": trained,
        "end": s3 - t0,
        "engine_busy_seconds": stats["busy_seconds"],
        "engine_running_request_seconds": stats["running_request_seconds"],
    }


class Workload:
    """The task of group ``index``: the long-tail agent with its draws keyed by the index, so both
    schedules see group i's sessions do the same work."""

    def __init__(self, cfg: Dict[str, Any]) -> None:
        self.cfg = cfg

    def __call__(self, index: int) -> Dict[str, Any]:
        return {
            "instruction": f"long-tail session of group {index}",
            "timeout_seconds": self.cfg["timeout_seconds"],
            "runtime": {"backend": "local", "prepare": [{"type": "upload_file", "source": self.cfg["agent_path"], "target": "../harness/agent.mjs"}]},
            "agent": {"harness": "shell", "custom_shell": {"command": f"node ../harness/agent.mjs {self.cfg['agent']} --group {index}"}},
            "evaluator": {"strategy": "session_completed"},
            "metadata": {"bench": "pipeline"},
        }


def make_push(cfg: Dict[str, Any]):
    def push(version: str) -> None:
        engines.update_weights_from_disk(cfg["engine_url"], f"bench-checkpoints/{cfg['run_id']}/{version}", version)

    return push


def run_async(cfg: Dict[str, Any], client: PolarClient) -> Dict[str, Any]:
    sc = SchedulerConfig(
        run_id=cfg["run_id"],
        rollout_batch_size=cfg["rollout_batch_size"],
        group_size=cfg["group_size"],
        max_async_level=cfg["max_async_level"],
        max_off_policy_steps=cfg.get("max_off_policy_steps"),
        poll_wait_seconds=20,
        **{k: cfg[k] for k in ("admission", "consume_order", "max_steps", "engine_priority") if cfg.get(k)},
    )
    push = make_push(cfg)
    steps: List[Dict[str, float]] = []
    sched = GroupScheduler(client, sc, Workload(cfg), cfg["state_dir"])
    before = sim_stats(cfg["engine_url"])
    t0 = time.monotonic()
    sched.start()
    for _ in range(cfg["steps"]):
        s0 = time.monotonic()
        batch = sched.next_batch(timeout=3600)
        s1 = time.monotonic()
        time.sleep(cfg["train_seconds"])  # the simulated training step: rollouts go on meanwhile
        s2 = time.monotonic()
        sched.update_weights(push, mode=cfg.get("fence_mode") or "drain")
        s3 = time.monotonic()
        sched.commit(batch.step)
        steps.append(step_record(cfg, t0, s0, s1, s2, s3, len(batch.groups)))
    wall = time.monotonic() - t0
    after = sim_stats(cfg["engine_url"])
    c = sched.counters()
    sched.close(cancel_in_flight=True)
    return {
        "wall_seconds": wall,
        "trained_groups": c["consumed"],
        "accepted_groups": c["accepted"],
        "staleness": c["staleness"],
        "dropped": c["dropped"],
        "rejected": c["rejected"],
        "sessions": c["sessions"],
        "steps": steps,
        "engine": engine_window(before, after),
    }


def read_group(client: PolarClient, gid: str, index: int, stamp: int, out: Dict[str, Group]) -> None:
    g = Group(group_id=gid, index=index, stamp=stamp, task_id=gid)
    for seq, result in client.iter_results(gid, wait=20):
        g.sessions.append(classify(result, trajectory_index=trajectory_index_of(str(result["session_id"]), len(g.sessions)), group_id=gid, group_index=index))
    g.sessions.sort(key=lambda o: o.trajectory_index)
    out[gid] = g


def run_sync(cfg: Dict[str, Any], client: PolarClient) -> Dict[str, Any]:
    sc = SchedulerConfig(run_id=cfg["run_id"], rollout_batch_size=cfg["rollout_batch_size"], group_size=cfg["group_size"])
    gcfg, tally = sc.groups, SelectionTally()
    workload, push = Workload(cfg), make_push(cfg)
    version, index = 0, 0
    client.set_policy_version(QUEUE, version)  # as the scheduler does at start
    trained, staleness, rejected, sessions = 0, {}, {}, {}
    steps: List[Dict[str, float]] = []
    before = sim_stats(cfg["engine_url"])
    t0 = time.monotonic()
    for _ in range(cfg["steps"]):
        s0 = time.monotonic()
        gids = []
        for _ in range(cfg["rollout_batch_size"]):
            gid = sc.group_id(index)
            spec = dict(workload(index), task_id=gid, num_samples=cfg["group_size"], min_policy_version=version)
            if cfg.get("engine_priority", "oldest_first") == "oldest_first":
                spec["engine_priority"] = -index  # as the package stamps it
            spec["metadata"] = {**spec["metadata"], "policy_version": version, "group_index": index}
            client.submit({"batch_id": gid, "tasks": [spec]})
            gids.append((gid, index))
            index += 1
        groups: Dict[str, Group] = {}
        readers = [threading.Thread(target=read_group, args=(client, gid, i, version, groups)) for gid, i in gids]
        for t in readers:
            t.start()
        for t in readers:
            t.join()  # the batch barrier: wait for every session of every group
        s1 = time.monotonic()
        step_trained = 0
        for gid, _ in gids:
            g = groups[gid]
            for o in g.sessions:
                sessions[f"{o.kind}:{o.reason}"] = sessions.get(f"{o.kind}:{o.reason}", 0) + 1
            v = judge(g, gcfg, tally)
            if v.accepted:
                apply_advantages(g, sc.advantage, sc.normalize_std)
                trained += 1
                step_trained += 1
                lag = str(version - g.version)
                staleness[lag] = staleness.get(lag, 0) + 1
            else:
                rejected[v.reason or "unknown"] = rejected.get(v.reason or "unknown", 0) + 1
        time.sleep(cfg["train_seconds"])  # the simulated training step: nothing rolls out
        s2 = time.monotonic()
        client.weight_update(QUEUE, version + 1, push)
        version += 1
        s3 = time.monotonic()
        steps.append(step_record(cfg, t0, s0, s1, s2, s3, step_trained))
    wall = time.monotonic() - t0
    after = sim_stats(cfg["engine_url"])
    return {
        "wall_seconds": wall,
        "trained_groups": trained,
        "accepted_groups": trained,
        "staleness": staleness,
        "dropped": {},
        "rejected": rejected,
        "sessions": sessions,
        "steps": steps,
        "engine": engine_window(before, after),
    }


def main() -> None:
    cfg = json.loads(sys.argv[1])
    client = PolarClient(cfg["url"], cfg["token"])
    out = run_async(cfg, client) if cfg["mode"] == "async" else run_sync(cfg, client)
    print(json.dumps({"mode": cfg["mode"], **out}), flush=True)


if __name__ == "__main__":
    main()
