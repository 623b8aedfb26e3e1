"""Routed experts of a sample (MoE routing replay, "R3").

A gateway whose token mode records routes (``--routed-experts LAYERS:TOP_K``) puts on each trace
``routed_experts``: ``{start: 0, rows, layers, top_k, data}``, where ``data`` is base64 of
little-endian int32 expert ids shaped ``[rows, layers, top_k]`` and the rows are the positions
``[0, len(prompt_ids) + len(response_ids) − 1)``: every token the engine ran, which is every
token but the last sampled one. A trainer replays row ``p`` for the token at position ``p``
(slime's ``rollout_routed_experts`` has exactly these rows: ``len(tokens) − 1``).

Standard library only; :meth:`RoutedExperts.to_numpy` uses numpy when it is installed.

Example::

    routes = RoutedExperts.from_trace(trace)
    routes.rows == len(trace["prompt_ids"]) + len(trace["response_ids"]) - 1
    routes.row(0)  # [[3, 5], [0, 7], ...]: layer by layer, top-k ids
"""
from __future__ import annotations

import base64
import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class RoutedExperts:
    """The routes of positions ``[0, rows)`` as raw little-endian int32 bytes.

    Example::

        RoutedExperts(layers=2, top_k=1, rows=1, data=struct.pack("<2i", 4, 7)).row(0)  # [[4], [7]]
    """

    layers: int
    top_k: int
    rows: int
    data: bytes

    def __post_init__(self) -> None:
        if self.layers < 1 or self.top_k < 1 or self.rows < 0:
            raise ValueError(f"routed_experts: layers and top_k must be >= 1 and rows >= 0, got {self.layers}, {self.top_k}, {self.rows}")
        want = self.rows * self.layers * self.top_k * 4
        if len(self.data) != want:
            raise ValueError(
                f"routed_experts.data: holds {len(self.data)} bytes; {self.rows} rows x {self.layers} layers x top-{self.top_k} need {want}"
            )

    @staticmethod
    def from_trace(trace: Dict[str, Any]) -> Optional["RoutedExperts"]:
        """The trace's routes, or None when it has none. Raises ValueError when they do not cover
        the trace's positions ``[0, prompt + response − 1)`` or their size does not fit the shape.

        Example::

            RoutedExperts.from_trace({"prompt_ids": [1], "response_ids": [2], "routed_experts": None})  # None
        """
        raw = trace.get("routed_experts")
        if raw is None:
            return None
        positions = len(trace.get("prompt_ids") or []) + len(trace.get("response_ids") or []) - 1
        if raw.get("start") != 0 or raw.get("rows") != positions:
            raise ValueError(
                f"routed_experts: covers [{raw.get('start')}, {raw.get('start', 0) + raw.get('rows', 0)}), the trace has positions [0, {positions})"
            )
        return RoutedExperts(
            layers=int(raw["layers"]),
            top_k=int(raw["top_k"]),
            rows=int(raw["rows"]),
            data=base64.b64decode(raw["data"], validate=True),
        )

    def prefix(self, rows: int) -> "RoutedExperts":
        """The first ``rows`` rows (a sample cut to ``max_tokens`` keeps the routes of what it keeps).

        Example::

            routes.prefix(10).rows  # 10
        """
        rows = max(0, min(rows, self.rows))
        return RoutedExperts(self.layers, self.top_k, rows, self.data[: rows * self.layers * self.top_k * 4])

    def row(self, position: int) -> List[List[int]]:
        """The expert ids of one position, layer by layer.

        Example::

            routes.row(0)[0]  # the top-k experts of layer 0 for the first token
        """
        if not 0 <= position < self.rows:
            raise IndexError(f"routed_experts: position {position} is outside [0, {self.rows})")
        per = self.layers * self.top_k
        ids = struct.unpack_from(f"<{per}i", self.data, position * per * 4)
        return [list(ids[layer * self.top_k : (layer + 1) * self.top_k]) for layer in range(self.layers)]

    def to_list(self) -> List[List[List[int]]]:
        """Every row, as nested lists ``[rows][layers][top_k]``.

        Example::

            len(routes.to_list()) == routes.rows
        """
        return [self.row(p) for p in range(self.rows)]

    def to_numpy(self) -> Any:
        """An ``int32`` array shaped ``(rows, layers, top_k)`` (numpy must be installed).

        Example::

            routes.to_numpy().shape  # (rows, layers, top_k)
        """
        import numpy as np  # optional: only trainers that replay routes need it

        return np.frombuffer(self.data, dtype="<i4").reshape(self.rows, self.layers, self.top_k).astype(np.int32)

    def to_json(self) -> Dict[str, Any]:
        """The wire form (``start`` 0, base64 ``data``), as an export row holds it.

        Example::

            RoutedExperts.from_trace({**trace, "routed_experts": routes.to_json()}) == routes
        """
        return {
            "start": 0,
            "rows": self.rows,
            "layers": self.layers,
            "top_k": self.top_k,
            "data": base64.b64encode(self.data).decode("ascii"),
        }
