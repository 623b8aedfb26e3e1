"""Groups of the scheduler as slime ``Sample`` objects (one per trace), as upstream's adapter does.

* ``tokens = prompt_ids + response_ids``, ``response_length``, ``loss_mask`` and
  ``rollout_log_probs`` per response token (slime's convention);
* ``reward`` = ``{reward_key: r}`` when ``args.reward_key`` is set, else the float;
* ``status``: COMPLETED, TRUNCATED (``finish_reason: length``, an agent timeout, a causal-prefix
  cut) or FAILED with ``remove_sample`` (a failed session);
* ``group_index`` = the group's index; ``index`` = a global sample counter; every trace of one
  session shares ``rollout_id`` (slime main) or ``group_id`` (slime v0.3.0), whichever the
  installed ``Sample`` has, so slime's loss counts the session once;
* ``weight_versions``: the versions of the trace's trained tokens (Miles reads its oldest);
* ``rollout_routed_experts`` (MoE routing replay), when the installed ``Sample`` has it and the
  gateway recorded routes: an int32 array ``(len(tokens) − 1, layers, top_k)`` (numpy);
* a session that was excluded (infra, cancelled) or produced no trace becomes one fully masked
  placeholder with ``remove_sample``, so every group still has at least ``n_samples_per_prompt``
  samples;
* ``metadata["polar"]`` and ``train_metadata``: ``accepted_rollout_id``, ``policy_staleness``,
  ``policy_version``, ``scheduler_group_id`` (upstream's keys), plus session and trace ids.

Example::

    groups = [to_slime_samples(g, args, rollout_id) for g in batch.groups]
"""

from __future__ import annotations

import itertools
from typing import Any, List, Optional

from ..groups import Group
from ..samples import Sample as PolarSample
from ..samples import SessionOutcome

_counter = itertools.count()


def sample_class() -> Any:
    """slime's ``Sample`` (``slime.utils.types``, or ``slime.utils.core.types`` in newer trees).

    Example::

        Sample = sample_class()
    """
    try:
        from slime.utils.types import Sample  # type: ignore[import-not-found]
    except ImportError:
        try:
            from slime.utils.core.types import Sample  # type: ignore[import-not-found]
        except ImportError as e:
            raise ImportError("slime is not importable: the bridge needs slime's Sample (slime.utils.types)") from e
    return Sample


def _fields(cls: Any) -> set:
    return set(getattr(cls, "__dataclass_fields__", {}) or {})


def _reward(args: Any, value: float) -> Any:
    key = getattr(args, "reward_key", None)
    return {key: float(value)} if key else float(value)


def _unit(session: SessionOutcome, group: Group) -> int:
    # One id per session, unique in the batch: slime averages the loss within a rollout id.
    return group.index * 100000 + session.trajectory_index


def _status(cls: Any, s: Optional[PolarSample]) -> Any:
    if s is None or s.status == "failed":
        return cls.Status.FAILED if s is not None else cls.Status.ABORTED
    return cls.Status.TRUNCATED if s.status == "truncated" else cls.Status.COMPLETED


def to_slime_samples(group: Group, args: Any, rollout_id: int, cls: Any = None) -> List[Any]:
    """The slime samples of one group (see the module doc).

    Example::

        samples = to_slime_samples(group, args, rollout_id=12)
    """
    cls = cls or sample_class()
    fields = _fields(cls)
    unit_field = "rollout_id" if "rollout_id" in fields else "group_id" if "group_id" in fields else None
    polar_meta = {
        "accepted_rollout_id": rollout_id,
        "policy_staleness": group.staleness,
        "policy_version": group.version,
        "scheduler_group_id": group.group_id,
    }
    out: List[Any] = []
    for session in group.sessions:
        samples = session.samples if session.kind in ("trainable", "failed") else []
        unit = _unit(session, group)
        if not samples:
            samples_or_none: List[Optional[PolarSample]] = [None]
        else:
            samples_or_none = list(samples)
        for s in samples_or_none:
            meta = {**polar_meta, "session_id": session.session_id, "session_kind": session.kind, "session_reason": session.reason, "trajectory_index": session.trajectory_index}
            if s is None:
                # Excluded or empty session: a placeholder that carries no gradient.
                kw = dict(tokens=[0, 0], response_length=1, loss_mask=[0], rollout_log_probs=[0.0], reward=_reward(args, 0.0), remove_sample=True)
                meta["trace_index"] = -1
            else:
                versions = sorted({str(v) for v, m in zip(s.token_versions, s.loss_mask) if m and v is not None}, key=int)
                kw = dict(
                    tokens=list(s.tokens),
                    response_length=s.response_length,
                    loss_mask=list(s.loss_mask),
                    rollout_log_probs=list(s.rollout_logprobs),
                    reward=_reward(args, s.reward),
                    remove_sample=s.removed,
                    weight_versions=versions,
                )
                # MoE routing replay: slime's rows are the positions of tokens[:-1], as ours are.
                if s.routed_experts is not None:
                    try:
                        kw["rollout_routed_experts"] = s.routed_experts.to_numpy()
                    except ImportError:  # slime brings numpy; a trainer without it gets lists
                        kw["rollout_routed_experts"] = s.routed_experts.to_list()
                meta.update(trace_index=s.trace_index, finish_reason=s.finish_reason, truncated_from=s.truncated_from, token_versions=s.token_versions)
            kw.update(
                group_index=group.index,
                index=next(_counter),
                status=_status(cls, s),
                metadata={"polar": meta},
                train_metadata=dict(polar_meta),
                session_id=session.session_id,
            )
            # Only the fields this slime's Sample has (weight_versions is newer than v0.3.0).
            sample = cls(**{k: v for k, v in kw.items() if not fields or k in fields})
            if unit_field:
                setattr(sample, unit_field, unit)
            out.append(sample)
    return out
