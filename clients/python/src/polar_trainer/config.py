"""The scheduler's configuration (one dataclass, checked when built).

Example::

    cfg = SchedulerConfig(run_id="grpo-run1", rollout_batch_size=8, group_size=4, max_async_level=2)
    cfg.max_in_flight        # 16 groups: the cap with admission="in_flight"
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

from .groups import GroupConfig

_IDENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")

#: The control plane's limit on a batch id; a group id is ``{run_id}-g{index:06d}`` (8+ more chars).
MAX_RUN_ID_CHARS = 80


@dataclass
class SchedulerConfig:
    """What the async group scheduler does.

    Attributes:
        run_id: names the run; every group's batch id is ``{run_id}-g{index:06d}``, so a restarted
            trainer resubmits the same ids (the control plane's submit is idempotent).
        rollout_batch_size: groups per training step.
        group_size: sessions per group (the task's ``num_samples``; the GRPO group).
        max_async_level: with ``admission="in_flight"``, groups owned at once (in flight +
            accepted and not yet taken) are at most ``rollout_batch_size × max_async_level``; the
            default of ``max_off_policy_steps``.
        max_off_policy_steps: a group whose version is more than this many versions behind the
            current one when a step takes it is dropped (``stale``); default ``max_async_level``.
        admission: when a new group is admitted. ``in_flight``: while fewer than
            ``rollout_batch_size × max_async_level`` groups are owned. ``staleness`` (AReaL-style,
            by staleness at consumption): while the groups trained, leased and owned since the run
            started number fewer than ``(steps committed + max_off_policy_steps + 1) ×
            rollout_batch_size``, so a group admitted now is taken by one of the next
            ``max_off_policy_steps + 1`` steps when steps take the oldest first (within the bound
            with one update a step); at most ``rollout_batch_size × (max_off_policy_steps + 1)``
            groups are then owned, and ``max_async_level`` only sets the default bound.
        consume_order: which accepted groups a step takes. ``accepted``: in acceptance order.
            ``oldest``: the oldest version first (then the lowest index), so the group closest to
            the staleness bound is trained before it must be dropped.
        queue: the control plane queue (None: the server's default queue, ``default``).
        advantage: ``grpo``, ``loo`` (leave-one-trajectory-out) or ``none``.
        normalize_std: divide by the shared group std.
        min_complete_fraction: a group needs ``ceil(group_size × f)`` trainable sessions (at least
            1); default 0 (one is enough, and no early stop).
        early_stop_grace_sessions: with f > 0, the stragglers are cancelled once
            ``min(n, ceil(n·f) + grace)`` sessions are usable; default 2.
        drop_all_wrong_groups: drop a group whose every trajectory is below
            ``correct_threshold``; default False.
        drop_all_equal_groups: drop a group whose trajectories all have one reward (all
            advantages 0); default False.
        balance_all_correct_groups: drop an all-correct group while the run has accepted as many
            all-correct groups as mixed ones; default False.
        correct_threshold: the reward from which a trajectory is correct; default 1.0.
        max_trajectory_tokens: cut longer traces to a causal prefix of this many tokens; default
            None (no cut). These are the rules of :mod:`polar_trainer.groups`.
        stamp_min_policy_version: set the task field ``min_policy_version`` to the group's version;
            None = when the server's schema has the field.
        engine_priority: ``oldest_first`` sets each group's task field ``engine_priority`` to
            minus its index, so an engine that schedules by priority runs the oldest group's model
            calls first (a long-tail session of an old group is not starved by newer groups before
            the staleness bound drops it); a task's own ``engine_priority`` is kept. ``none``:
            not set. Where the engine does not schedule by priority the gateway does not send it
            (docs/engines.md, "Request priority"); a control plane without the field gets none.
        sync_fence_version: at start, set the queue's fence version to the scheduler's when they
            differ (the fence labels each turn; groups are versioned by those labels).
        results_transport: ``poll`` (long-poll by cursor) or ``sse``.
        poll_wait_seconds: the long-poll's ``wait``.
        max_groups: stop admitting after this many groups (None: as long as the task source gives).
        max_steps: the run trains this many steps: no group is admitted once the groups trained,
            leased and owned cover ``max_steps × rollout_batch_size`` (a rejected or dropped group
            is replaced), so no engine time goes to groups the run would never train; None: no end.
        reward_fn: the session's reward from its result (default: the result's own rewards).
        max_unusable_groups: this many groups in a row with no trainable session (a task that
            cannot work: a bad grader command, a harness that fails at once) stop the scheduler
            with an error naming the sessions' failure, instead of admitting groups forever.

    Example::

        SchedulerConfig(run_id="r", rollout_batch_size=2, group_size=4, min_complete_fraction=0.5)
    """

    run_id: str
    rollout_batch_size: int
    group_size: int
    max_async_level: int = 2
    max_off_policy_steps: Optional[int] = None
    admission: str = "in_flight"
    consume_order: str = "accepted"
    queue: Optional[str] = None
    advantage: str = "grpo"
    normalize_std: bool = True
    min_complete_fraction: float = 0.0
    early_stop_grace_sessions: int = 2
    drop_all_wrong_groups: bool = False
    drop_all_equal_groups: bool = False
    balance_all_correct_groups: bool = False
    correct_threshold: float = 1.0
    max_trajectory_tokens: Optional[int] = None
    stamp_min_policy_version: Optional[bool] = None
    engine_priority: str = "oldest_first"
    sync_fence_version: bool = True
    results_transport: str = "poll"
    poll_wait_seconds: int = 20
    max_groups: Optional[int] = None
    max_steps: Optional[int] = None
    reward_fn: Optional[Callable[[Dict[str, Any]], Any]] = field(default=None, repr=False)
    max_unusable_groups: int = 20

    def __post_init__(self) -> None:
        if not isinstance(self.run_id, str) or not _IDENT.match(self.run_id) or len(self.run_id) > MAX_RUN_ID_CHARS:
            raise ValueError(f"run_id must match {_IDENT.pattern} and have at most {MAX_RUN_ID_CHARS} characters, got {self.run_id!r}")
        for name in ("rollout_batch_size", "group_size", "max_async_level"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if self.max_off_policy_steps is None:
            self.max_off_policy_steps = self.max_async_level
        if not isinstance(self.max_off_policy_steps, int) or self.max_off_policy_steps < 0:
            raise ValueError(f"max_off_policy_steps must be an integer >= 0, got {self.max_off_policy_steps!r}")
        if self.admission not in ("in_flight", "staleness"):
            raise ValueError(f"admission must be in_flight or staleness, got {self.admission!r}")
        if self.consume_order not in ("accepted", "oldest"):
            raise ValueError(f"consume_order must be accepted or oldest, got {self.consume_order!r}")
        if self.engine_priority not in ("oldest_first", "none"):
            raise ValueError(f"engine_priority must be oldest_first or none, got {self.engine_priority!r}")
        if self.queue is not None and not _IDENT.match(self.queue):
            raise ValueError(f"queue must match {_IDENT.pattern}, got {self.queue!r}")
        if self.advantage not in ("grpo", "loo", "none"):
            raise ValueError(f"advantage must be grpo, loo or none, got {self.advantage!r}")
        if self.results_transport not in ("poll", "sse"):
            raise ValueError(f"results_transport must be poll or sse, got {self.results_transport!r}")
        if not isinstance(self.poll_wait_seconds, int) or not 1 <= self.poll_wait_seconds <= 60:
            raise ValueError(f"poll_wait_seconds must be an integer from 1 to 60, got {self.poll_wait_seconds!r}")
        if self.max_groups is not None and (not isinstance(self.max_groups, int) or self.max_groups < 1):
            raise ValueError(f"max_groups must be an integer >= 1, got {self.max_groups!r}")
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or isinstance(self.max_steps, bool) or self.max_steps < 1):
            raise ValueError(f"max_steps must be an integer >= 1, got {self.max_steps!r}")
        if not isinstance(self.max_unusable_groups, int) or self.max_unusable_groups < 1:
            raise ValueError(f"max_unusable_groups must be an integer >= 1, got {self.max_unusable_groups!r}")
        self.groups  # checks the acceptance fields

    @property
    def groups(self) -> GroupConfig:
        """The acceptance part as a :class:`GroupConfig`."""
        return GroupConfig(
            group_size=self.group_size,
            min_complete_fraction=self.min_complete_fraction,
            early_stop_grace_sessions=self.early_stop_grace_sessions,
            drop_all_wrong_groups=self.drop_all_wrong_groups,
            drop_all_equal_groups=self.drop_all_equal_groups,
            balance_all_correct_groups=self.balance_all_correct_groups,
            correct_threshold=self.correct_threshold,
            max_trajectory_tokens=self.max_trajectory_tokens,
        )

    @property
    def max_in_flight(self) -> int:
        """``rollout_batch_size × max_async_level``: the cap of ``admission="in_flight"``."""
        return self.rollout_batch_size * self.max_async_level

    def group_id(self, index: int) -> str:
        """The deterministic batch id of group ``index``.

        Example::

            SchedulerConfig(run_id="r1", rollout_batch_size=1, group_size=1).group_id(7)  # "r1-g000007"
        """
        return f"{self.run_id}-g{index:06d}"
