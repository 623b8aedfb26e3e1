"""Policy versions: which type appears where, and which version each sampled token was drawn under.

A policy version is a non-negative integer. **In this package it is an ``int``** wherever it is
read back: ``GroupScheduler.policy_version``, ``TrainingBatch.policy_version``, ``Group.stamp`` /
``version`` / ``staleness``, ``Sample.token_versions``, ``counters()["policy_version"]``, the
export's ``group_version`` / ``policy_version``. **On the wire it is a decimal string** (``"3"``):
the fence stores and returns strings (``FenceState.policy_version``, ``NodeAck.policy_version``),
an update function is called with one (``update("3")``), and engines report one
(``engines.weight_versions`` → ``{"url": "3"}``, or ``"default"`` before any update). The task field
``min_policy_version`` is an integer (the control plane's schema). Where a user passes a version
to the scheduler or the engines (``GroupScheduler(policy_version=…)``, ``set_policy_version``,
``update_weights(version=…)``, ``engines.*``) an int and a decimal string are both accepted
(:func:`as_version`); ``PolarClient``'s fence calls send ``str(v)`` as given (the fence stores any
label; groups are versioned only by decimal ones).

Every completion record and conversation turn carries ``policy_version`` (the fence's version when the
call was admitted) plus the engine's ``weight_version_start`` / ``weight_version``; a token's
version is the first of these that is a decimal integer (the fence's label is authoritative; an
engine that reports ``"default"`` tells nothing). A group's version is the OLDEST version of any
sampled token in it, so a session that spans an update counts as stale from its first turn.

Example::

    token_versions(trace)   # [3, 3, None, None, 4, 4] for a turn under "3", glue, a turn under "4"
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional

_DECIMAL = re.compile(r"^(0|[1-9][0-9]*)$")


def parse_version(value: Any) -> Optional[int]:
    """The int of a decimal-integer version (``"12"`` or 12), else None (``"default"``, ``"step-3"``, None).

    Example::

        assert parse_version("7") == 7 and parse_version("default") is None
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and _DECIMAL.match(value):
        return int(value)
    return None


def as_version(value: Any, name: str = "policy_version") -> int:
    """A version a user passes, as the package's int: an int >= 0 or a decimal string (``"3"``).

    Raises:
        ValueError: naming ``name``, for anything else (``"default"``, ``-1``, ``"v3"``, ``True``).

    Example::

        assert as_version("3") == as_version(3) == 3
    """
    v = parse_version(value)
    if v is None:
        raise ValueError(f"{name} must be an integer >= 0 or a decimal string like \"3\", got {value!r}")
    return v


def version_of(meta: Dict[str, Any]) -> Optional[int]:
    """The version a call's tokens were sampled under: ``policy_version``, else
    ``weight_version_start``, else ``weight_version`` — the first that is a decimal integer.

    Example::

        version_of({"policy_version": None, "weight_version_start": "5", "weight_version": "6"})  # 5
    """
    for key in ("policy_version", "weight_version_start", "weight_version"):
        v = parse_version(meta.get(key))
        if v is not None:
            return v
    return None


def token_versions(trace: Dict[str, Any]) -> List[Optional[int]]:
    """One version per response token of a trace (None where unknown or not sampled).

    * ``conversation`` traces: ``metadata.turns[]`` gives each turn's ``sampled_start`` and
      ``sampled_len`` in ``response_ids``; those tokens get the turn's version, bridged tokens
      (tool results, template glue: mask 0) get None.
    * ``per_request`` traces: ``metadata`` of the one call; every response token gets it.
    * Either way, a turn continued after a weight update (a partial rollout) has
      ``version_segments``: consecutive stretches ``{len, policy_version, weight_version_start,
      weight_version}`` of its sampled tokens, each stretch getting its own version.
    * ``prefix_merging`` traces: ``metadata.policy_versions`` (one per merged call) without offsets:
      every token gets the OLDEST of them (conservative).

    Example::

        versions = token_versions(result["trajectory"]["traces"][0])
    """
    n = len(trace.get("response_ids") or [])
    meta = trace.get("metadata") or {}
    turns = meta.get("turns")
    if isinstance(turns, list) and turns:
        out: List[Optional[int]] = [None] * n
        for turn in turns:
            if not isinstance(turn, dict):
                continue
            start, length = turn.get("sampled_start"), turn.get("sampled_len")
            if not isinstance(start, int) or not isinstance(length, int):
                continue
            _fill(out, start, length, turn)
        return out
    merged = meta.get("policy_versions")
    if isinstance(merged, list):
        known = [v for v in (parse_version(x) for x in merged) if v is not None]
        if not known:
            weights = [v for v in (parse_version(x) for x in meta.get("weight_versions") or []) if v is not None]
            known = weights
        return [min(known) if known else None] * n
    out = [None] * n
    _fill(out, 0, n, meta)
    return out


def _fill(out: List[Optional[int]], start: int, length: int, turn: Dict[str, Any]) -> None:
    """Sets the versions of ``length`` tokens from ``start``: per ``version_segments`` stretch when the
    turn has them (and they cover it exactly), else the turn's one version."""
    segments = turn.get("version_segments")
    if isinstance(segments, list) and segments and all(isinstance(s, dict) and isinstance(s.get("len"), int) for s in segments) and sum(s["len"] for s in segments) == length:
        at = start
        for s in segments:
            v = version_of(s)
            for i in range(max(0, at), min(len(out), at + s["len"])):
                out[i] = v
            at += s["len"]
        return
    v = version_of(turn)
    for i in range(max(0, start), min(len(out), start + length)):
        out[i] = v


def oldest(versions: Iterable[Optional[int]], mask: Optional[Iterable[int]] = None) -> Optional[int]:
    """The smallest known version among the tokens whose mask is 1 (all tokens when ``mask`` is None).

    Example::

        oldest([3, None, 4], mask=[1, 0, 1])  # 3
    """
    pairs = zip(versions, mask) if mask is not None else ((v, 1) for v in versions)
    known = [v for v, m in pairs if m and v is not None]
    return min(known) if known else None
