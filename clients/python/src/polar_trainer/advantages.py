"""Advantages per prompt group, on trajectories (sessions), never on failed ones.

The unit is the trajectory: a session that produced several traces counts once (its reward is the
mean of its traces' rewards), and every trace gets an advantage from its own reward. Failed,
excluded and refused sessions get advantage 0 and are in no mean, std or baseline.

* :func:`grpo`: ``(r − mean) / (std + eps)`` with ONE shared group std over the trajectory rewards
  (sample std, as ``torch.std``); zero advantage when all trajectory rewards are equal (or there is
  one trajectory); ``normalize_std=False`` gives ``r − mean``.
* :func:`leave_one_out`: upstream Polar's baseline: each trajectory's baseline is the mean of the
  OTHER valid trajectories' rewards (0 when it has none); with ``normalize_std`` the difference is
  divided by the shared group std (zero advantage when all rewards are equal).

Example::

    grpo(group)                  # sets s.advantage on every sample of the group
    [s.advantage for s in group.samples()]
"""

from __future__ import annotations

import math
from typing import Dict, List

from .groups import Group

#: Added to the std before dividing (slime's and upstream's value).
EPS = 1e-6
_EQUAL_EPS = 1e-12


def _trajectories(group: Group) -> List[tuple]:
    out = []
    for o in group.sessions:
        kept = [s for s in o.samples if not s.removed]
        if o.kind == "trainable" and kept:
            out.append((o, kept, sum(s.reward for s in kept) / len(kept)))
    return out


def _std(values: List[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def _reset(group: Group) -> None:
    for s in group.samples():
        s.advantage = 0.0


def grpo(group: Group, normalize_std: bool = True, eps: float = EPS) -> Dict[str, float]:
    """GRPO advantages with one shared group std, written IN PLACE: every sample of ``group`` gets
    ``sample.advantage`` (0.0 for removed samples and failed or excluded sessions).

    Returns:
        The group's statistics, for logging: ``{"mean": m, "std": s}`` over the trajectory rewards
        (``std`` 0.0 when they are all equal; both 0.0 with no trainable trajectory). The
        per-sample advantages are not in it: read them from ``group.samples()``.

    Example::

        stats = grpo(group)   # {"mean": 0.5, "std": 0.577...}
        [s.advantage for s in group.samples()]   # [0.866..., -0.866..., 0.866..., -0.866...]
    """
    _reset(group)
    trajs = _trajectories(group)
    means = [m for _, _, m in trajs]
    if not means:
        return {"mean": 0.0, "std": 0.0}
    mu = sum(means) / len(means)
    sd = _std(means)
    if max(means) - min(means) <= _EQUAL_EPS:
        return {"mean": mu, "std": 0.0}
    for _, kept, _ in trajs:
        for s in kept:
            s.advantage = (s.reward - mu) / (sd + eps) if normalize_std else s.reward - mu
    return {"mean": mu, "std": sd}


def leave_one_out(group: Group, normalize_std: bool = False, eps: float = EPS) -> Dict[str, float]:
    """Leave-one-trajectory-out baselines as upstream's slime bridge, written in place on
    ``sample.advantage`` like :func:`grpo`; returns the same ``{mean, std}`` statistics.

    Example::

        leave_one_out(group)  # rewards 1, 0, 1, 0 → advantages 2/3, -2/3, 2/3, -2/3
    """
    _reset(group)
    trajs = _trajectories(group)
    means = [m for _, _, m in trajs]
    if not means:
        return {"mean": 0.0, "std": 0.0}
    mu = sum(means) / len(means)
    sd = _std(means)
    if normalize_std and max(means) - min(means) <= _EQUAL_EPS:
        return {"mean": mu, "std": 0.0}
    total = sum(means)
    for _, kept, m in trajs:
        others = len(means) - 1
        baseline = (total - m) / others if others else 0.0
        for s in kept:
            diff = s.reward - baseline
            s.advantage = diff / (sd + eps) if normalize_std else diff
    return {"mean": mu, "std": sd}


ESTIMATORS = {"grpo": grpo, "loo": leave_one_out}


def apply(group: Group, estimator: str, normalize_std: bool = True) -> Dict[str, float]:
    """Runs the estimator named ``grpo`` or ``loo`` (``none`` leaves advantages at 0 and returns
    ``{}``); the advantages land on the samples, the statistics are returned.

    Example::

        apply(group, "loo", normalize_std=False)
    """
    if estimator == "none":
        _reset(group)
        return {}
    if estimator not in ESTIMATORS:
        raise ValueError(f"advantage estimator must be one of grpo, loo, none; got {estimator!r}")
    return ESTIMATORS[estimator](group, normalize_std)
