"""Upstream Polar's client calls, replayed exactly: the slime bridge's and the ``polar`` CLI's.

What each function does on the wire follows upstream's ``src/slime_bridge/rollout.py``,
``src/slime_bridge/adapter.py`` and ``src/polar/cli.py``: which URL it builds from the configured
base URL, which requests carry ``X-Polar-Control-Token`` (only submits, ``/nodes`` and gateway
admin calls; never status polls or cancels), query parameters, timeouts, and how answers are
validated (``TaskStatus``/``TaskResult``). The callback listener answers as the bridge's
(``{"ok": true}`` or ``{"ok": false, "reason": …}``). ``WeightUpdateFence`` is the bridge's
``pause_for_weight_update`` / ``resume_after_weight_update``: discovery by ``GET /nodes``, every
gateway paused at once, a partial pause undone, fail closed on bad discovery or answers. Nothing
here knows Polar-TS's own API.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from upstream_models import LATEST, GenerationStatus, validate_nodes, validate_task_result, validate_task_status

POLL_INTERVAL = 2.0
TASK_STATUS_GET_MAX_ATTEMPTS = 5
RETRYABLE = {408, 425, 429, 500, 502, 503, 504}


def control_plane_headers() -> dict[str, str]:
    """The bridge's submit headers: the token only when ``POLAR_CONTROL_PLANE_TOKEN`` is set."""
    headers = {"Content-Type": "application/json"}
    token = os.environ.get("POLAR_CONTROL_PLANE_TOKEN", "").strip()
    if token:
        headers["X-Polar-Control-Token"] = token
    return headers


def get_task_status_with_retry(client: httpx.Client, base_url: str, task_id: str) -> dict[str, Any]:
    """The training path's fallback poll: no credentials, retried on transient codes."""
    url = f"{base_url}/rollout/task/{task_id}"
    for attempt in range(1, TASK_STATUS_GET_MAX_ATTEMPTS + 1):
        try:
            response = client.get(url)
            response.raise_for_status()
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code not in RETRYABLE or attempt >= TASK_STATUS_GET_MAX_ATTEMPTS:
                raise
        else:
            payload = response.json()
            validate_task_status(payload)
            return payload
        time.sleep(0.5 * 2 ** (attempt - 1))
    raise AssertionError("unreachable")


def submit_and_wait_for_task(
    client: httpx.Client,
    base_url: str,
    payload: dict[str, Any],
    *,
    poll_interval: float = POLL_INTERVAL,
    deadline_s: float = 120.0,
) -> dict[str, Any]:
    """The eval path: submit with the control headers, then poll (no credentials) until terminal.

    Upstream loops forever and swallows poll errors; here a deadline bounds the test, and the
    last poll error is raised, so a 401 on every poll fails instead of hanging.
    """
    resp = client.post(f"{base_url}/rollout/task/submit", json=payload, headers=control_plane_headers())
    resp.raise_for_status()
    task_id = resp.json()["task_id"]
    end = time.monotonic() + deadline_s
    last_error: Exception | None = None
    while time.monotonic() < end:
        time.sleep(poll_interval)
        try:
            status_resp = client.get(f"{base_url}/rollout/task/{task_id}")
            status_resp.raise_for_status()
        except (httpx.HTTPStatusError, httpx.TransportError) as exc:
            last_error = exc
            continue
        status = status_resp.json()
        validate_task_status(status)
        if status["status"] in ("completed", "failed"):
            return {
                "task_id": task_id,
                "status": status["status"],
                "results": status["results"],
                "result_paths": status["result_paths"],
            }
    raise TimeoutError(f"task {task_id} did not finish; last poll error: {last_error}")


def cancel_remote(client: httpx.Client, base_url: str, task_id: str) -> httpx.Response:
    """The worker's shutdown cancel: no credentials, ``register_if_missing=true``, 10 s timeout."""
    return client.delete(
        f"{base_url}/rollout/task/{task_id}", params={"register_if_missing": "true"}, timeout=10.0
    )


