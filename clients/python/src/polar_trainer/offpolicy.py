"""Off-policy correction inputs: per-token staleness, the rollout-vs-train logprob gap, and the
per-token importance weights of TIS, MIS, IcePop and CISPO. Standard library only.

Every function works on ONE ENTRY PER RESPONSE TOKEN (a :class:`~polar_trainer.samples.Sample`'s
``loss_mask``, ``rollout_logprobs`` and ``token_versions``) and only looks at the tokens whose
``loss_mask`` is 1: a context token (tool output, template glue) or a removed sample's token gets
no staleness statistic, no place in the gap and weight 0.0. ``train_logprobs`` are the trainer's
logprobs of the same tokens (a plain list of floats: call ``.tolist()`` on a tensor); an entry may be
None where the trainer did not compute one (the gap counts it as ``unchecked``; a weight function
refuses it on a trained token).

Notation: for a trained token t, ``d_t = train_logprob_t − rollout_logprob_t`` and the importance
ratio ``ρ_t = exp(d_t) = π_train(t) / π_rollout(t)``. The weights are plain floats, so they enter a
loss as constants (stop-gradient, as every source below applies them):

* **TIS** (truncated importance sampling; Yao et al. 2025, "Your Efficient RL Framework Secretly
  Brings You Off-Policy RL Training"; verl's ``rollout_is: token`` with ``rollout_is_threshold``):
  ``w_t = min(ρ_t, cap)``. Multiplies the per-token policy loss.
* **MIS** (masked importance sampling; Li, Liu et al. 2025, "When Speed Kills Stability:
  Demystifying RL Collapse from the Training-Inference Mismatch"; verl's ``rollout_rs`` levels,
  Miles' ``examples/train_infer_mismatch_helper``): the ratio at a ``level`` — ``token`` ρ_t,
  ``sequence`` ∏ρ_t over the sample's trained tokens, ``geometric`` exp(mean d_t) — kept when it is in
  ``[low, high]`` and 0 otherwise (a sequence level keeps or zeroes the whole sample).
* **IcePop** (Ling Team, Ant Group, 2025, "Small Leak Can Sink a Great Ship — Boost RL Training on MoE
  with IcePop!", the Ring-1T report): two-sided masking of the token ratio, ``w_t = ρ_t`` when
  ``alpha ≤ ρ_t ≤ beta`` else 0 (the authors use ``[0.5, 5]``). Numerically it is token-level MIS
  with ``low=alpha, high=beta``; it has its own function because trainers name it so.
* **CISPO** (MiniMax-M1 report, 2025, arXiv 2506.13585): the clipped IS weight
  ``w_t = clip(ρ_t, 1 − eps_low, 1 + eps_high)`` used as a stop-gradient coefficient of the
  log-likelihood, ``loss = −Σ_t w_t · A · log π_θ(t)`` (no token is dropped; MiniMax set no lower
  bound, ``eps_low = 1``, and tuned ``eps_high``).

Every weight parameter is explicit (keyword-only, no default); a bad value raises ``ValueError``
naming the parameter. Ratios are compared in a way that cannot overflow: a weight is never larger than its
upper bound.

The gap metric (:func:`logprob_gap`) reports, over the trained tokens, the mean and max ``|d_t|``,
the share with ``|d_t| > threshold`` and two KL estimates of ``KL(π_rollout ‖ π_train)`` from the
tokens the rollout sampled (Schulman, "Approximating KL Divergence", 2020): ``kl_k3`` the mean of
``ρ_t − 1 − d_t`` (unbiased, never negative) and ``kl_k1`` the mean of ``−d_t`` (unbiased, signed).

Example::

    from polar_trainer import offpolicy
    lp = my_model_logprobs(s.tokens, s.prompt_length)            # one float per response token
    gap = offpolicy.logprob_gap(lp, s.rollout_logprobs, s.loss_mask, threshold=1e-3)
    w = offpolicy.correction_weights(s, lp, "tis", cap=2.0)      # multiply the per-token loss by w
    stale = s.token_staleness(batch.policy_version)              # [0, 0, None, 1, …]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .versions import as_version

#: The correction names :func:`correction_weights` knows.
CORRECTIONS = ("tis", "mis", "icepop", "cispo")

#: The levels of :func:`mis_weights`.
MIS_LEVELS = ("token", "sequence", "geometric")

#: The gap threshold ``npm run demo:rl`` reports against (the share of tokens over it).
DEFAULT_GAP_THRESHOLD = 1e-3

#: exp() of anything above this overflows a float; a ratio that large is above every finite bound.
_EXP_MAX = 709.0


# ---------------------------------------------------------------------------------------------
# Staleness


def _versions(token_versions: Sequence[Any]) -> List[Optional[int]]:
    out: List[Optional[int]] = []
    for i, v in enumerate(token_versions):
        if v is None:
            out.append(None)
        elif isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            out.append(v)
        else:
            raise ValueError(f"token_versions[{i}] must be an integer >= 0 or None, got {v!r}")
    return out


def token_staleness(token_versions: Sequence[Optional[int]], policy_version: Any) -> List[Optional[int]]:
    """Per response token, ``policy_version − token_versions[i]``: how many weight updates the trainer
    is past the version that sampled the token. None where the token's version is unknown (context
    tokens, an engine that reported no decimal version). A negative count means the token was
    sampled under a version newer than ``policy_version`` (e.g. a trainer restarted from a checkpoint
    older than the weights the engines served); it is returned as is, as ``Group.staleness`` is.

    Args:
        token_versions: one version (int >= 0) or None per response token (``Sample.token_versions``).
        policy_version: the trainer's current version (an int >= 0 or a decimal string, as
            ``TrainingBatch.policy_version``).

    Raises:
        ValueError: naming ``policy_version`` or the bad ``token_versions[i]``.

    Example::

        assert token_staleness([3, None, 4], policy_version=4) == [1, None, 0]
    """
    v = as_version(policy_version, "policy_version")
    return [None if t is None else v - t for t in _versions(token_versions)]


def staleness_stats(token_versions: Sequence[Optional[int]], loss_mask: Sequence[int], policy_version: Any) -> Dict[str, Any]:
    """Staleness over the trained tokens (``loss_mask`` 1): ``max`` and ``mean`` over the tokens
    whose version is known (None when none is), ``known`` and ``unknown`` token counts.

    Raises:
        ValueError: naming ``policy_version``, ``token_versions[i]`` or a list whose length differs
            from ``loss_mask``'s.

    Example::

        staleness_stats([3, None, 4, 2], [1, 1, 1, 0], 4)
        # {"max": 1, "mean": 0.5, "known": 2, "unknown": 1}
    """
    _same_length("token_versions", token_versions, len(loss_mask))
    stale = token_staleness(token_versions, policy_version)
    trained = [s for s, m in zip(stale, loss_mask) if m]
    known = [s for s in trained if s is not None]
    return {
        "max": max(known) if known else None,
        "mean": sum(known) / len(known) if known else None,
        "known": len(known),
        "unknown": len(trained) - len(known),
    }


# ---------------------------------------------------------------------------------------------
# Shared checks


def _same_length(name: str, values: Sequence[Any], n: int) -> None:
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} entries for {n} response tokens (loss_mask has {n})")


def _finite(name: str, i: int, value: Any) -> float:
    """A logprob as a float: an int, a float or a scalar with ``__float__`` (numpy, a 0-d tensor)."""
    if isinstance(value, (bool, str, bytes)) or not hasattr(value, "__float__"):
        raise ValueError(f"{name}[{i}] must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name}[{i}] must be finite on a trained token, got {x!r}")
    return x


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


def _log_ratios(train_logprobs: Sequence[Any], rollout_logprobs: Sequence[Any], loss_mask: Sequence[int]) -> List[Optional[float]]:
    """``d_t`` per trained token, None elsewhere; every trained token needs both logprobs."""
    n = len(loss_mask)
    _same_length("train_logprobs", train_logprobs, n)
    _same_length("rollout_logprobs", rollout_logprobs, n)
    out: List[Optional[float]] = []
    for i, m in enumerate(loss_mask):
        if not m:
            out.append(None)
            continue
        if train_logprobs[i] is None:
            raise ValueError(f"train_logprobs[{i}] is None on a trained token: every trained token needs the trainer's logprob")
        out.append(_finite("train_logprobs", i, train_logprobs[i]) - _finite("rollout_logprobs", i, rollout_logprobs[i]))
    return out


def _ratio(d: float) -> float:
    """exp(d), +inf where it would overflow."""
    return math.inf if d > _EXP_MAX else math.exp(d)


def _band(low: Any, high: Any, low_name: str, high_name: str) -> Tuple[float, float]:
    """A band around ratio 1: ``0 <= low <= 1 <= high < inf`` and ``low < high``."""
    lo, hi = _number(low, low_name), _number(high, high_name)
    if not 0.0 <= lo <= 1.0:
        raise ValueError(f"{low_name} must be between 0 and 1 (a band around ratio 1), got {low!r}")
    if not (1.0 <= hi < math.inf):
        raise ValueError(f"{high_name} must be a finite number >= 1 (a band around ratio 1), got {high!r}")
    if lo >= hi:
        raise ValueError(f"{low_name} must be below {high_name}, got {low_name}={low!r} and {high_name}={high!r}")
    return lo, hi


# ---------------------------------------------------------------------------------------------
# The rollout-vs-train logprob gap


@dataclass
class _GapSum:
    """Running sums of the gap over trained tokens (merged exactly by adding)."""

    threshold: float
    tokens: int = 0
    unchecked: int = 0
    abs_sum: float = 0.0
    abs_max: float = 0.0
    over: int = 0
    k3_sum: float = 0.0
    k1_sum: float = 0.0

    def add(self, d: float) -> None:
        a = abs(d)
        self.tokens += 1
        self.abs_sum += a
        self.abs_max = max(self.abs_max, a)
        self.over += a > self.threshold
        self.k3_sum += math.inf if d > _EXP_MAX else math.expm1(d) - d
        self.k1_sum -= d

    def metric(self) -> Dict[str, Any]:
        n = self.tokens
        return {
            "tokens": n,
            "unchecked": self.unchecked,
            "threshold": self.threshold,
            "mean_abs": self.abs_sum / n if n else None,
            "max_abs": self.abs_max if n else None,
            "share_over_threshold": self.over / n if n else None,
            "kl_k3": self.k3_sum / n if n else None,
            "kl_k1": self.k1_sum / n if n else None,
        }


def _threshold(threshold: Any) -> float:
    t = _number(threshold, "threshold")
    if not (0.0 <= t < math.inf):
        raise ValueError(f"threshold must be a finite number >= 0, got {threshold!r}")
    return t


def _add_gap(acc: _GapSum, train_logprobs: Sequence[Any], rollout_logprobs: Sequence[Any], loss_mask: Sequence[int]) -> None:
    n = len(loss_mask)
    _same_length("train_logprobs", train_logprobs, n)
    _same_length("rollout_logprobs", rollout_logprobs, n)
    for i, m in enumerate(loss_mask):
        if not m:
            continue
        if train_logprobs[i] is None:
            acc.unchecked += 1
            continue
        acc.add(_finite("train_logprobs", i, train_logprobs[i]) - _finite("rollout_logprobs", i, rollout_logprobs[i]))


def logprob_gap(
    train_logprobs: Sequence[Optional[float]],
    rollout_logprobs: Sequence[float],
    loss_mask: Sequence[int],
    *,
    threshold: float = DEFAULT_GAP_THRESHOLD,
) -> Dict[str, Any]:
    """The rollout-vs-train logprob gap of one sample, over its trained tokens, as a metric dict.

    Keys: ``tokens`` (trained tokens compared), ``unchecked`` (trained tokens whose train logprob is
    None), ``threshold``, ``mean_abs`` and ``max_abs`` of ``|d|``, ``share_over_threshold`` (share of
    compared tokens with ``|d| > threshold``), ``kl_k3`` (mean of ``exp(d) − 1 − d``: Schulman's k3
    estimate of ``KL(π_rollout ‖ π_train)``, >= 0) and ``kl_k1`` (mean of ``−d``, the k1 estimate of
    the same KL); with ``d = train − rollout``. The statistics are None when no token was compared.

    Raises:
        ValueError: naming ``threshold``, a list whose length differs from ``loss_mask``'s, or a
            non-finite logprob on a trained token.

    Example::

        g = logprob_gap([-1.0, -2.0, None], [-1.0, -2.5, 0.0], [1, 1, 0])
        assert g["tokens"] == 2 and g["max_abs"] == 0.5 and g["share_over_threshold"] == 0.5
    """
    acc = _GapSum(_threshold(threshold))
    _add_gap(acc, train_logprobs, rollout_logprobs, loss_mask)
    return acc.metric()


def batch_logprob_gap(pairs: Iterable[Tuple[Any, Sequence[Optional[float]]]], *, threshold: float = DEFAULT_GAP_THRESHOLD) -> Dict[str, Any]:
    """The gap over many samples at once (every trained token counts once): ``pairs`` are
    ``(sample, train_logprobs)`` with the sample's ``rollout_logprobs`` and ``loss_mask`` (a removed
    sample has an all-0 mask and adds nothing). Same keys as :func:`logprob_gap`.

    Example::

        gap = batch_logprob_gap([(s, recompute(s)) for s in batch.samples()], threshold=1e-3)
        log({f"rollout_gap/{k}": v for k, v in gap.items()})
    """
    acc = _GapSum(_threshold(threshold))
    for sample, train_logprobs in pairs:
        _add_gap(acc, train_logprobs, sample.rollout_logprobs, sample.loss_mask)
    return acc.metric()


def merge_logprob_gaps(metrics: Iterable[Dict[str, Any]]) -> Dict[str, Any]:
    """Combines gap metrics of disjoint token sets (steps, micro-batches, ranks) into the metric of
    their union, weighting each by its ``tokens``. All must have the same ``threshold``; an empty
    input gives the metric of no tokens at :data:`DEFAULT_GAP_THRESHOLD`.

    Raises:
        ValueError: naming ``threshold`` when two metrics differ in it.

    Example::

        run = merge_logprob_gaps(step["logprob_gap"] for step in steps)
    """
    acc: Optional[_GapSum] = None
    for m in metrics:
        t = _threshold(m["threshold"])
        if acc is None:
            acc = _GapSum(t)
        elif t != acc.threshold:
            raise ValueError(f"threshold differs between the metrics to merge: {acc.threshold!r} and {t!r}")
        n = int(m["tokens"])
        acc.unchecked += int(m["unchecked"])
        if n:
            acc.tokens += n
            acc.abs_sum += m["mean_abs"] * n
            acc.abs_max = max(acc.abs_max, m["max_abs"])
            acc.over += round(m["share_over_threshold"] * n)
            acc.k3_sum += m["kl_k3"] * n
            acc.k1_sum += m["kl_k1"] * n
    return (acc or _GapSum(DEFAULT_GAP_THRESHOLD)).metric()


# ---------------------------------------------------------------------------------------------
# Importance weights


def tis_weights(train_logprobs: Sequence[Optional[float]], rollout_logprobs: Sequence[float], loss_mask: Sequence[int], *, cap: float) -> List[float]:
    """TIS, truncated importance sampling: ``w_t = min(ρ_t, cap)`` per trained token, 0.0 elsewhere
    (Yao et al. 2025; verl's token-level ``rollout_is`` with ``rollout_is_threshold``, 2.0 there by
    default). Multiply the per-token policy loss by ``w_t``.

    Args:
        cap: the truncation C, a finite number > 0.

    Raises:
        ValueError: naming ``cap``, a list whose length differs from ``loss_mask``'s, or a missing or
            non-finite logprob on a trained token.

    Example::

        w = tis_weights([-1.0, -0.5, -3.0], [-1.5, -1.5, 0.0], [1, 1, 0], cap=2.0)
        # [exp(0.5) ≈ 1.6487, 2.0 (exp(1) truncated), 0.0 (not trained)]
    """
    c = _number(cap, "cap")
    if not (0.0 < c < math.inf):
        raise ValueError(f"cap must be a finite number > 0, got {cap!r}")
    return [0.0 if d is None else min(_ratio(d), c) for d in _log_ratios(train_logprobs, rollout_logprobs, loss_mask)]


def mis_weights(
    train_logprobs: Sequence[Optional[float]],
    rollout_logprobs: Sequence[float],
    loss_mask: Sequence[int],
    *,
    low: float,
    high: float,
    level: str,
) -> List[float]:
    """MIS, masked importance sampling: the importance ratio at ``level``, kept where it lies in
    ``[low, high]`` (bounds included) and 0.0 where it does not (Li, Liu et al. 2025; verl's
    ``rollout_rs`` with ``rollout_rs_threshold`` / ``_lower``, Miles' mismatch helper).

    Levels: ``token`` — each trained token's ρ_t on its own; ``sequence`` — the product ∏ρ_t over the
    sample's trained tokens, given to every trained token or to none; ``geometric`` — the geometric
    mean exp(mean d_t), likewise (length-independent). For token-level truncated weights with a
    whole-sequence rejection, multiply :func:`tis_weights` by ``w > 0`` of the ``geometric`` level.

    Args:
        low: the lower bound, ``0 <= low <= 1`` (0: none).
        high: the upper bound, ``1 <= high < inf``, above ``low``.
        level: ``token``, ``sequence`` or ``geometric``.

    Raises:
        ValueError: naming ``low``, ``high`` or ``level``, a list whose length differs from
            ``loss_mask``'s, or a missing or non-finite logprob on a trained token.

    Example::

        mis_weights([-1.0, -1.0], [-1.5, -4.0], [1, 1], low=0.5, high=2.0, level="token")
        # [exp(0.5) ≈ 1.6487, 0.0 (exp(3) is outside)]
    """
    lo, hi = _band(low, high, "low", "high")
    if level not in MIS_LEVELS:
        raise ValueError(f"level must be one of {', '.join(MIS_LEVELS)}, got {level!r}")
    ds = _log_ratios(train_logprobs, rollout_logprobs, loss_mask)
    if level == "token":
        return _banded(ds, lo, hi)
    trained = [d for d in ds if d is not None]
    if not trained:
        return [0.0] * len(ds)
    total = math.fsum(trained)
    r = _ratio(total if level == "sequence" else total / len(trained))
    w = r if lo <= r <= hi else 0.0
    return [0.0 if d is None else w for d in ds]


def _banded(ds: List[Optional[float]], lo: float, hi: float) -> List[float]:
    out = []
    for d in ds:
        r = 0.0 if d is None else _ratio(d)
        out.append(r if d is not None and lo <= r <= hi else 0.0)
    return out


def icepop_weights(
    train_logprobs: Sequence[Optional[float]],
    rollout_logprobs: Sequence[float],
    loss_mask: Sequence[int],
    *,
    alpha: float,
    beta: float,
) -> List[float]:
    """IcePop, two-sided masking of the token ratio: ``w_t = ρ_t`` when ``alpha <= ρ_t <= beta``,
    else 0.0 (the token gives no gradient); 0.0 outside the loss mask (Ling Team, Ant Group, 2025;
    the Ring-1T report uses ``alpha=0.5, beta=5``). Equal to ``mis_weights(level="token", low=alpha,
    high=beta)``.

    Args:
        alpha: the lower bound, ``0 <= alpha <= 1``.
        beta: the upper bound, ``1 <= beta < inf``, above ``alpha``.

    Raises:
        ValueError: naming ``alpha`` or ``beta``, a list whose length differs from ``loss_mask``'s, or
            a missing or non-finite logprob on a trained token.

    Example::

        icepop_weights([-1.0, -1.0, -5.0], [-1.0, -3.0, -1.0], [1, 1, 1], alpha=0.5, beta=5.0)
        # [1.0, 0.0 (exp(2) ≈ 7.39 > 5), 0.0 (exp(-4) ≈ 0.018 < 0.5)]
    """
    lo, hi = _band(alpha, beta, "alpha", "beta")
    return _banded(_log_ratios(train_logprobs, rollout_logprobs, loss_mask), lo, hi)


def cispo_weights(
    train_logprobs: Sequence[Optional[float]],
    rollout_logprobs: Sequence[float],
    loss_mask: Sequence[int],
    *,
    eps_low: float,
    eps_high: float,
) -> List[float]:
    """CISPO, the clipped IS weight: ``w_t = clip(ρ_t, 1 − eps_low, 1 + eps_high)`` per trained
    token, 0.0 elsewhere (MiniMax-M1, 2025). It is a stop-gradient coefficient of the
    log-likelihood — ``loss = −Σ_t w_t · A · log π_θ(t)`` — so unlike PPO's clip no token loses its
    gradient; MiniMax used no lower bound (``eps_low=1``) and tuned ``eps_high``.

    Args:
        eps_low: ``0 <= eps_low <= 1`` (the lower clip ``1 − eps_low``; 1: none).
        eps_high: a finite number >= 0 (the upper clip ``1 + eps_high``).

    Raises:
        ValueError: naming ``eps_low`` or ``eps_high``, a list whose length differs from
            ``loss_mask``'s, or a missing or non-finite logprob on a trained token.

    Example::

        cispo_weights([-1.0, -3.0, -1.0], [-2.0, -1.0, -1.1], [1, 1, 1], eps_low=0.2, eps_high=0.28)
        # [1.28 (exp(1) clipped), 0.8 (exp(-2) clipped), exp(0.1) ≈ 1.1052]
    """
    el, eh = _number(eps_low, "eps_low"), _number(eps_high, "eps_high")
    if not 0.0 <= el <= 1.0:
        raise ValueError(f"eps_low must be between 0 and 1 (the lower clip is 1 - eps_low), got {eps_low!r}")
    if not (0.0 <= eh < math.inf):
        raise ValueError(f"eps_high must be a finite number >= 0, got {eps_high!r}")
    lo, hi = 1.0 - el, 1.0 + eh
    return [0.0 if d is None else min(max(_ratio(d), lo), hi) for d in _log_ratios(train_logprobs, rollout_logprobs, loss_mask)]


_BY_NAME: Dict[str, Callable[..., List[float]]] = {
    "tis": tis_weights,
    "mis": mis_weights,
    "icepop": icepop_weights,
    "cispo": cispo_weights,
}


def correction_weights(sample: Any, train_logprobs: Sequence[Optional[float]], method: str, **params: Any) -> List[float]:
    """The per-token weights of one sample by correction name, from its ``rollout_logprobs`` and
    ``loss_mask`` (a removed sample's mask is all 0, so all its weights are 0.0): ``tis`` (``cap``),
    ``mis`` (``low``, ``high``, ``level``), ``icepop`` (``alpha``, ``beta``), ``cispo`` (``eps_low``,
    ``eps_high``).

    Raises:
        ValueError: naming ``method`` when it is not one of :data:`CORRECTIONS`, or what the
            correction's own function raises for.
        TypeError: a parameter the correction does not take, or one it needs that is missing.

    Example::

        w = correction_weights(s, lp.tolist(), "icepop", alpha=0.5, beta=5.0)
        loss = -(torch.tensor(w) * surrogate).sum() / max(1, sum(s.loss_mask))
    """
    fn = _BY_NAME.get(method)
    if fn is None:
        raise ValueError(f"method must be one of {', '.join(CORRECTIONS)}, got {method!r}")
    return fn(train_logprobs, sample.rollout_logprobs, sample.loss_mask, **params)
