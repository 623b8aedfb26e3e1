"""The generation loop: every request in flight decodes together, one token per iteration.

One scheduler thread owns the model. Each iteration takes up to ``max_batch`` running requests
(first come, first served), runs ONE forward pass over all of them (right-padded: attention is
causal, so padding after a sequence never reaches its last position), draws each request's next
token from its own sampling distribution and retires the requests that stopped. A request that
arrives while others decode joins at the next iteration (continuous batching), so concurrent
``/generate`` calls really are served concurrently. Weight updates, pauses and aborts take effect
between iterations, never inside one: every token is sampled from exactly one set of weights, and
a request's ``weight_version`` is the version it finished under.

There is no KV cache: each iteration recomputes the whole sequence. For the short prompts and
answers of tests and demos that costs little, and it keeps the numbers a trainer recomputes with a
plain full-sequence forward pass equal to the engine's up to float rounding.

MoE routing replay (``enable_return_routed_experts``, an MoE checkpoint only): a forward hook on
each layer's router (``mlp.gate``) takes the expert ids the sparse block itself selects (the
router's own top-k of its softmax, what the experts then run on). A position's route is kept the
first time the position is computed (the prompt at the request's first iteration, each sampled
token at the iteration after it was drawn) and never recomputed, so a request holds one row per
position it ran, ``[0, prompt + output - 1)`` when it finishes (the last sampled token never
runs); padding positions of a batch are not kept.
"""

from __future__ import annotations

import base64
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch

from . import model as model_io
from .contract import context_violation, max_new_tokens_room
from .errors import BadRequest, Conflict, WeightLoadError
from .sampling import SamplingParams, draw, sampling_logprobs


@dataclass
class Request:
    """One ``/generate`` call in the engine."""

    rid: str
    prompt_ids: List[int]
    params: SamplingParams
    generator: Optional[torch.Generator]
    output_ids: List[int] = field(default_factory=list)
    logprobs: List[float] = field(default_factory=list)
    finish: Optional[Dict[str, Any]] = None
    weight_version: Optional[str] = None
    #: Where the returned routes start (None: the request asks for none).
    routed_experts_start: Optional[int] = None
    #: Routes kept so far, int32 ``(positions, layers, top_k)`` blocks in position order.
    routes: List[torch.Tensor] = field(default_factory=list)
    routed_positions: int = 0
    created: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class Stats:
    """Counters for ``/server_info`` (``internal_states``) and ``/v1/loads``."""

    started: float = field(default_factory=time.monotonic)
    busy_seconds: float = 0.0
    iterations: int = 0
    requests_total: int = 0
    finished_total: int = 0
    aborted_total: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    max_batch_seen: int = 0
    #: Iterations by how many requests they decoded together.
    batch_sizes: Dict[int, int] = field(default_factory=dict)
    weight_updates: int = 0


