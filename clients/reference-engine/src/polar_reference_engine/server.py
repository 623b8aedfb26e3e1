"""HTTP front of the reference engine: the subset of SGLang's native API that Polar-TS uses, in
SGLang's shapes (``docs/reference-engine.md`` lists every route).

Each connection gets a thread (``ThreadingHTTPServer``); a ``/generate`` thread hands its request
to the engine's loop and waits, watching its socket: a client that hangs up aborts its request, as
SGLang does. Errors are ``{"error": {"code", "message", "param"}}`` with HTTP 400 for bad input
(the field is named in ``param`` and in the message) and 404 for an unknown route.
"""

from __future__ import annotations

import json
import select
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Optional, Tuple

from . import __version__
from .engine import Engine, Request, encode_routes
from .errors import BadRequest, EngineError, WeightLoadError

#: Largest request body accepted (a 40k-token prompt is well under 1 MB of JSON).
MAX_BODY_BYTES = 8 * 1024 * 1024
#: What ``/model_info`` and ``/v1/models`` call the served model unless told otherwise.
DEFAULT_SERVED_NAME = "polar-reference-tiny"
#: Fields of ``/generate`` this engine refuses rather than ignore (they change what comes back).
UNSUPPORTED_GENERATE = ("input_embeds", "image_data", "video_data", "audio_data", "lora_path", "session_params")


