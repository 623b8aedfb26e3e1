"""Sampling parameters of ``/generate`` and the one place where a next token is drawn.

The recorded logprob of every sampled token is the log-probability under the distribution the
token was actually drawn from: logits divided by the temperature, then top-k, then top-p, then
min-p, renormalised over the tokens that survive. With the defaults Polar-TS sends (temperature 1,
top_p 1, top_k -1, min_p 0) that is exactly ``log_softmax(logits)``, which is what a trainer
recomputes. Temperature 0 is greedy decoding: the distribution is a point mass on the argmax and
the recorded logprob is 0.0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch

from .contract import CONTRACT, sampling_violation
from .errors import BadRequest

#: SGLang's default when a request gives no ``max_new_tokens``.
DEFAULT_MAX_NEW_TOKENS = CONTRACT["defaultMaxNewTokens"]

#: Values SGLang accepts (inside the shared contract's bounds) but this engine does not implement:
#: penalties and constrained decoding are refused rather than silently ignored (they would change
#: the distribution the logprobs describe).
_NEUTRAL = {"frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0, "min_new_tokens": 0}
_UNSUPPORTED = ("regex", "json_schema", "ebnf", "structural_tag", "logit_bias", "custom_params", "stop_regex")


@dataclass
class SamplingParams:
    """The parsed ``sampling_params`` of one request."""

    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    #: Whether the request set ``max_new_tokens`` (SGLang refuses only an explicit one past the
    #: context; a default is clamped).
    max_new_tokens_given: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    stop: List[str] = field(default_factory=list)
    stop_token_ids: List[int] = field(default_factory=list)
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    no_stop_trim: bool = False
    seed: Optional[int] = None

    @staticmethod
    def parse(raw: Any, vocab_size: int) -> "SamplingParams":
        """Checks ``sampling_params``; a bad field is a :class:`BadRequest` naming it. What SGLang's
        ``SamplingParams.verify()`` refuses is refused first, with its message (the shared contract).

        Example::

            SamplingParams.parse({"temperature": 0.7, "max_new_tokens": 16}, 151936).temperature  # 0.7
        """
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise BadRequest("sampling_params", "must be an object")
        p = SamplingParams()
        bad = sampling_violation(raw, vocab_size)
        if bad is not None:
            raise BadRequest(f"sampling_params.{bad[0]}", bad[1])

        def number(key: str, ok, rule: str) -> Optional[float]:
            v = raw.get(key)
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not ok(v):
                raise BadRequest(f"sampling_params.{key}", f"must be {rule}, got {v!r}")
            return v

        v = number("max_new_tokens", lambda x: float(x).is_integer() and x >= 0, "an integer >= 0")
        if v is not None:
            p.max_new_tokens = int(v)
            p.max_new_tokens_given = True
        v = number("temperature", lambda x: x >= 0, "a number >= 0")
        if v is not None:
            p.temperature = float(v)
        v = number("top_p", lambda x: 0 < x <= 1, "a number in (0, 1]")
        if v is not None:
            p.top_p = float(v)
        v = number("top_k", lambda x: float(x).is_integer() and (x == -1 or x >= 1), "-1 or an integer >= 1")
        if v is not None:
            p.top_k = int(v)
        v = number("min_p", lambda x: 0 <= x <= 1, "a number in [0, 1]")
        if v is not None:
            p.min_p = float(v)
        v = number("sampling_seed", lambda x: float(x).is_integer(), "an integer")
        if v is not None:
            p.seed = int(v)
        for key, neutral in _NEUTRAL.items():
            v = number(key, lambda x: True, "a number")
            if v is not None and v != neutral:
                raise BadRequest(f"sampling_params.{key}", f"is not supported by the reference engine (only {neutral})")
        for key in _UNSUPPORTED:
            if raw.get(key) not in (None, "", {}, []):
                raise BadRequest(f"sampling_params.{key}", "is not supported by the reference engine")
        n = raw.get("n")
        if n not in (None, 1):
            raise BadRequest("sampling_params.n", "only n=1 is supported")
        stop = raw.get("stop")
        if stop is not None:
            stops = [stop] if isinstance(stop, str) else stop
            if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
                raise BadRequest("sampling_params.stop", "must be a non-empty string or a list of them")
            p.stop = list(stops)
        ids = raw.get("stop_token_ids")
        if ids is not None:
            if not isinstance(ids, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < vocab_size for i in ids
            ):
                raise BadRequest("sampling_params.stop_token_ids", f"must be a list of token ids below {vocab_size}")
            p.stop_token_ids = list(ids)
        for key in ("ignore_eos", "skip_special_tokens", "no_stop_trim", "spaces_between_special_tokens"):
            v = raw.get(key)
            if v is not None and not isinstance(v, bool):
                raise BadRequest(f"sampling_params.{key}", "must be a boolean")
        p.ignore_eos = bool(raw.get("ignore_eos", False))
        p.skip_special_tokens = bool(raw.get("skip_special_tokens", True))
        p.no_stop_trim = bool(raw.get("no_stop_trim", False))
        return p

    def describe(self) -> Dict[str, Any]:
        """The transforms applied, for logs and ``meta_info``."""
        return {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k, "min_p": self.min_p}


def sampling_logprobs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Log-probabilities of the distribution a token is drawn from, for one row of logits
    (``-inf`` where a transform removed the token).

    Example::

        lp = sampling_logprobs(torch.tensor([2.0, 1.0, 0.0]), SamplingParams(top_k=2))
        lp.exp().sum()  # 1.0, and lp[2] == -inf
    """
    logits = logits.float()
    if params.temperature == 0:
        out = torch.full_like(logits, -math.inf)
        out[int(torch.argmax(logits))] = 0.0
        return out
    lp = torch.log_softmax(logits / params.temperature, dim=-1)
    keep = torch.ones_like(lp, dtype=torch.bool)
    if params.top_k != -1 and params.top_k < lp.numel():
        kth = torch.topk(lp, params.top_k).values[-1]
        keep &= lp >= kth
    if params.top_p < 1.0:
        sorted_lp, order = torch.sort(lp, descending=True)
        cum = torch.cumsum(sorted_lp.exp(), dim=-1)
        # A token stays while the mass BEFORE it is below top_p (the first token always stays).
        drop_sorted = (cum - sorted_lp.exp()) >= params.top_p
        drop = torch.zeros_like(keep)
        drop[order] = drop_sorted
        keep &= ~drop
    if params.min_p > 0:
        keep &= lp >= (lp.max() + math.log(params.min_p))
    if bool(keep.all()):
        return lp
    masked = lp.masked_fill(~keep, -math.inf)
    return torch.log_softmax(masked, dim=-1)


def draw(logprobs: torch.Tensor, generator: Optional[torch.Generator]) -> int:
    """One token id drawn from ``exp(logprobs)``.

    Example::

        draw(torch.log(torch.tensor([0.0, 1.0])), None)  # 1
    """
    probs = logprobs.exp()
    return int(torch.multinomial(probs, 1, generator=generator).item())
