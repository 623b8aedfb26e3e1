#!/usr/bin/env python3
"""Submit one batch and print one JSON line per result, with the ``polar_trainer`` package.

    POLAR_TRAINER_TOKEN=... python3 examples/trainer/polar_client.py URL TASK.json

TASK.json is a batch (``{"batch_id"?, "queue"?, "tasks": [...]}``) or one task spec. The package is
``clients/python`` (``pip install ./clients/python``); run from a checkout, this script finds it
there when it is not installed. Exit 1 on a PolarError, 2 on bad usage.
"""

import json
import os
import sys

try:
    import polar_trainer  # noqa: F401
except ImportError:  # a checkout without the package installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))

from polar_trainer import PolarClient, PolarError
from polar_trainer.samples import classify, trajectory_index_of


def main(argv):
    if len(argv) != 2:
        print("usage: polar_client.py URL TASK.json   (token from POLAR_TRAINER_TOKEN)", file=sys.stderr)
        return 2
    token = os.environ.get("POLAR_TRAINER_TOKEN", "")
    if not token:
        print("polar_client: POLAR_TRAINER_TOKEN is not set (the control plane's trainer token)", file=sys.stderr)
        return 2
    url, task_file = argv
    try:
        with open(task_file, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"polar_client: cannot read TASK.json: {e}", file=sys.stderr)
        return 2
    batch = doc if isinstance(doc, dict) and "tasks" in doc else {"tasks": [doc]}
    client = PolarClient(url, token)
    try:
        created = client.submit(batch)
        print(f"polar_client: batch {created['batch_id']} on queue {created['queue']}: {created['sessions']} sessions", file=sys.stderr)
        for seq, result in client.iter_results(created["batch_id"]):
            outcome = classify(result, trajectory_index=trajectory_index_of(result["session_id"], 0))
            line = {
                "seq": seq,
                "session_id": result["session_id"],
                "task_id": result["task_id"],
                "status": result["status"],
                "reward": result["reward"],
                "kind": outcome.kind,
                "traces": len(outcome.samples),
                "tokens": sum(len(s.tokens) for s in outcome.samples),
                "trained_tokens": sum(s.trainable_tokens for s in outcome.samples),
            }
            print(json.dumps(line), flush=True)
    except PolarError as e:
        print(f"polar_client: PolarError {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
