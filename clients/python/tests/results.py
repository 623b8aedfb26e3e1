"""Session results for the unit tests, derived from a real one.

``fixtures/calculator-result.json`` is a result the local stack returned for the calculator task
(token mode, ``conversation`` builder, every turn under policy version "3"); only its message texts
were elided. The helpers copy it and change what a test is about.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Dict, List, Optional

with open(os.path.join(os.path.dirname(__file__), "fixtures", "calculator-result.json"), encoding="utf-8") as f:
    REAL: Dict[str, Any] = json.load(f)


def result(
    index: int = 0,
    reward: Any = 1,
    status: str = "COMPLETED",
    error: Optional[Dict[str, Any]] = None,
    batch: str = "run-g000000",
    traj_meta: Optional[Dict[str, Any]] = None,
    traces: Optional[List[Dict[str, Any]]] = None,
) -> Dict[str, Any]:
    r = copy.deepcopy(REAL)
    r["session_id"] = f"{batch}.0.{index}"
    r["batch_id"] = batch
    r["status"] = status
    r["reward"] = reward
    r["error"] = error
    if traj_meta:
        r["trajectory"]["metadata"].update(traj_meta)
    if traces is not None:
        r["trajectory"]["traces"] = traces
    else:
        # The gateway puts the outcome reward on every trace (unless the evaluator gave per-trace ones).
        for t in r["trajectory"]["traces"]:
            t["reward"] = reward
    return r


def trace(**changes: Any) -> Dict[str, Any]:
    t = copy.deepcopy(REAL["trajectory"]["traces"][0])
    t.update(changes)
    return t


def with_turn_versions(r: Dict[str, Any], versions: List[Any]) -> Dict[str, Any]:
    turns = r["trajectory"]["traces"][0]["metadata"]["turns"]
    for turn, v in zip(turns, versions):
        turn["policy_version"] = v
    return r
