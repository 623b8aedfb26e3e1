"""Shared fixtures. The package is imported from ``src/`` when it is not installed.

``stack`` is the REAL local stack (control plane in ``wrangler dev``, the simulated engine, one
gateway in token mode): ``POLAR_STACK_JSON`` may hand in one that is already running (the line
``scripts/stack-json.ts`` prints); otherwise the fixture starts ``scripts/stack-json.ts`` with node
and stops it by closing its standard input. ``free_queue`` in that line names a queue served by a
gateway of its own (``stack.free_queue``), ``gateway_queues`` the queue of each gateway. Tests that need it are marked ``stack`` and are
skipped, with the reason, where node or the repository's node_modules are missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from typing import Any, Dict, Optional

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PACKAGE))
sys.path.insert(0, os.path.join(PACKAGE, "src"))
sys.path.insert(0, HERE)

from polar_trainer import PolarClient, engines  # noqa: E402

#: More run slots than the default 2, so groups overlap as they would on a real fleet.
GATEWAY_ARGS = ["--gateway-arg=--max-run=4", "--gateway-arg=--max-init=4", "--gateway-arg=--max-postrun=4"]


def _node_problem() -> str | None:
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not os.path.isdir(os.path.join(REPO, "node_modules", "tsx")):
        return "the repository's node_modules are not installed (npm ci)"
    return None


class Stack:
    """The running stack: URL, tokens, and helpers to build tasks from the repository's examples."""

    def __init__(self, info: Dict[str, Any]) -> None:
        self.info = info
        self.url: str = info["url"]
        self.tokens: Dict[str, str] = info["tokens"]
        self.engine_url: str = info["engine_url"]
        #: A queue with its own gateway (so its own fence), for runs that must not see another
        #: suite's version changes; None (the default queue) when the stack has one gateway.
        self.free_queue: Optional[str] = info.get("free_queue")
        queues = info.get("gateway_queues") or ["default"] * len(info["gateways"])
        #: The gateways that serve the default queue.
        self.default_gateways = [g for g, q in zip(info["gateways"], queues) if q == "default"]
        self._tasks: Dict[str, Dict[str, Any]] = {}

    def client(self, token: str | None = None) -> PolarClient:
        return PolarClient(self.url, token or self.tokens["trainer"])

    def admin(self) -> PolarClient:
        return PolarClient(self.url, self.tokens["admin"])

    def task(self, example: str) -> Dict[str, Any]:
        """The task of ``examples/<example>/task.yaml`` as a dict (read by the repository's own
        task-file loader, so YAML anchors and checks are the CLI's)."""
        if example not in self._tasks:
            script = (
                'import {loadTaskFile} from "./cli/task-file.ts";'
                f'const b = loadTaskFile("examples/{example}/task.yaml", {{batchId: "x"}});'
                "console.log(JSON.stringify(b.tasks[0]));"
            )
            out = subprocess.run(["node", "--import", "tsx", "-e", script], cwd=REPO, check=True, capture_output=True, text=True, timeout=120)
            task = json.loads(out.stdout)
            for key in ("task_id", "num_samples"):
                task.pop(key, None)
            self._tasks[example] = task
        return json.loads(json.dumps(self._tasks[example]))

    def push_weights(self, version: str) -> None:
        """A trainer's update function: the simulated engine "loads" a checkpoint and reports
        ``version`` (what ``min_policy_version`` is checked against)."""
        engines.update_weights_from_disk(self.engine_url, f"sim-checkpoints/{version}", version)


@pytest.fixture(scope="session")
def stack():
    given = os.environ.get("POLAR_STACK_JSON")
    if given:
        yield Stack(json.loads(given))
        return
    problem = _node_problem()
    if problem:
        pytest.skip(f"the local stack needs node: {problem}")
    proc = subprocess.Popen(
        ["node", "--import", "tsx", "scripts/stack-json.ts", "--engine", "sglang", *GATEWAY_ARGS],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line:
            raise RuntimeError(f"scripts/stack-json.ts exited with {proc.wait(timeout=30)} before printing the stack")
        yield Stack(json.loads(line))
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def run_id() -> str:
    """A fresh run id per test (batch ids are global on the control plane)."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def state_dir():
    d = tempfile.mkdtemp(prefix="polar-sched-")
    yield d
    shutil.rmtree(d, ignore_errors=True)
