"""Weight versions on SGLang engines: the calls a trainer's update function makes inside the fence.

The fence labels every turn with the policy version, but a task's ``min_policy_version`` is
checked against what each ENGINE reports (``GET /model_info`` → ``weight_version``): a gateway
holds a turn until its replica reports at least that version. So an update function must leave
every engine reporting the new decimal version, or the sessions of the groups stamped with it are
held, then ended by the gateway's bound (``--policy-version-wait``, default 120 s) as errors naming
the gap, and ``next_batch()`` raises ``SchedulerError`` (docs/training.md, "A version no engine reaches").
SGLang starts at ``"default"`` (counted as 0 by the proxy); these calls set ``"1"``, ``"2"``, ….

* :func:`update_weights_from_disk` — SGLang loads a checkpoint and takes ``weight_version``;
* :func:`set_weight_version` — ``/update_weight_version``, for a trainer that pushed the tensors
  itself (NCCL, ``update_weights_from_tensor``) and only relabels;
* :func:`weight_versions` — what each engine reports now.

Example::

    def push(version: str) -> None:
        engines.update_weights_from_disk(ENGINE_URLS, f"ckpt/step-{version}", version)

    sched.update_weights(push)          # pause → push("N") → resume with N
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Sequence, Union

from .errors import EngineError

Urls = Union[str, Sequence[str]]


def _urls(urls: Urls) -> List[str]:
    out = [urls] if isinstance(urls, str) else list(urls)
    if not out:
        raise ValueError("engine_urls is empty")
    return [u.rstrip("/") for u in out]


def _version(version: Any) -> str:
    v = str(version)
    if not v.isdigit() or (len(v) > 1 and v[0] == "0"):
        raise ValueError(f"version must be a decimal integer (the fence's policy versions are), got {version!r}")
    return v


def _call(url: str, method: str, path: str, body: Optional[Dict[str, Any]], timeout: float) -> Dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            text = res.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        raise EngineError(url, e.code, f"{path}: {e.read().decode('utf-8', 'replace')[:500]}") from e
    except (OSError, ValueError) as e:
        raise EngineError(url, 0, f"{path}: {e}") from e
    try:
        out = json.loads(text) if text.strip() else {}
    except ValueError as e:
        raise EngineError(url, 200, f"{path}: not JSON: {text[:200]!r}") from e
    if isinstance(out, dict) and out.get("success") is False:
        raise EngineError(url, 200, f"{path}: {out.get('message', 'success: false')}")
    return out if isinstance(out, dict) else {"value": out}


def update_weights_from_disk(
    engine_urls: Urls, model_path: str, version: Any, abort_all_requests: bool = False, timeout: float = 600
) -> List[Dict[str, Any]]:
    """``POST /update_weights_from_disk {model_path, weight_version}`` on every engine, in order.

    Args:
        engine_urls: one URL or a list (each replica; a router's workers, not the router).
        model_path: the checkpoint the engines load.
        version: the new policy version (a decimal integer), reported afterwards by ``/model_info``.
        abort_all_requests: SGLang aborts what is still running (not needed inside a drained fence).

    Returns:
        Each engine's answer. Raises :class:`EngineError` at the first engine that fails.

    Example::

        update_weights_from_disk(["http://gpu-0:30000", "http://gpu-1:30000"], "ckpt/step-3", 3)
    """
    v = _version(version)
    body = {"model_path": model_path, "weight_version": v, "abort_all_requests": abort_all_requests}
    return [_call(u, "POST", "/update_weights_from_disk", body, timeout) for u in _urls(engine_urls)]


def set_weight_version(engine_urls: Urls, version: Any, abort_all_requests: bool = False, timeout: float = 60) -> List[Dict[str, Any]]:
    """``POST /update_weight_version {new_version}`` on every engine: the label only, for weights the
    trainer pushed itself.

    Example::

        set_weight_version(ENGINE_URLS, 4)
    """
    body = {"new_version": _version(version), "abort_all_requests": abort_all_requests}
    return [_call(u, "POST", "/update_weight_version", body, timeout) for u in _urls(engine_urls)]


def weight_versions(engine_urls: Urls, timeout: float = 30) -> Dict[str, Optional[str]]:
    """Each engine's ``weight_version`` from ``GET /model_info`` (None when it reports none).

    Example::

        assert set(weight_versions(ENGINE_URLS).values()) == {"4"}
    """
    out: Dict[str, Optional[str]] = {}
    for u in _urls(engine_urls):
        v = _call(u, "GET", "/model_info", None, timeout).get("weight_version")
        out[u] = None if v is None else str(v)
    return out
