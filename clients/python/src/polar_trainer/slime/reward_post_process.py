"""slime's ``--custom-reward-post-process-path
polar_trainer.slime.reward_post_process.post_process_rewards``: advantages per prompt group over
trajectories, as upstream's bridge computes them.

Samples are grouped by ``group_index``; the traces of one session (same ``rollout_id`` /
``group_id``, else ``index``) form one trajectory. For ``advantage_estimator`` grpo, gspo or
reinforce_plus_plus_baseline (with ``rewards_normalization`` on, slime's default) each trajectory's
baseline is the mean of the OTHER valid trajectories' rewards (``polar_advantage_baseline: loo``,
upstream) or the group mean (``mean``); grpo and gspo divide by ONE shared group std unless
``disable_grpo_std_normalization`` (zero advantage when all trajectory rewards are equal). Failed,
aborted and removed samples get 0 and are in no baseline. Other estimators get the raw rewards.

Example::

    raw, rewards = post_process_rewards(args, samples)
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..advantages import grpo, leave_one_out
from ..groups import Group
from ..samples import Sample as PolarSample
from ..samples import SessionOutcome

_BASELINE_ESTIMATORS = ("grpo", "gspo", "reinforce_plus_plus_baseline")


def _value(args: Any, sample: Any) -> float:
    r = sample.reward
    key = getattr(args, "reward_key", None)
    if isinstance(r, dict):
        return float(r[key]) if key else float(next(iter(r.values())))
    return float(r) if r is not None else 0.0


def _failed(sample: Any) -> bool:
    if getattr(sample, "remove_sample", False):
        return True
    status = getattr(sample, "status", None)
    name = getattr(status, "name", None) or str(status).rsplit(".", 1)[-1]
    if name.upper() in ("FAILED", "ABORTED"):
        return True
    mask = getattr(sample, "loss_mask", None)
    return mask is not None and not any(mask)


def _unit(sample: Any, position: int) -> Any:
    for name in ("rollout_id", "group_id", "index"):
        v = getattr(sample, name, None)
        if v is not None:
            return v
    return f"position-{position}"


def post_process_rewards(args: Any, samples: List[Any]) -> Tuple[List[float], List[float]]:
    """Returns ``(raw_rewards, rewards)``, one float per sample each (see the module doc).

    Example::

        raw, adv = post_process_rewards(args, flat_samples)
    """
    raw = [_value(args, s) for s in samples]
    if not getattr(args, "rewards_normalization", True) or getattr(args, "advantage_estimator", None) not in _BASELINE_ESTIMATORS:
        return raw, list(raw)
    normalize = getattr(args, "advantage_estimator", None) in ("grpo", "gspo") and not getattr(args, "disable_grpo_std_normalization", False)
    baseline = getattr(args, "polar_advantage_baseline", "loo")
    groups: Dict[Any, Group] = {}
    sessions: Dict[Tuple[Any, Any], SessionOutcome] = {}
    proxies: List[PolarSample] = []
    for i, s in enumerate(samples):
        gkey = getattr(s, "group_index", None)
        g = groups.setdefault(gkey, Group(group_id=str(gkey), index=0, stamp=0))
        ukey = (gkey, _unit(s, i))
        if ukey not in sessions:
            sessions[ukey] = SessionOutcome(session_id=str(ukey), trajectory_index=len(g.sessions), status="", kind="trainable", reason="", reward=None)
            g.sessions.append(sessions[ukey])
        o = sessions[ukey]
        failed = _failed(s)
        if failed and not any(not x.removed for x in o.samples):
            o.kind = "failed"
        if not failed:
            o.kind = "trainable"
        p = PolarSample(group_id="", group_index=0, trajectory_index=o.trajectory_index, trace_index=len(o.samples), session_id="", task_id="", tokens=[], prompt_length=0, loss_mask=[], rollout_logprobs=[], token_versions=[], reward=raw[i], status="failed" if failed else "completed", removed=failed)
        o.samples.append(p)
        proxies.append(p)
    for g in groups.values():
        for o in g.sessions:
            if all(p.removed for p in o.samples):
                o.kind = "failed"
        if baseline == "mean":
            grpo(g, normalize_std=normalize)
        else:
            leave_one_out(g, normalize_std=normalize)
    return raw, [p.advantage for p in proxies]
