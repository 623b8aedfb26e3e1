"""A trainer process for the restart test: runs the scheduler for STEPS steps with a simulated
training step, keeping its own checkpoint (the steps it applied and the groups it trained on).

    python trainer_proc.py STATE_DIR CHECKPOINT STEPS

Environment: POLAR_URL, POLAR_TRAINER_TOKEN, ENGINE_URL, RUN_ID, TASK_JSON; TRAIN_SECONDS (the simulated
step); KILL_AFTER_CHECKPOINT_STEP=S makes it SIGKILL itself right after writing the checkpoint of
step S and before committing it (the worst moment). It prints ``leased S gid,gid`` when a step
starts and ``committed S`` after the commit, for the test to time its own SIGKILLs.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from polar_trainer import PolarClient, engines  # noqa: E402
from polar_trainer.config import SchedulerConfig  # noqa: E402
from polar_trainer.scheduler import GroupScheduler  # noqa: E402
from polar_trainer.state import atomic_write_json  # noqa: E402


def main() -> None:
    state_dir, ckpt_path, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    try:
        with open(ckpt_path, encoding="utf-8") as f:
            ckpt = json.load(f)
    except FileNotFoundError:
        ckpt = {"step": 0, "version": 0, "trained": []}
    cfg = SchedulerConfig(
        run_id=os.environ["RUN_ID"],
        rollout_batch_size=1,
        group_size=2,
        max_async_level=2,
        max_off_policy_steps=100,
        poll_wait_seconds=5,
    )
    client = PolarClient(os.environ["POLAR_URL"], os.environ["POLAR_TRAINER_TOKEN"])
    task = json.loads(os.environ["TASK_JSON"])
    kill_at = int(os.environ.get("KILL_AFTER_CHECKPOINT_STEP", "0"))
    train_seconds = float(os.environ.get("TRAIN_SECONDS", "1.5"))
    engine_url = os.environ["ENGINE_URL"]

    def push(version: str) -> None:
        engines.update_weights_from_disk(engine_url, f"sim-checkpoints/{version}", version)

    sched = GroupScheduler(client, cfg, [task], state_dir, resume_step=ckpt["step"], policy_version=ckpt["version"])
    with sched:
        while ckpt["step"] < steps:
            batch = sched.next_batch(timeout=180)
            print(f"leased {batch.step} {','.join(batch.group_ids)}", flush=True)
            time.sleep(train_seconds)  # the simulated training step
            # The fence around the update: the engine reports the new version (groups submitted
            # from now need it), then the checkpoint holds the step and the version.
            sched.update_weights(push, version=ckpt["version"] + 1)
            ckpt = {
                "step": batch.step,
                "version": ckpt["version"] + 1,
                "trained": ckpt["trained"] + [[batch.step, g] for g in batch.group_ids],
            }
            atomic_write_json(ckpt_path, ckpt)
            if batch.step == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            sched.commit(batch.step)
            print(f"committed {batch.step}", flush=True)
        print(json.dumps({"counters": sched.counters()}), flush=True)


if __name__ == "__main__":
    main()