def _client_gone(sock: socket.socket) -> bool:
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class Handler(BaseHTTPRequestHandler):
    server_version = f"polar-reference-engine/{__version__}"
    protocol_version = "HTTP/1.1"
    engine: Engine
    served_name: str
    quiet: bool

    # -- plumbing --------------------------------------------------------------------------------

    def log_message(self, fmt: str, *args: Any) -> None:  # noqa: D102 - http.server hook
        if not self.quiet:
            super().log_message(fmt, *args)

    def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, code: str, message: str, param: Optional[str] = None) -> None:
        self._send(status, {"error": {"code": code, "message": message, "param": param}})

    def _body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            raise BadRequest("(body)", f"is {length} bytes, at most {MAX_BODY_BYTES}")
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except ValueError as err:
            raise BadRequest("(body)", f"is not JSON: {err}") from err

    def _object(self) -> Dict[str, Any]:
        body = self._body()
        if not isinstance(body, dict):
            raise BadRequest("(body)", "must be a JSON object")
        return body

    def _route(self, method: str) -> None:
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        handler = ROUTES.get((method, path))
        if handler is None:
            known = any(p == path for _, p in ROUTES)
            self._error(405 if known else 404, "not_found", f"{method} {path} is not a route of this engine")
            return
        try:
            handler(self)
        except EngineError as err:
            if isinstance(err, WeightLoadError):
                self._send(err.status, {"success": False, "message": str(err), "error": {"code": err.code, "message": str(err), "param": err.field}})
            else:
                self._error(err.status, err.code, str(err), err.field or None)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:  # noqa: N802 - http.server names
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_PUT(self) -> None:  # noqa: N802 - SGLang also takes PUT /generate
        self._route("PUT")

    # -- routes ----------------------------------------------------------------------------------

    def health(self) -> None:
        self._send(200, b"", "text/plain")

    def model_info(self) -> None:
        e = self.engine
        cfg = e.model.config
        self._send(
            200,
            {
                "model_path": e.model_path,
                "tokenizer_path": e.model_path if e.tokenizer is not None else None,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": e.weight_version,
                "has_image_understanding": False,
                "model_type": getattr(cfg, "model_type", None),
                "architectures": getattr(cfg, "architectures", None),
                "served_model_name": self.served_name,
            },
        )

    def server_info(self) -> None:
        e = self.engine
        self._send(
            200,
            {
                "model_path": e.model_path,
                "tokenizer_path": e.model_path if e.tokenizer is not None else None,
                "served_model_name": self.served_name,
                "context_length": e.context_length,
                "max_running_requests": e.max_batch,
                "weight_version": e.weight_version,
                "version": __version__,
                "engine": "polar-reference-engine",
                "sampling": "recorded logprobs are those of the distribution sampled from: "
                "temperature, then top_k, then top_p, then min_p, renormalised; temperature 0 is greedy (logprob 0)",
                "internal_states": [e.snapshot()],
                # SGLang's server argument, and the MoE shape a route row has (None: dense).
                "enable_return_routed_experts": e.enable_return_routed_experts,
                "moe_config": e.moe_shape,
            },
        )

    def models(self) -> None:
        self._send(
            200,
            {
                "object": "list",
                "data": [
                    {"id": self.served_name, "object": "model", "owned_by": "polar", "max_model_len": self.engine.context_length}
                ],
            },
        )

    def loads(self) -> None:
        s = self.engine.snapshot()
        self._send(
            200,
            {"loads": [{"dp_rank": 0, "num_running_reqs": s["num_running_reqs"], "num_waiting_reqs": s["num_waiting_reqs"]}]},
        )

    def generate(self) -> None:
        body = self._body()
        if isinstance(body, list) or not isinstance(body, dict):
            raise BadRequest("(body)", "must be one request object (batches are not supported)")
        ids = body.get("input_ids")
        if body.get("text") is not None:
            raise BadRequest("text", "the reference engine takes input_ids only (the proxy renders the template)")
        if isinstance(ids, list) and ids and isinstance(ids[0], list):
            raise BadRequest("input_ids", "batches (a list of lists) are not supported; send one prompt per request")
        for key in UNSUPPORTED_GENERATE:
            if body.get(key) not in (None, [], ""):
                raise BadRequest(key, "is not supported by the reference engine")
        if body.get("stream"):
            raise BadRequest("stream", "streaming is not supported by the reference engine; send stream: false")
        start = body.get("logprob_start_len")
        if start not in (None, -1):
            raise BadRequest("logprob_start_len", "only -1 (output tokens only) is supported")
        if body.get("top_logprobs_num") not in (None, 0) or body.get("token_ids_logprob") not in (None, []):
            raise BadRequest("top_logprobs_num", "top logprobs are not supported by the reference engine")
        rid = body.get("rid")
        if rid is not None and (not isinstance(rid, str) or not rid):
            raise BadRequest("rid", "must be a non-empty string")
        routed_start = body.get("routed_experts_start_len")
        if routed_start is None:
            routed_start = 0
        if not isinstance(routed_start, int) or isinstance(routed_start, bool):
            raise BadRequest("routed_experts_start_len", "must be an integer")
        started = time.monotonic()
        req = self.engine.submit(
            ids, body.get("sampling_params"), rid, routed_start if body.get("return_routed_experts") else None
        )
        while not self.engine.wait(req, 0.05):
            if _client_gone(self.connection):
                self.engine.abort(req.rid, "Abort: the client disconnected")
                return
        self._send(200, self._generate_response(req, body, time.monotonic() - started))

    def _generate_response(self, req: Request, body: Dict[str, Any], latency: float) -> Dict[str, Any]:
        e = self.engine
        p = req.params
        tok = e.tokenizer
        with_text = bool(body.get("return_text_in_logprobs"))
        text = None
        if tok is not None:
            ids = req.output_ids
            finish = req.finish or {}
            if not p.no_stop_trim and finish.get("type") == "stop" and isinstance(finish.get("matched"), int):
                ids = ids[:-1]
            text = tok.decode(ids, skip_special_tokens=p.skip_special_tokens)
            matched = finish.get("matched")
            if not p.no_stop_trim and isinstance(matched, str) and matched in text:
                text = text[: text.index(matched)]
        meta: Dict[str, Any] = {
            "id": req.rid,
            "finish_reason": req.finish,
            "prompt_tokens": len(req.prompt_ids),
            "completion_tokens": len(req.output_ids),
            "cached_tokens": 0,
            "weight_version": req.weight_version,
            "e2e_latency": latency,
        }
        if body.get("return_logprob"):
            meta["output_token_logprobs"] = [
                [lp, tid, tok.decode([tid], skip_special_tokens=False) if with_text and tok is not None else None]
                for lp, tid in zip(req.logprobs, req.output_ids)
            ]
        routes = e.routed_experts(req)
        if routes is not None:
            # As SGLang: base64 int32 [rows, num_hidden_layers, num_experts_per_tok], only when the
            # server captures routes and the request asked for them.
            meta["routed_experts"] = encode_routes(routes)
        out: Dict[str, Any] = {"text": text, "output_ids": list(req.output_ids), "meta_info": meta}
        if body.get("return_prompt_token_ids"):
            out["prompt_token_ids"] = list(req.prompt_ids)
        return out

    def abort_request(self) -> None:
        body = self._object()
        if body.get("abort_all"):
            n = self.engine.abort(None)
        else:
            rid = body.get("rid")
            if not isinstance(rid, str) or not rid:
                raise BadRequest("rid", "give a request id, or abort_all: true")
            n = self.engine.abort(rid)
        self._send(200, {"success": True, "aborted": n})

    def pause_generation(self) -> None:
        mode = self._object().get("mode", "abort")
        if mode not in ("abort", "retract", "in_place"):
            raise BadRequest("mode", f"must be abort, retract or in_place, got {mode!r}")
        self.engine.pause(mode)
        self._send(200, {"message": "Generation paused successfully.", "status": "ok"})

    def continue_generation(self) -> None:
        self._object()
        self.engine.resume()
        self._send(200, {"message": "Generation continued successfully.", "status": "ok"})

    def update_weights_from_disk(self) -> None:
        body = self._object()
        path = body.get("model_path")
        if not isinstance(path, str) or not path:
            raise BadRequest("model_path", "must name a checkpoint folder")
        version = body.get("weight_version")
        if version is not None and not isinstance(version, (str, int)):
            raise BadRequest("weight_version", "must be a string")
        held = self.engine.update_weights(path, None if version is None else str(version), bool(body.get("abort_all_requests")))
        self._send(200, {"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": held})

    def update_weight_version(self) -> None:
        body = self._object()
        version = body.get("new_version")
        if not isinstance(version, (str, int)) or version == "":
            raise BadRequest("new_version", "must be a non-empty string")
        if body.get("abort_all_requests"):
            self.engine.abort(None, "Abort: weight version updated")
        self.engine.set_weight_version(str(version))
        self._send(200, {"success": True, "message": "Succeeded to update weight version."})

    def flush_cache(self) -> None:
        self._send(200, b"Cache flushed.\n", "text/plain")