class CallbackListener:
    """The bridge's ``POST /callback/task_result`` listener on an ephemeral loopback port."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.received: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.rejected: list[str] = []
        self._events: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                answer = listener._accept(self.path, dict(self.headers), body)
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self._server.server_address[1]}/callback/task_result"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _accept(self, path: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        if path != "/callback/task_result":
            return {"ok": False, "reason": "not found"}
        payload = json.loads(body)
        task_id = payload.get("task_id") if isinstance(payload, dict) else None
        if not task_id:
            return {"ok": False, "reason": "missing task_id"}
        try:
            validate_task_result(payload)
        except Exception as exc:  # the bridge logs and answers invalid payload
            self.rejected.append(f"{task_id}: {exc}")
            return {"ok": False, "reason": "invalid payload"}
        with self._lock:
            self.received.append((headers, payload))
            event = self._events.setdefault(task_id, threading.Event())
        event.set()
        return {"ok": True}

    def register(self, task_id: str) -> threading.Event:
        """Registers the wait event BEFORE the submit, as the bridge does."""
        with self._lock:
            event = threading.Event()
            self._events[task_id] = event
            return event

    def results_for(self, task_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [p for _, p in self.received if p["task_id"] == task_id]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def submit_with_callback(
    client: httpx.Client,
    base_url: str,
    payload: dict[str, Any],
    listener: CallbackListener,
    *,
    fallback_poll_s: float = 60.0,
    deadline_s: float = 120.0,
) -> dict[str, Any]:
    """The training path: event registered first, ``callback_url`` set, submit, wait, poll as backstop."""
    task_id = payload["task_id"]
    event = listener.register(task_id)
    payload["callback_url"] = listener.url
    resp = client.post(f"{base_url}/rollout/task/submit", json=payload, headers=control_plane_headers())
    resp.raise_for_status()
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if event.wait(timeout=min(fallback_poll_s, max(0.0, end - time.monotonic()))):
            results = listener.results_for(task_id)
            if results:
                return results[-1]
        status = get_task_status_with_retry(client, base_url, task_id)
        if status["status"] in ("completed", "failed"):
            return {k: status[k] for k in ("task_id", "status", "results", "result_paths")}
    raise TimeoutError(f"task {task_id}: no callback and not finished")


def polar_status(rollout_url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``polar status --rollout-url URL``: ``/health`` and ``/rollout/status``, no credentials."""
    with httpx.Client(base_url=rollout_url.rstrip("/"), timeout=httpx.Timeout(10.0, connect=5.0)) as client:
        health = client.get("/health").json()
        status = client.get("/rollout/status").json()
    return health, status


def polar_submit(rollout_url: str, payload: dict[str, Any], poll_interval: float = 1.0) -> dict[str, Any]:
    """``polar submit``: the token (when set) on every request of its client, polls until terminal."""
    token = os.environ.get("POLAR_CONTROL_PLANE_TOKEN", "").strip()
    headers = {"X-Polar-Control-Token": token} if token else None
    with httpx.Client(base_url=rollout_url.rstrip("/"), timeout=httpx.Timeout(None, connect=30.0), headers=headers) as c:
        submit = c.post("/rollout/task/submit", json=payload)
        submit.raise_for_status()
        task_id = submit.json()["task_id"]
        while True:
            time.sleep(poll_interval)
            r = c.get(f"/rollout/task/{task_id}")
            r.raise_for_status()
            result = r.json()
            if str(result.get("status")) in ("completed", "failed"):
                return result


def scheduler_metadata(result: dict[str, Any], trace: dict[str, Any] | None) -> dict[str, Any]:
    """The adapter's merge: result, then trajectory, then trace metadata; the last one wins."""
    merged: dict[str, Any] = {}
    for source in (result.get("metadata"), result["trajectory"].get("metadata"), (trace or {}).get("metadata")):
        if isinstance(source, dict):
            for key in ("group_id", "policy_version", "rollout_step"):
                if key in source:
                    merged[key] = source[key]
    return merged


def is_trainable_agent_timeout(result: dict[str, Any], trace: dict[str, Any]) -> bool:
    """The adapter's rule for a zero-reward negative instead of a masked sample."""
    trajectory = result["trajectory"]
    if trajectory["status"] != "TIMEOUT" or result["status"] != "TIMEOUT":
        return False
    agent = trajectory["metadata"].get("agent_result")
    if not isinstance(agent, dict) or agent.get("status") != "timeout":
        return False
    if agent.get("timeout_source") != "agent" or agent.get("timeout_stage") != "exec":
        return False
    flt = trace["metadata"].get("training_filter")
    if not isinstance(flt, dict) or flt.get("reason") != "agent_timeout":
        return False
    if flt.get("trainable") is not True or flt.get("masked") is True:
        return False
    evaluation = trajectory["metadata"].get("evaluation")
    return not (isinstance(evaluation, dict) and evaluation.get("verifier_timeout") is True)


def latest_results(payload: dict[str, Any]) -> list[Any]:
    """The results of a TaskStatus/TaskResult parsed with the newer upstream models."""
    return list(LATEST.TaskStatus.model_validate({"total_sessions": 0, "completed_sessions": 0, **payload}).results)


@dataclass
class FenceCall:
    """One call the fence made to a gateway URL, as it went on the wire."""

    url: str
    action: str
    status: int | None
    body: Any = None
    error: str | None = None


