"""Polar-TS for trainers: the client, the weight-update fence, the async group scheduler, samples,
advantages, JSONL export, off-policy correction inputs (``offpolicy``), eval mode and a slime
bridge. Standard library only.

Example::

    from polar_trainer import PolarClient, load_task_file
    client = PolarClient("http://127.0.0.1:8787", token)
    tasks = load_task_file("examples/hello/task.yaml")
"""

from .client import PolarClient
from .errors import (
    BadRequest,
    BadResponse,
    Conflict,
    EngineError,
    FenceError,
    Forbidden,
    NotConfigured,
    NotFound,
    PayloadTooLarge,
    PolarError,
    RateLimited,
    SchedulerError,
    ServerError,
    ServerUnavailable,
    StateError,
    Unauthorized,
    Unreachable,
    error_from_response,
)
from .fence import FenceResult, FenceState, NodeAck, weight_update
from .tasks import TaskFileError, load_task_file

__version__ = "0.1.0"

__all__ = [
    "BadRequest",
    "BadResponse",
    "Conflict",
    "EngineError",
    "FenceError",
    "FenceResult",
    "FenceState",
    "Forbidden",
    "NodeAck",
    "NotConfigured",
    "NotFound",
    "PayloadTooLarge",
    "PolarClient",
    "PolarError",
    "RateLimited",
    "SchedulerError",
    "ServerError",
    "ServerUnavailable",
    "StateError",
    "TaskFileError",
    "Unauthorized",
    "Unreachable",
    "error_from_response",
    "load_task_file",
    "weight_update",
]