class Engine:
    """The model, its weight version and the requests in flight.

    Example::

        engine = Engine(".polar/tiny", weight_version="0")
        engine.start()
        req = engine.submit([151644, 872, 198], {"max_new_tokens": 4})
        engine.wait(req)
        req.output_ids, req.logprobs, req.finish
    """

    def __init__(
        self,
        model_path: str,
        weight_version: str = "default",
        context_length: Optional[int] = None,
        max_batch: int = 32,
        seed: Optional[int] = None,
        enable_return_routed_experts: bool = False,
    ) -> None:
        self.model_path = model_path
        self.model = model_io.load_model(model_path)
        self.enable_return_routed_experts = enable_return_routed_experts
        #: ``{"layers", "top_k", "experts"}`` of an MoE checkpoint, else None.
        self.moe_shape = moe_shape(self.model)
        if enable_return_routed_experts and self.moe_shape is None:
            raise ValueError(
                "--enable-return-routed-experts needs an MoE checkpoint with a router in every layer "
                f"(init --moe-experts E --moe-top-k K); {type(self.model).__name__} has none"
            )
        self.tokenizer = model_io.load_tokenizer(model_path)
        self.eos_ids = model_io.eos_ids(model_path, self.model)
        self.vocab_size = int(self.model.get_input_embeddings().weight.shape[0])
        limit = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        if context_length is not None and limit and context_length > limit:
            raise ValueError(f"context_length {context_length} exceeds the model's {limit} positions")
        self.context_length = context_length or limit or 2048
        self.weight_version = weight_version
        self.max_batch = max_batch
        self.generator = torch.Generator().manual_seed(seed) if seed is not None else None
        self.stats = Stats()
        self.paused = False
        self._cond = threading.Condition()
        self._running: List[Request] = []
        self._by_rid: Dict[str, Request] = {}
        self._pending_weights: Optional[tuple] = None
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="reference-engine", daemon=True)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout=10)

    # -- requests --------------------------------------------------------------------------------

    def submit(
        self, input_ids: Any, sampling: Any, rid: Optional[str] = None, routed_experts_start: Optional[int] = None
    ) -> Request:
        """Checks one request and queues it; a bad field raises :class:`BadRequest`.
        ``routed_experts_start`` (the request asks for routes from there) must be in
        ``[0, len(input_ids)]``, refused as SGLang's scheduler does."""
        if (
            not isinstance(input_ids, list)
            or not input_ids
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in input_ids)
        ):
            raise BadRequest("input_ids", "must be a non-empty list of token ids")
        bad = next((i for i in input_ids if not 0 <= i < self.vocab_size), None)
        if bad is not None:
            raise BadRequest("input_ids", f"token id {bad} is outside the vocabulary (size {self.vocab_size})")
        # SGLang checks the context limit (``_validate_one_request``) before ``SamplingParams.verify()``.
        raw_max = sampling.get("max_new_tokens") if isinstance(sampling, dict) else None
        explicit = raw_max if isinstance(raw_max, int) and not isinstance(raw_max, bool) else None
        bad = context_violation(len(input_ids), explicit, self.context_length)
        if bad is not None:
            raise BadRequest("input_ids" if bad[0] == "input_ids" else "sampling_params.max_new_tokens", bad[1])
        params = SamplingParams.parse(sampling, self.vocab_size)
        if not params.max_new_tokens_given:
            # A default budget is cut to what the context leaves, as SGLang's scheduler does.
            params.max_new_tokens = min(params.max_new_tokens, max_new_tokens_room(len(input_ids), self.context_length))
        if params.stop and self.tokenizer is None:
            raise BadRequest("sampling_params.stop", "stop strings need the model folder's tokenizer.json")
        if routed_experts_start is not None:
            if routed_experts_start > len(input_ids):
                raise BadRequest(
                    "routed_experts_start_len",
                    f"recv_req.routed_experts_start_len={routed_experts_start} is higher than the number of input "
                    f"tokens len(req.origin_input_ids)={len(input_ids)}. Please use a smaller routed_experts_start_len.",
                )
            if routed_experts_start < 0:
                raise BadRequest(
                    "routed_experts_start_len",
                    f"recv_req.routed_experts_start_len={routed_experts_start} is lower than 0. "
                    "Please use a non-negative routed_experts_start_len.",
                )
        gen = torch.Generator().manual_seed(params.seed) if params.seed is not None else self.generator
        req = Request(
            rid=rid or uuid.uuid4().hex,
            prompt_ids=list(input_ids),
            params=params,
            generator=gen,
            routed_experts_start=routed_experts_start,
        )
        with self._cond:
            if req.rid in self._by_rid:
                raise Conflict("rid", f"request {req.rid} is still running")
            self.stats.requests_total += 1
            self.stats.prompt_tokens_total += len(input_ids)
            if params.max_new_tokens == 0:
                self._finish(req, {"type": "length", "length": 0})
                return req
            self._by_rid[req.rid] = req
            self._running.append(req)
            self._cond.notify_all()
        return req

    def routed_experts(self, req: Request) -> Optional[torch.Tensor]:
        """The routes of a finished request, int32 ``(rows, layers, top_k)``, for positions
        ``[routed_experts_start, prompt + output - 1)`` as far as they ran; None when the engine
        captures none or the request asked for none."""
        if not self.enable_return_routed_experts or req.routed_experts_start is None or self.moe_shape is None:
            return None
        end = min(req.routed_positions, len(req.prompt_ids) + len(req.output_ids) - 1)
        start = min(req.routed_experts_start, max(end, 0))
        shape = (0, self.moe_shape["layers"], self.moe_shape["top_k"])
        rows = torch.cat(req.routes) if req.routes else torch.zeros(shape, dtype=torch.int32)
        return rows[start:end]

    def wait(self, req: Request, timeout: Optional[float] = None) -> bool:
        return req.done.wait(timeout)

    def abort(self, rid: Optional[str] = None, message: str = "Abort request") -> int:
        """Finishes ``rid`` (or, with None, every request) as aborted; returns how many."""
        with self._cond:
            targets = list(self._running) if rid is None else [r for r in self._running if r.rid == rid]
            for r in targets:
                self._retire(r, {"type": "abort", "message": message})
            return len(targets)

    # -- control ---------------------------------------------------------------------------------

    def pause(self, mode: str = "abort") -> int:
        """Stops decoding. ``abort`` finishes every request in flight as aborted; ``retract`` and
        ``in_place`` keep them, to go on after :meth:`resume`. Returns the requests it held or aborted."""
        with self._cond:
            self.paused = True
            n = len(self._running)
            if mode == "abort":
                for r in list(self._running):
                    self._retire(r, {"type": "abort", "message": "Abort: generation paused"})
            return n

    def resume(self) -> None:
        with self._cond:
            self.paused = False
            self._cond.notify_all()

    def update_weights(self, path: str, version: Optional[str], abort_all: bool = False) -> int:
        """Loads the checkpoint at ``path`` (on the caller's thread) and swaps it in between two
        iterations; returns the requests that were paused (held) during the swap."""
        try:
            new = model_io.load_model(path)
        except (OSError, ValueError) as err:
            raise WeightLoadError("model_path", f"cannot load {path}: {err}") from err
        old_shape = tuple(self.model.get_input_embeddings().weight.shape)
        new_shape = tuple(new.get_input_embeddings().weight.shape)
        if old_shape != new_shape:
            raise WeightLoadError("model_path", f"embedding shape {new_shape} differs from the served {old_shape}")
        if self.enable_return_routed_experts and moe_shape(new) != self.moe_shape:
            raise WeightLoadError("model_path", f"MoE shape {moe_shape(new)} differs from the served {self.moe_shape}")
        with self._cond:
            if abort_all:
                for r in list(self._running):
                    self._retire(r, {"type": "abort", "message": "Abort: weights updated"})
            held = len(self._running)
            ticket = object()
            self._pending_weights = (ticket, new, path, version)
            self._cond.notify_all()
            while self._pending_weights is not None and self._pending_weights[0] is ticket:
                if not self._thread.is_alive():
                    self._swap_locked()
                    break
                self._cond.wait(timeout=1.0)
            return held

    def set_weight_version(self, version: str) -> None:
        with self._cond:
            self.weight_version = version

    def snapshot(self) -> Dict[str, Any]:
        """The counters and the load now."""
        with self._cond:
            s = self.stats
            return {
                "uptime_seconds": time.monotonic() - s.started,
                "busy_seconds": s.busy_seconds,
                "iterations": s.iterations,
                "requests_total": s.requests_total,
                "finished_total": s.finished_total,
                "aborted_total": s.aborted_total,
                "prompt_tokens_total": s.prompt_tokens_total,
                "generation_tokens_total": s.generation_tokens_total,
                "max_batch_seen": s.max_batch_seen,
                "batch_sizes": {str(k): v for k, v in sorted(s.batch_sizes.items())},
                "weight_updates": s.weight_updates,
                "num_running_reqs": 0 if self.paused else min(len(self._running), self.max_batch),
                "num_waiting_reqs": len(self._running) if self.paused else max(0, len(self._running) - self.max_batch),
                "paused": self.paused,
                "weight_version": self.weight_version,
            }

    # -- the loop --------------------------------------------------------------------------------

    def _finish(self, req: Request, finish: Dict[str, Any]) -> None:
        req.finish = finish
        req.weight_version = self.weight_version
        self.stats.finished_total += 1
        if finish["type"] == "abort":
            self.stats.aborted_total += 1
        req.done.set()

    def _retire(self, req: Request, finish: Dict[str, Any]) -> None:
        if req in self._running:
            self._running.remove(req)
        self._by_rid.pop(req.rid, None)
        self._finish(req, finish)

    def _swap_locked(self) -> None:
        _, new, path, version = self._pending_weights  # type: ignore[misc]
        self.model = new
        self.model_path = path
        if version is not None:
            self.weight_version = str(version)
        self.stats.weight_updates += 1
        self._pending_weights = None
        self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stop and self._pending_weights is None and (self.paused or not self._running):
                    self._cond.wait()
                if self._stop:
                    return
                if self._pending_weights is not None:
                    self._swap_locked()
                    continue
                batch = self._running[: self.max_batch]
                model = self.model
            started = time.monotonic()
            try:
                self._step(model, batch)
            except Exception as err:  # a bug must not hang the callers: fail their requests
                with self._cond:
                    for r in batch:
                        self._retire(r, {"type": "abort", "message": f"engine error: {err}"})
            with self._cond:
                elapsed = time.monotonic() - started
                self.stats.busy_seconds += elapsed
                self.stats.iterations += 1
                self.stats.max_batch_seen = max(self.stats.max_batch_seen, len(batch))
                self.stats.batch_sizes[len(batch)] = self.stats.batch_sizes.get(len(batch), 0) + 1

    @torch.no_grad()
    def _step(self, model, batch: List[Request]) -> None:
        seqs = [r.prompt_ids + r.output_ids for r in batch]
        longest = max(len(s) for s in seqs)
        ids = torch.zeros((len(seqs), longest), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
        capture = self.enable_return_routed_experts and any(r.routed_experts_start is not None for r in batch)
        picked: List[torch.Tensor] = []
        hooks = []
        if capture:
            # The router returns (logits, weights, expert ids); the ids are what the block runs.
            def keep(_module, _inputs, output):
                picked.append(output[2])

            hooks = [layer.mlp.gate.register_forward_hook(keep) for layer in model.get_decoder().layers]
        try:
            hidden = model.get_decoder()(input_ids=ids).last_hidden_state
        finally:
            for h in hooks:
                h.remove()
        if capture:
            k = self.moe_shape["top_k"]  # type: ignore[index]
            # (batch, positions, layers, top_k), in layer order as the hooks fired.
            routes = torch.stack([p.reshape(len(seqs), longest, k) for p in picked], dim=2).to(torch.int32)
            for i, r in enumerate(batch):
                if r.routed_experts_start is not None and r.routed_positions < len(seqs[i]):
                    r.routes.append(routes[i, r.routed_positions : len(seqs[i])].clone())
                    r.routed_positions = len(seqs[i])
        last = hidden[torch.arange(len(seqs)), torch.tensor([len(s) - 1 for s in seqs])]
        logits = model.get_output_embeddings()(last)
        drawn = []
        for i, r in enumerate(batch):
            lp = sampling_logprobs(logits[i], r.params)
            token = draw(lp, r.generator)
            drawn.append((r, token, float(lp[token])))
        with self._cond:
            for r, token, logprob in drawn:
                if r.finish is not None:  # aborted while the step ran: its token is not served
                    continue
                r.output_ids.append(token)
                r.logprobs.append(logprob)
                self.stats.generation_tokens_total += 1
                finish = self._stopped(r, token)
                if finish is not None:
                    self._retire(r, finish)

    def _stopped(self, r: Request, token: int) -> Optional[Dict[str, Any]]:
        p = r.params
        if token in p.stop_token_ids or (not p.ignore_eos and token in self.eos_ids):
            return {"type": "stop", "matched": token}
        if p.stop:
            text = self.tokenizer.decode(r.output_ids, skip_special_tokens=False)
            for s in p.stop:
                if s in text:
                    return {"type": "stop", "matched": s}
        if len(r.output_ids) >= p.max_new_tokens:
            return {"type": "length", "length": len(r.output_ids)}
        return None


def moe_shape(model) -> Optional[Dict[str, int]]:
    """``{"layers", "top_k", "experts"}`` when every decoder layer of ``model`` has a top-k router
    (``mlp.gate`` with ``top_k``, as transformers' Qwen3-MoE), else None.

    Example::

        moe_shape(load_model(".polar/tiny-moe"))  # {"layers": 2, "top_k": 2, "experts": 8}
    """
    layers = getattr(model.get_decoder(), "layers", None)
    if not layers:
        return None
    gates = [getattr(getattr(layer, "mlp", None), "gate", None) for layer in layers]
    if any(g is None or not hasattr(g, "top_k") or not hasattr(g, "num_experts") for g in gates):
        return None
    top_k = {int(g.top_k) for g in gates}
    experts = {int(g.num_experts) for g in gates}
    if len(top_k) != 1 or len(experts) != 1:
        return None
    return {"layers": len(gates), "top_k": top_k.pop(), "experts": experts.pop()}


def encode_routes(rows: torch.Tensor) -> str:
    """SGLang's wire form of routes: base64 of the flat little-endian int32 array.

    Example::

        encode_routes(torch.zeros((3, 2, 2), dtype=torch.int32))  # 48 bytes, "AAAA..."
    """
    flat = rows.to(torch.int32).reshape(-1).tolist()
    data = struct.pack(f"<{len(flat)}i", *flat)
    return base64.b64encode(data).decode("ascii")
