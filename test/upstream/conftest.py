"""Fixtures of the upstream replay suite: the local stack the vitest side started, and tasks.

The vitest file ``test/e2e/upstream-bridge.test.ts`` starts the stack (control plane without
``polar dev``'s dev mode, with ``POLAR_ALLOW_PRIVATE_CALLBACKS=1``), mints path credentials with
``polar token create --role trainer --path --register`` and passes them here in the environment.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from bridge_calls import CallbackListener  # noqa: E402


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run this suite through test/e2e/upstream-bridge.test.ts")
    return value


@pytest.fixture(scope="session")
def stack() -> dict[str, str]:
    return {
        "root": _env("POLAR_URL").rstrip("/"),
        # What a bridge is configured with: polar_rollout_url, the credential in its path.
        "base": _env("POLAR_BASE_URL").rstrip("/"),
        "revocable": _env("POLAR_REVOCABLE_BASE_URL").rstrip("/"),
        "revocable_name": _env("POLAR_REVOCABLE_NAME"),
        "trainer": _env("POLAR_TRAINER_TOKEN"),
        "admin": _env("POLAR_ADMIN_TOKEN"),
    }


@pytest.fixture(scope="session")
def fence() -> dict[str, Any]:
    """The weight-update fence's own part of the stack: a queue with two real gateways on a
    simulated engine that holds every call a few seconds (an in-flight turn to drain), a base URL
    whose credential is scoped to it, and one scoped to a queue no gateway serves."""
    return {
        "queue": _env("POLAR_FENCE_QUEUE"),
        "base": _env("POLAR_FENCE_BASE_URL").rstrip("/"),
        "engine": _env("POLAR_FENCE_ENGINE_URL").rstrip("/"),
        # [{"node_id", "health", "pid"}]: each gateway's HTTP health URL and its reaper's pid.
        "gateways": json.loads(_env("POLAR_FENCE_GATEWAYS")),
        "empty_queue": _env("POLAR_EMPTY_QUEUE"),
        "empty_base": _env("POLAR_EMPTY_BASE_URL").rstrip("/"),
    }


@pytest.fixture(autouse=True)
def no_control_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as an unconfigured bridge: no ``POLAR_CONTROL_PLANE_TOKEN``."""
    monkeypatch.delenv("POLAR_CONTROL_PLANE_TOKEN", raising=False)


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=httpx.Timeout(60.0)) as c:
        yield c


@pytest.fixture
def listener() -> Iterator[CallbackListener]:
    server = CallbackListener()
    yield server
    server.close()


def task_id(name: str) -> str:
    """A task id as the bridge's template makes them, unique per run."""
    return f"polar-slime-{name}-{int(time.time())}-{uuid.uuid4().hex[:6]}"


def hello_task(
    tid: str,
    *,
    num_samples: int = 1,
    command: str = "node ask.mjs {{INSTRUCTION}}",
    metadata: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """An upstream TaskRequest as a bridge's ``polar_task_template`` renders it.

    The sandbox is Polar-TS's ``local`` runtime (no container on the test machine); the harness is
    ``shell`` running ``examples/hello/ask.mjs``, an OpenAI client of the gateway's proxy; the
    scheduler keys are the ones ``_attach_scheduler_metadata`` adds.
    """
    return {
        "task_id": tid,
        "instruction": "What is 17 * 23?",
        "num_samples": num_samples,
        "timeout_seconds": 120,
        "runtime": {
            "backend": "local",
            "prepare": [{"type": "upload_file", "source": "examples/hello/ask.mjs", "target": "ask.mjs"}],
        },
        "agent": {"harness": "shell", "custom_shell": {"command": command}},
        "evaluator": {"strategy": "session_completed"},
        "metadata": {"group_id": 3, "policy_version": 5, "rollout_step": 5, **(metadata or {})},
        **extra,
    }