ROUTES: Dict[Tuple[str, str], Callable[[Handler], None]] = {
    ("GET", "/health"): Handler.health,
    ("GET", "/health_generate"): Handler.health,
    ("GET", "/model_info"): Handler.model_info,
    ("GET", "/get_model_info"): Handler.model_info,
    ("GET", "/server_info"): Handler.server_info,
    ("GET", "/get_server_info"): Handler.server_info,
    ("GET", "/v1/models"): Handler.models,
    ("GET", "/v1/loads"): Handler.loads,
    ("POST", "/generate"): Handler.generate,
    ("PUT", "/generate"): Handler.generate,
    ("POST", "/abort_request"): Handler.abort_request,
    ("POST", "/pause_generation"): Handler.pause_generation,
    ("POST", "/continue_generation"): Handler.continue_generation,
    ("POST", "/update_weights_from_disk"): Handler.update_weights_from_disk,
    ("POST", "/update_weight_version"): Handler.update_weight_version,
    ("POST", "/flush_cache"): Handler.flush_cache,
    ("GET", "/flush_cache"): Handler.flush_cache,
}


def make_server(engine: Engine, host: str = "127.0.0.1", port: int = 0, served_name: str = DEFAULT_SERVED_NAME, quiet: bool = True) -> ThreadingHTTPServer:
    """An HTTP server for ``engine`` (not yet serving; call ``serve_forever``).

    Example::

        srv = make_server(engine, port=0); port = srv.server_address[1]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    """
    handler = type("BoundHandler", (Handler,), {"engine": engine, "served_name": served_name, "quiet": quiet})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
