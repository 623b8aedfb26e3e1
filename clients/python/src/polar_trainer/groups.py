"""Group acceptance and selection: which finished prompt groups a trainer may train on.

A group (one task of ``group_size`` sessions) is judged once all its sessions ended (or the early
stop cancelled the stragglers). In order, a group is **rejected** (counted by reason) when:

1. ``too_few_completed``: fewer trainable sessions than ``ceil(group_size × min_complete_fraction)``
   (at least 1);
2. ``missing_logprobs`` / ``misaligned_logprobs`` / ``misaligned_mask``: a trainable trace lacks
   logprobs aligned with its response (the group's importance ratios would be wrong);
3. ``no_trainable_tokens``: no sampled token to train on;

and then, as upstream's current slime bridge selects groups, **dropped** (counted; another group is
admitted in its place) when enabled:

4. ``all_wrong`` (``drop_all_wrong_groups``): every trainable trajectory's reward is below
   ``correct_threshold``;
5. ``all_equal`` (``drop_all_equal_groups``, upstream key ``polar_drop_all_keep_groups``): every
   trainable trajectory has the same reward, so every advantage would be zero;
6. ``balanced_all_correct`` (``balance_all_correct_groups``): every trajectory is correct and the
   run has already accepted as many all-correct groups as mixed ones (a running tally, so over
   the run all-correct groups never outnumber mixed ones).

Infra failures never count as wrong: they are excluded before any of this.

Example::

    verdict = judge(group, cfg, tally)
    if verdict.accepted: queue.append(group)
    else: counters[verdict.reason] += 1
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .samples import Sample, SessionOutcome
from .versions import oldest

_EQUAL_EPS = 1e-12


@dataclass
class GroupConfig:
    """How groups are judged (the scheduler's acceptance part).

    Example::

        GroupConfig(group_size=8, min_complete_fraction=0.75, drop_all_wrong_groups=True)
    """

    group_size: int
    min_complete_fraction: float = 0.0
    early_stop_grace_sessions: int = 2
    drop_all_wrong_groups: bool = False
    drop_all_equal_groups: bool = False
    balance_all_correct_groups: bool = False
    correct_threshold: float = 1.0
    max_trajectory_tokens: Optional[int] = None

    def __post_init__(self) -> None:
        if not isinstance(self.group_size, int) or self.group_size < 1:
            raise ValueError(f"group_size must be an integer >= 1, got {self.group_size!r}")
        if not 0.0 <= float(self.min_complete_fraction) <= 1.0:
            raise ValueError(f"min_complete_fraction must be between 0 and 1, got {self.min_complete_fraction!r}")
        if not isinstance(self.early_stop_grace_sessions, int) or self.early_stop_grace_sessions < 0:
            raise ValueError(f"early_stop_grace_sessions must be an integer >= 0, got {self.early_stop_grace_sessions!r}")
        if self.max_trajectory_tokens is not None and self.max_trajectory_tokens < 2:
            raise ValueError(f"max_trajectory_tokens must be >= 2, got {self.max_trajectory_tokens!r}")

    @property
    def required_usable(self) -> int:
        """Trainable sessions a group needs: ``max(1, ceil(n·f))``."""
        return max(1, math.ceil(self.group_size * self.min_complete_fraction - 1e-9))

    @property
    def early_stop_min_usable_sessions(self) -> Optional[int]:
        """Upstream's early stop: ``min(n, ceil(n·f) + grace)`` usable sessions, then the
        stragglers are cancelled; None when ``min_complete_fraction`` is 0 or it would be ``n``.

        Example::

            GroupConfig(group_size=8, min_complete_fraction=0.5).early_stop_min_usable_sessions  # 6
        """
        if self.min_complete_fraction <= 0:
            return None
        m = min(self.group_size, math.ceil(self.group_size * self.min_complete_fraction - 1e-9) + self.early_stop_grace_sessions)
        return m if m < self.group_size else None


@dataclass
class Group:
    """One prompt group: the task's sessions judged, and where it is in the scheduler.

    Attributes:
        group_id: the batch id (deterministic: ``{run_id}-g{index:06d}``).
        index: the group counter of the run.
        stamp: the policy version when the group was submitted.
        sessions: one :class:`SessionOutcome` per session result.
        version: the OLDEST version of any trained token (the stamp when no token carries one).
        staleness: set when a training step takes the group (current version − ``version``).

    Example::

        [s.reward for s in group.samples()]
    """

    group_id: str
    index: int
    stamp: int
    task_id: str = ""
    sessions: List[SessionOutcome] = field(default_factory=list)
    staleness: Optional[int] = None
    step: Optional[int] = None
    meta: Dict[str, Any] = field(default_factory=dict)

    def samples(self, include_removed: bool = True) -> List[Sample]:
        """Every sample of the group, session by session, trace by trace."""
        return [s for o in self.sessions for s in o.samples if include_removed or not s.removed]

    @property
    def trainable(self) -> List[SessionOutcome]:
        return [o for o in self.sessions if o.kind == "trainable"]

    @property
    def version(self) -> int:
        """The oldest version of any trained token of the group (:func:`group_version`)."""
        return group_version(self.samples(), self.stamp)

    def trajectory_rewards(self) -> List[float]:
        """One reward per trainable trajectory: the mean of its (non-removed) samples' rewards."""
        out = []
        for o in self.trainable:
            rs = [s.reward for s in o.samples if not s.removed]
            if rs:
                out.append(sum(rs) / len(rs))
        return out

    def klass(self, correct_threshold: float = 1.0) -> str:
        """``all_correct``, ``all_wrong``, ``mixed`` or ``empty`` by trajectory rewards."""
        rewards = self.trajectory_rewards()
        if not rewards:
            return "empty"
        correct = [r >= correct_threshold for r in rewards]
        return "all_correct" if all(correct) else "all_wrong" if not any(correct) else "mixed"

    def counts(self) -> Dict[str, int]:
        """Sessions per kind."""
        out: Dict[str, int] = {}
        for o in self.sessions:
            out[o.kind] = out.get(o.kind, 0) + 1
        return out


@dataclass
class SelectionTally:
    """Accepted groups by class over the run (the balance of all-correct groups reads it)."""

    mixed: int = 0
    all_correct: int = 0
    all_wrong: int = 0

    def to_dict(self) -> Dict[str, int]:
        return {"mixed": self.mixed, "all_correct": self.all_correct, "all_wrong": self.all_wrong}

    @staticmethod
    def from_dict(d: Dict[str, Any]) -> "SelectionTally":
        return SelectionTally(int(d.get("mixed", 0)), int(d.get("all_correct", 0)), int(d.get("all_wrong", 0)))


@dataclass
class Verdict:
    """Accepted, or rejected / dropped with a reason.

    Example::

        Verdict(False, "rejected", "too_few_completed")
    """

    accepted: bool
    outcome: str  # "accepted" | "rejected" | "dropped"
    reason: Optional[str] = None


def judge(group: Group, cfg: GroupConfig, tally: SelectionTally) -> Verdict:
    """Applies the rules of the module doc; on acceptance the tally counts the group's class.

    Example::

        v = judge(group, GroupConfig(group_size=4, min_complete_fraction=0.5), SelectionTally())
    """
    trainable = group.trainable
    if len(trainable) < cfg.required_usable:
        return Verdict(False, "rejected", "too_few_completed")
    for o in trainable:
        if o.problems:
            return Verdict(False, "rejected", o.problems[0])
    if sum(o.trainable_tokens for o in trainable) == 0:
        return Verdict(False, "rejected", "no_trainable_tokens")
    klass = group.klass(cfg.correct_threshold)
    rewards = group.trajectory_rewards()
    if cfg.drop_all_wrong_groups and klass == "all_wrong":
        return Verdict(False, "dropped", "all_wrong")
    if cfg.drop_all_equal_groups and rewards and max(rewards) - min(rewards) <= _EQUAL_EPS:
        return Verdict(False, "dropped", "all_equal")
    if cfg.balance_all_correct_groups and klass == "all_correct" and tally.all_correct >= tally.mixed:
        return Verdict(False, "dropped", "balanced_all_correct")
    if klass == "mixed":
        tally.mixed += 1
    elif klass == "all_correct":
        tally.all_correct += 1
    elif klass == "all_wrong":
        tally.all_wrong += 1
    return Verdict(True, "accepted")


def group_version(samples: List[Sample], stamp: int) -> int:
    """The oldest version of any trained token, else ``stamp``.

    Example::

        group_version(group.samples(), group.stamp)
    """
    known = [v for v in (oldest(s.token_versions, s.loss_mask) for s in samples if not s.removed) if v is not None]
    return min(known) if known else stamp
