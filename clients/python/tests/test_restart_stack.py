"""A trainer SIGKILLed mid-run and restarted loses nothing: it resumes from its saved state,
resubmits no accepted group, trains on no group twice, and every group is accounted for.

The trainer is a real process (``trainer_proc.py``) against the REAL local stack. It is killed
three times: in the middle of a training step (leased, not committed), while it waits for
rollouts (groups in flight), and right after its checkpoint and before its commit (it kills itself).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from polar_trainer.state import StateStore

pytestmark = pytest.mark.stack

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 5


def start(stack, run_id, state_dir, ckpt, **env):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "trainer_proc.py"), state_dir, ckpt, str(STEPS)],
        env={
            **os.environ,
            "POLAR_URL": stack.url,
            "POLAR_TRAINER_TOKEN": stack.tokens["trainer"],
            "ENGINE_URL": stack.engine_url,
            "RUN_ID": run_id,
            "TASK_JSON": json.dumps(stack.task("calculator")),
            **env,
        },
        stdout=subprocess.PIPE,
        text=True,
    )


def read_until(proc, prefix, timeout=200):
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if line.startswith(prefix):
            return lines
    raise AssertionError(f"no line {prefix!r} (got {lines}, exit {proc.poll()})")


def test_a_trainer_killed_three_times_loses_no_group_and_trains_none_twice(stack, run_id, state_dir, tmp_path):
    ckpt = str(tmp_path / "trainer.json")

    # 1. Killed in the middle of step 2 (leased, not committed): the restart gets step 2 back.
    p = start(stack, run_id, state_dir, ckpt, TRAIN_SECONDS="2")
    lines = read_until(p, "leased 2 ")
    leased_2 = lines[-1].split()[2]
    p.send_signal(signal.SIGKILL)
    p.wait()

    # 2. Killed while it waits for step 4's groups (groups in flight).
    p = start(stack, run_id, state_dir, ckpt, TRAIN_SECONDS="0.2")
    lines = read_until(p, "leased 2 ")
    assert lines[-1].split()[2] == leased_2, "the uncommitted step must come back with the same groups"
    read_until(p, "committed 3")
    p.send_signal(signal.SIGKILL)
    p.wait()

    # 3. Kills itself after its checkpoint of step 4 and before the commit.
    p = start(stack, run_id, state_dir, ckpt, TRAIN_SECONDS="0.2", KILL_AFTER_CHECKPOINT_STEP="4")
    read_until(p, "leased 4 ")
    assert p.wait(timeout=60) == -signal.SIGKILL

    # Restart: resume_step=4 from the checkpoint: step 4 is not trained again.
    p = start(stack, run_id, state_dir, ckpt, TRAIN_SECONDS="0.2")
    out = p.communicate(timeout=300)[0].strip().split("\n")
    assert p.returncode == 0, out
    assert [ln for ln in out if ln.startswith("leased")] == [ln for ln in out if ln.startswith("leased 5 ")]
    counters = json.loads(out[-1])["counters"]

    with open(ckpt, encoding="utf-8") as f:
        trained = json.load(f)["trained"]
    steps = [s for s, _ in trained]
    gids = [g for _, g in trained]
    assert steps == [1, 2, 3, 4, 5]
    assert len(set(gids)) == len(gids), "a group was trained twice"

    events = StateStore(state_dir).audit_events()
    created = [e["group_id"] for e in events if e["event"] == "submit" and e["created"]]
    assert len(created) == len(set(created)), "a group was created twice"
    accepted_at = {}
    for i, e in enumerate(events):
        if e["event"] == "accept":
            accepted_at.setdefault(e["group_id"], i)
        if e["event"] == "submit":
            assert e["group_id"] not in accepted_at, f"{e['group_id']} resubmitted after it was accepted"
    assert any(e["event"] == "submit" and not e["created"] for e in events), "the kill while waiting should leave groups to replay"

    # Every group ever admitted is trained, rejected/dropped (counted), or still held by the state.
    state = StateStore(state_dir).load()
    held = set(state["groups"])
    ended = {e["group_id"] for e in events if e["event"] in ("reject", "drop")}
    admitted = {f"{run_id}-g{i:06d}" for i in range(state["next_index"])}
    assert admitted == set(gids) | ended | held
    assert not (set(gids) & held) and not (set(gids) & ended)
    assert state["committed_step"] == STEPS and counters["committed_step"] == STEPS
    assert sum(counters["rejected"].values()) + sum(counters["dropped"].values()) == len(ended)
