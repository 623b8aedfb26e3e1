"""A stand-in of the control plane's fence routes, exactly the shapes docs/control-plane.md gives them
(durable per-queue state, ``{queue, fence, ok, nodes}`` answers, 400 naming the field, 401 for a
wrong token), for the failure paths of the client's fence (a node that does not drain, injected
5xx) that the real stack cannot be made to produce on demand. It serves nothing else: the real
routes are tested in test_fence_stack.py, batches, results and SSE against the real stack too.

Gateways are simulated as a list of nodes, each with the seconds its in-flight calls need to
drain (``drain_seconds``); a pause with ``timeout_seconds`` below that leaves the node with calls in
flight and the answer ``ok: false`` (the queue stays paused, as the contract says). Nothing sleeps.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple


class FenceStandIn:
    """Start with ``with FenceStandIn(token, nodes) as s: ... s.url``; ``s.requests`` logs every call."""

    def __init__(self, token: str, nodes: Optional[List[Dict[str, Any]]] = None) -> None:
        self.token = token
        self.nodes = nodes if nodes is not None else [{"node_id": "node-0", "drain_seconds": 0}]
        self.states: Dict[str, Dict[str, Any]] = {}
        self.requests: List[Tuple[str, str, Any]] = []
        self.fail_next: Dict[str, int] = {}  # path suffix -> HTTP status to answer once
        self._lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, body = standin.handle(method, self.path, self.headers.get("Authorization"), raw)
                self._send(status, body)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "FenceStandIn":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- the contract ----------------------------------------------------------------------------

    def _state(self, queue: str) -> Dict[str, Any]:
        if queue not in self.states:
            self.states[queue] = {
                "queue": queue,
                "paused": False,
                "mode": None,
                "policy_version": None,
                "fence_seq": 0,
                "paused_at": None,
                "updated_at": int(time.time() * 1000),
            }
        return self.states[queue]

    def _change(self, state: Dict[str, Any], **fields: Any) -> None:
        state.update(fields)
        state["fence_seq"] += 1
        state["updated_at"] = int(time.time() * 1000)

    def _nodes(self, state: Dict[str, Any], timeout: Optional[float]) -> List[Dict[str, Any]]:
        out = []
        for n in self.nodes:
            drained = not state["paused"] or timeout is None or n.get("drain_seconds", 0) <= timeout
            inflight = 0 if drained else int(n.get("inflight", 1))
            out.append(
                {
                    "node_id": n["node_id"],
                    "ok": drained,
                    "paused": state["paused"],
                    "inflight": inflight,
                    "policy_version": state["policy_version"],
                    **({} if drained else {"error": f"{inflight} calls still in flight after {timeout} s"}),
                }
            )
        return out

    @staticmethod
    def _bad(field: str, message: str) -> Tuple[int, Any]:
        return 400, {
            "error": {
                "code": "validation_failed",
                "message": f"{field}: {message}",
                "details": [{"field": field, "message": message}],
            }
        }

    def handle(self, method: str, path: str, auth: Optional[str], raw: bytes) -> Tuple[int, Any]:
        with self._lock:
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                return 400, {"error": {"code": "invalid_json", "message": "body is not JSON"}}
            self.requests.append((method, path, body))
            for suffix, status in list(self.fail_next.items()):
                if path.endswith(suffix):
                    del self.fail_next[suffix]
                    return status, {"error": {"code": "unavailable", "message": "stand-in failure"}}
            if auth != f"Bearer {self.token}":
                return 401, {"error": {"code": "unauthorized", "message": "missing or wrong bearer token"}}
            parts = path.split("?")[0].strip("/").split("/")
            if len(parts) < 4 or parts[:2] != ["v1", "queues"]:
                return 404, {"error": {"code": "not_found", "message": f"no route {method} {path}"}}
            queue, rest = parts[2], "/".join(parts[3:])
            if not isinstance(body, dict):
                return self._bad("(body)", "expected an object")
            state = self._state(queue)
            if method == "GET" and rest == "inference":
                return 200, {"queue": queue, "fence": dict(state), "nodes": self._nodes(state, None)}
            if method != "POST":
                return 404, {"error": {"code": "not_found", "message": f"no route {method} {path}"}}
            if rest == "inference/pause":
                unknown = set(body) - {"mode", "timeout_seconds"}
                if unknown:
                    return self._bad(sorted(unknown)[0], "unknown key")
                mode = body.get("mode", "drain")
                if mode not in ("drain", "abort"):
                    return self._bad("mode", "must be drain or abort")
                timeout = body.get("timeout_seconds", 300)
                if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 < timeout <= 3600:
                    return self._bad("timeout_seconds", "must be a number > 0 and <= 3600")
                self._change(state, paused=True, mode=mode, paused_at=int(time.time() * 1000))
                nodes = self._nodes(state, timeout)
                return 200, {"queue": queue, "fence": dict(state), "ok": all(n["ok"] for n in nodes), "nodes": nodes}
            if rest in ("inference/resume", "policy_version"):
                allowed = {"policy_version"}
                unknown = set(body) - allowed
                if unknown:
                    return self._bad(sorted(unknown)[0], "unknown key")
                version = body.get("policy_version")
                if rest == "policy_version" and version is None:
                    return self._bad("policy_version", "required")
                if version is not None and (not isinstance(version, str) or not version):
                    return self._bad("policy_version", "must be a non-empty string")
                fields: Dict[str, Any] = {} if version is None else {"policy_version": version}
                if rest == "inference/resume":
                    fields.update(paused=False, mode=None, paused_at=None)
                self._change(state, **fields)
                nodes = self._nodes(state, None)
                return 200, {"queue": queue, "fence": dict(state), "ok": True, "nodes": nodes}
            return 404, {"error": {"code": "not_found", "message": f"no route {method} {path}"}}
