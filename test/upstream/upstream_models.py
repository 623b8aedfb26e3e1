"""Models that mirror upstream Polar's wire models field for field, to validate Polar-TS answers.

Written from the field lists of upstream's ``src/polar/rollout/models.py`` and
``src/polar/trajectory/models.py``, in two versions, because both are in use by trainers:

- ``RELEASE``: the public release (``SessionTiming`` has four fields, ``extra="forbid"``).
- ``LATEST``: the newer upstream files (``SessionTiming`` has ~40 fields, still ``extra="forbid"``;
  ``Trace.reward`` must be finite and not a boolean).

Everything else keeps pydantic's default (unknown keys ignored), as upstream does: that is why
Polar-TS's extra top-level keys (``batch_id``, ``reward``, ``attempt``) pass, and why only
``SessionTiming`` can fail on an extra key. Validation failures here are the failures an upstream
bridge would hit in ``TaskStatus.model_validate`` or its callback listener.

The weight-update fence (``GET /nodes`` and the gateways' ``/admin/inference/*``) is mirrored
stricter than upstream reads it, so that Polar-TS answers with exactly upstream's fields:
``GatewayNodeInfo`` and ``NodeStageMetrics`` (upstream's models, default config there) with
``extra="forbid"``, and ``GenerationStatus``, the dict the newer gateway's ``pause_generation`` /
``resume_generation`` return (no model upstream; the bridge reads ``paused`` with ``is`` and
``inflight`` with ``type(...) is int``, hence strict types), without ``request_timeout_seconds``
(the gateway's engine timeout, which the control plane does not know).
"""

import math
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator


class SessionStatus(str, Enum):
    """Upstream's session statuses (no CANCELLED)."""

    REGISTERED = "REGISTERED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    RUNNING = "RUNNING"
    POST_RUN = "POST_RUN"
    BUILDING = "BUILDING"
    EVALUATING = "EVALUATING"
    COMPLETED = "COMPLETED"
    ERROR = "ERROR"
    TIMEOUT = "TIMEOUT"


def _finite_reward(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("reward must be numeric, not boolean")
    parsed = float(value)
    if not math.isfinite(parsed):
        raise ValueError("reward must be finite")
    return parsed


class ReleaseTrace(BaseModel):
    prompt_ids: list[int] = Field(default_factory=list)
    response_ids: list[int] = Field(default_factory=list)
    loss_mask: list[int] = Field(default_factory=list)
    prompt_messages: list[dict[str, Any]] = Field(default_factory=list)
    response_messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] | None = None
    finish_reason: str | None = None
    response_logprobs: list[float] | None = None
    reward: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("loss_mask")
    @classmethod
    def _mask_values(cls, value: list[int]) -> list[int]:
        if any(int(v) not in (0, 1) for v in value):
            raise ValueError("loss_mask values must be 0 or 1")
        return [int(v) for v in value]

    @model_validator(mode="after")
    def _lengths(self) -> "ReleaseTrace":
        if self.loss_mask and len(self.loss_mask) != len(self.response_ids):
            raise ValueError("loss_mask length must match response_ids length")
        if self.response_logprobs is not None and len(self.response_logprobs) != len(self.response_ids):
            raise ValueError("response_logprobs length must match response_ids length")
        return self


class LatestTrace(ReleaseTrace):
    @field_validator("reward", mode="before")
    @classmethod
    def _reward(cls, value: Any) -> float | None:
        return _finite_reward(value)


# Built in functions (closures), so one definition serves both versions; annotations are
# evaluated when the class is made, hence no `from __future__ import annotations` here.
def _trajectory(trace_model: type[BaseModel], name: str) -> type[BaseModel]:
    class Trajectory(BaseModel):
        status: str
        metadata: dict[str, Any] = Field(default_factory=dict)
        traces: list[trace_model] = Field(default_factory=list)  # type: ignore[valid-type]
        error: str | None = None

        @field_validator("status")
        @classmethod
        def _status(cls, value: str) -> str:
            if value not in {"COMPLETED", "TIMEOUT", "ERROR"}:
                raise ValueError("status must be one of ['COMPLETED', 'ERROR', 'TIMEOUT']")
            return value

    Trajectory.__name__ = name
    return Trajectory


class ReleaseSessionTiming(BaseModel):
    model_config = ConfigDict(extra="forbid")

    register_to_init_queue_ms: float = 0.0
    init_ms: float = 0.0
    run_ms: float = 0.0
    postrun_ms: float = 0.0


