"""The ``/generate`` contract this engine shares with Polar-TS's proxy and simulator.

The rules live once, in Polar-TS's ``protocol/sglang-contract.ts``; ``sglang_contract.json`` next
to this module is its generated copy (``npm run gen:sglang-contract``; a Polar-TS test fails when
the copy is stale). They mirror SGLang (the version is named in the file's ``mirrors``): the bounds
``SamplingParams.verify()`` enforces and the context-limit rule of
``TokenizerManager._validate_one_request``, each refused with SGLang's own message.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from typing import Any, Dict, Optional, Tuple


def _load() -> Dict[str, Any]:
    text = resources.files(__package__).joinpath("sglang_contract.json").read_text(encoding="utf-8")
    return json.loads(text)


#: The contract as generated from ``protocol/sglang-contract.ts``.
CONTRACT: Dict[str, Any] = _load()


def _fmt(template: str, **values: Any) -> str:
    out = template
    for key, value in values.items():
        out = out.replace("{" + key + "}", str(value))
    return out


def _shown(value: Any) -> str:
    # Whole floats print as integers, as JavaScript's String() does in the proxy's messages.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value) if isinstance(value, str) else str(value)


def _in_bound(bound: Dict[str, Any], v: float) -> bool:
    if not math.isfinite(v):
        return False
    if v in bound.get("also", []):
        return True
    if bound.get("integer") and not float(v).is_integer():
        return False
    lo = bound.get("min")
    if lo is not None and (v <= lo if bound.get("minExclusive") else v < lo):
        return False
    hi = bound.get("max")
    if hi is not None and v > hi:
        return False
    return True


def sampling_violation(params: Dict[str, Any], vocab_size: Optional[int] = None) -> Optional[Tuple[str, str]]:
    """The first ``(field, message)`` SGLang's ``SamplingParams.verify()`` would refuse, in its
    order, or None. ``None`` values are SGLang's defaults and pass.

    Example::

        sampling_violation({"repetition_penalty": 3})
        # ("repetition_penalty", "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 3.")
    """
    messages = CONTRACT["messages"]
    for bound in CONTRACT["sampling"]:
        field = bound["field"]
        v = params.get(field)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and math.isnan(v)):
            return field, _fmt(messages["notNumber"], field=field, value=_shown(v))
        if not _in_bound(bound, v):
            return field, _fmt(messages["bound"], field=field, rule=bound["rule"], value=_shown(v))
    lo, hi = params.get("min_new_tokens"), params.get("max_new_tokens")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo > hi:
        return "min_new_tokens", _fmt(messages["minAboveMax"], max=_shown(hi), value=_shown(lo))
    bias = params.get("logit_bias")
    if vocab_size is not None and bias is not None:
        if not isinstance(bias, dict):
            return "logit_bias", "logit_bias must be an object of token id → bias."
        for key in bias:
            try:
                ok = 0 <= int(key) < vocab_size and str(int(key)) == str(key).strip()
            except (TypeError, ValueError):
                ok = False
            if not ok:
                return "logit_bias", _fmt(messages["logitBias"], last=vocab_size - 1, key=key)
    grammars = [g for g in CONTRACT["grammars"] if params.get(g) is not None]
    if len(grammars) > 1:
        return grammars[1], messages["grammars"]
    return None


def context_violation(input_tokens: int, max_new_tokens: Optional[int], context_length: int) -> Optional[Tuple[str, str]]:
    """SGLang's context-limit refusal as ``(field, message)``, or None: a prompt of the context
    length or more, or (when ``max_new_tokens`` is given) ``input + max_new_tokens`` reaching it.

    Example::

        context_violation(900, 100, 1000)[0]  # "max_new_tokens"
        context_violation(900, 99, 1000)  # None
    """
    rule = CONTRACT["context"]
    if input_tokens >= context_length:
        return "input_ids", _fmt(rule["inputMessage"], input=input_tokens, context=context_length)
    if max_new_tokens is not None and input_tokens + max_new_tokens > context_length - rule["outputRoom"]:
        return "max_new_tokens", _fmt(
            rule["totalMessage"],
            context=context_length,
            total=input_tokens + max_new_tokens,
            input=input_tokens,
            max_new_tokens=max_new_tokens,
        )
    return None


def max_new_tokens_room(input_tokens: int, context_length: int) -> int:
    """The most new tokens a prompt may ask under :func:`context_violation`.

    Example::

        max_new_tokens_room(900, 1000)  # 99
    """
    return context_length - input_tokens - CONTRACT["context"]["outputRoom"]