@dataclass
class WeightUpdateFence:
    """The bridge's weight-update fence, with its module state (the URLs it paused) per instance.

    As upstream: discovery fails closed (non-2xx, not a non-empty list, a row without
    ``gateway_url``, duplicate URLs); every gateway is paused in parallel with
    ``timeout_seconds`` = ``polar_weight_update_pause_timeout`` (request timeout that + 30 s);
    each answer must be a dict with ``paused`` exactly True and ``inflight`` exactly the int 0
    (resume: ``paused`` exactly False); on any failure every discovered gateway is resumed before
    the error is raised; a second pause before a resume is refused. The replay adds one thing:
    every 2xx answer is validated with the mirror models first.
    """

    calls: list[FenceCall] = field(default_factory=list)
    rollback_errors: list[str] = field(default_factory=list)
    paused: tuple[str, ...] = ()
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def discover(self, args: Any) -> tuple[str, ...]:
        rollout_url = str(getattr(args, "polar_rollout_url", "") or "").rstrip("/")
        if not rollout_url:
            raise RuntimeError("polar_rollout_url is required for weight-update coordination")
        with httpx.Client(timeout=30.0, headers=control_plane_headers()) as client:
            response = client.get(f"{rollout_url}/nodes")
            response.raise_for_status()
            nodes = response.json()
        validate_nodes(nodes)
        if not isinstance(nodes, list) or not nodes:
            raise RuntimeError("the rollout service returned an empty or malformed gateway fleet")
        urls: list[str] = []
        for node in nodes:
            url = node.get("gateway_url") if isinstance(node, dict) else None
            if not isinstance(url, str) or not url.strip():
                raise RuntimeError("the rollout service returned a node without gateway_url")
            urls.append(url.rstrip("/"))
        if len(set(urls)) != len(urls):
            raise RuntimeError("the rollout service returned duplicate gateway URLs")
        return tuple(urls)

    def _control(self, url: str, action: str, pause_timeout: float) -> dict[str, Any]:
        params = {"timeout_seconds": pause_timeout} if action == "pause" else None
        request_timeout = pause_timeout + 30.0 if action == "pause" else 30.0
        call = FenceCall(url, action, None)
        with self._lock:
            self.calls.append(call)
        try:
            with httpx.Client(timeout=request_timeout, headers=control_plane_headers()) as client:
                response = client.post(f"{url}/admin/inference/{action}", params=params)
            call.status = response.status_code
            call.body = response.json() if response.content else None
            response.raise_for_status()
        except Exception as exc:
            call.error = f"{type(exc).__name__}: {exc}"
            raise
        payload = call.body
        GenerationStatus.model_validate(payload)
        if not isinstance(payload, dict):
            raise RuntimeError(f"gateway {url} returned a malformed {action} status")
        expected = action == "pause"
        if payload.get("paused") is not expected:
            raise RuntimeError(f"gateway {url} did not enter paused={expected}")
        inflight = payload.get("inflight")
        if action == "pause" and (type(inflight) is not int or inflight != 0):
            raise RuntimeError(f"gateway {url} pause returned nonzero or malformed inflight={inflight!r}")
        return payload

    def _fleet(self, urls: tuple[str, ...], action: str, pause_timeout: float) -> None:
        errors: list[str] = []
        with ThreadPoolExecutor(max_workers=len(urls)) as pool:
            futures = {pool.submit(self._control, url, action, pause_timeout): url for url in urls}
            for future in as_completed(futures):
                try:
                    future.result()
                except Exception as exc:
                    errors.append(f"{futures[future]}: {type(exc).__name__}: {exc}")
        if errors:
            raise RuntimeError(f"Failed to {action} Polar gateway inference fleet: " + "; ".join(errors))

    def pause_for_weight_update(self, args: Any) -> None:
        timeout = float(getattr(args, "polar_weight_update_pause_timeout", 300.0))
        if not math.isfinite(timeout) or timeout <= 0:
            raise ValueError("polar_weight_update_pause_timeout must be positive and finite")
        if self.paused:
            raise RuntimeError("the gateway fleet is already paused for a weight update")
        urls = self.discover(args)
        try:
            self._fleet(urls, "pause", timeout)
        except Exception:
            try:
                self._fleet(urls, "resume", timeout)
            except Exception as exc:  # upstream logs it and raises the pause's error
                self.rollback_errors.append(str(exc))
            raise
        self.paused = urls

    def resume_after_weight_update(self, args: Any) -> None:
        timeout = float(getattr(args, "polar_weight_update_pause_timeout", 300.0))
        if not self.paused:
            raise RuntimeError("the gateway fleet was not paused for a weight update")
        self._fleet(self.paused, "resume", timeout)
        self.paused = ()