class LatestSessionTiming(BaseModel):
    model_config = ConfigDict(extra="forbid")

    register_to_init_queue_ms: float = 0.0
    rollout_dispatch_ms: float = 0.0
    rollout_result_wait_ms: float = 0.0
    rollout_pipeline_e2e_ms: float = 0.0
    init_ms: float = 0.0
    ready_queue_ms: float = 0.0
    run_ms: float = 0.0
    postrun_queue_ms: float = 0.0
    postrun_ms: float = 0.0
    container_start_ms: float = 0.0
    eval_container_start_ms: float = 0.0
    runtime_validation_ms: float = 0.0
    eval_runtime_validation_ms: float = 0.0
    prepare_ms: float = 0.0
    eval_prepare_ms: float = 0.0
    agent_setup_ms: float = 0.0
    agent_exec_ms: float = 0.0
    agent_postprocess_ms: float = 0.0
    build_ms: float = 0.0
    eval_ms: float = 0.0
    postrun_exec_ms: float = 0.0
    runtime_stop_ms: float = 0.0
    e2e_ms: float = 0.0
    runtime_exec_ms: float = 0.0
    runtime_exec_count: int = 0
    runtime_exec_timeout_count: int = 0
    runtime_exec_failure_count: int = 0
    runtime_exec_exception_count: int = 0
    runtime_exec_cancelled_count: int = 0
    runtime_exec_ms_by_category: dict[str, float] = Field(default_factory=dict)
    runtime_exec_count_by_category: dict[str, int] = Field(default_factory=dict)
    mini_swe_command_ms: float = 0.0
    mini_swe_command_count: int = 0
    mini_swe_command_timeout_count: int = 0
    mini_swe_command_failure_count: int = 0
    mini_swe_command_ms_by_category: dict[str, float] = Field(default_factory=dict)
    mini_swe_command_count_by_category: dict[str, int] = Field(default_factory=dict)


@dataclass(frozen=True)
class Models:
    """One version's ``SessionResult``, ``TaskResult`` and ``TaskStatus``."""

    name: str
    SessionResult: type[BaseModel]
    TaskResult: type[BaseModel]
    TaskStatus: type[BaseModel]


def _models(name: str, trace_model: type[BaseModel], timing_model: type[BaseModel]) -> Models:
    trajectory_model = _trajectory(trace_model, f"{name}Trajectory")

    class SessionResult(BaseModel):
        session_id: str
        task_id: str
        status: SessionStatus
        trajectory: trajectory_model  # type: ignore[valid-type]
        timing: timing_model = Field(default_factory=timing_model)  # type: ignore[valid-type]
        node_id: str | None = None
        error: str | None = None
        metadata: dict[str, object] = Field(default_factory=dict)

    class TaskResult(BaseModel):
        task_id: str
        status: str
        results: list[SessionResult]
        result_paths: list[str] = Field(default_factory=list)

    class TaskStatus(BaseModel):
        task_id: str
        status: str
        total_sessions: int
        completed_sessions: int
        results: list[SessionResult] = Field(default_factory=list)
        result_paths: list[str] = Field(default_factory=list)

    return Models(name, SessionResult, TaskResult, TaskStatus)


RELEASE = _models("Release", ReleaseTrace, ReleaseSessionTiming)
LATEST = _models("Latest", LatestTrace, LatestSessionTiming)
BOTH = (RELEASE, LATEST)


def validate_task_status(payload: dict[str, Any]) -> list[BaseModel]:
    """Validates a TaskStatus answer with both versions; returns the parsed models."""
    return [m.TaskStatus.model_validate(payload) for m in BOTH]


def validate_task_result(payload: dict[str, Any]) -> list[BaseModel]:
    """Validates a TaskResult (callback body) with both versions; returns the parsed models."""
    return [m.TaskResult.model_validate(payload) for m in BOTH]


class NodeStageMetrics(BaseModel):
    """Upstream's per-node stage occupancy (``src/polar/rollout/models.py``)."""

    model_config = ConfigDict(extra="forbid")

    init_queue_depth: int = Field(default=0, ge=0)
    init_inflight: int = Field(default=0, ge=0)
    ready_depth: int = Field(default=0, ge=0)
    run_inflight: int = Field(default=0, ge=0)
    postrun_queue_depth: int = Field(default=0, ge=0)
    postrun_inflight: int = Field(default=0, ge=0)


class GatewayNodeInfo(BaseModel):
    """Upstream's row of ``GET /nodes`` and of ``/rollout/status``'s ``nodes.nodes``."""

    model_config = ConfigDict(extra="forbid")

    node_id: str
    gateway_url: str
    max_init_workers: int
    max_run_workers: int
    max_postrun_workers: int
    metrics: NodeStageMetrics = Field(default_factory=NodeStageMetrics)
    dispatch_reservations: int = Field(default=0, ge=0)
    healthy: bool
    draining: bool = False
    heartbeat_interval_seconds: int
    last_heartbeat: datetime


class GenerationStatus(BaseModel):
    """The newer gateway's answer to ``POST /admin/inference/pause|resume`` (pause adds the last two)."""

    model_config = ConfigDict(extra="forbid")

    paused: StrictBool
    drained: StrictBool
    inflight: StrictInt = Field(ge=0)
    base_url: str
    engine: str
    timed_out: StrictBool | None = None
    wait_for_drain: StrictBool | None = None


def validate_nodes(payload: Any) -> list[GatewayNodeInfo]:
    """Validates a ``GET /nodes`` answer (a list of rows)."""
    if not isinstance(payload, list):
        raise ValueError(f"/nodes answered {type(payload).__name__}, not a list")
    return [GatewayNodeInfo.model_validate(row) for row in payload]
