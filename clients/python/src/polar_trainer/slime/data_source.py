"""slime's ``--data-source-path polar_trainer.slime.data_source.PolarDataSource``: the prompts, by
group index, plus the checkpoint hooks that make a restarted run lose nothing.

* Reads ``args.prompt_data`` (JSONL) with slime's ``input_key`` (default ``input``), ``label_key``
  and ``metadata_key`` (default ``metadata``); ``rollout_shuffle`` shuffles each epoch with
  ``rollout_seed`` + epoch, so group ``i``'s prompt is a pure function of ``i``.
* ``__len__`` rounds the epoch UP to a multiple of ``rollout_batch_size`` (upstream's
  ``CeilEpochRolloutDataSourceWithBuffer``: the dataset's tail is used); Miles' ``get_buffer_length``
  is served too.
* ``save(rollout_id)`` (slime calls it with each checkpoint) commits the scheduler's steps up to
  that rollout and writes this source's position; ``load(rollout_id)`` (on ``--load``) tells the
  bridge the checkpoint's rollout, so later steps' groups are offered again.

Example::

    ds = PolarDataSource(args)
    [[sample]] = [g[:1] for g in ds.get_samples(1)]
"""

from __future__ import annotations

import json
import math
import os
import random
from typing import Any, Dict, List, Optional

from ..state import atomic_write_json


class PolarDataSource:
    """See the module doc.

    Example::

        ds = PolarDataSource(args); ds.group_prompt(17)["prompt"]
    """

    def __init__(self, args: Any) -> None:
        self.args = args
        path = getattr(args, "prompt_data", None)
        if not path:
            raise ValueError("prompt_data is required (a JSONL file of prompts)")
        input_key = getattr(args, "input_key", None) or "input"
        label_key = getattr(args, "label_key", None)
        meta_key = getattr(args, "metadata_key", None) or "metadata"
        self.rows: List[Dict[str, Any]] = []
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if input_key not in row:
                    raise ValueError(f"{path}:{n}: no key {input_key!r} (input_key)")
                self.rows.append({"prompt": row[input_key], "label": row.get(label_key) if label_key else None, "metadata": row.get(meta_key) or {}})
        if not self.rows:
            raise ValueError(f"{path}: no prompts")
        self.n_samples = int(getattr(args, "n_samples_per_prompt", 1) or 1)
        self.shuffle = bool(getattr(args, "rollout_shuffle", False))
        self.seed = int(getattr(args, "rollout_seed", 42) or 42)
        self.offset = 0
        self.buffer: List[List[Any]] = []
        self.loaded_rollout_id: Optional[int] = None
        self._orders: Dict[int, List[int]] = {}
        self.bridge: Any = None  # set by the rollout function when it starts

    def __len__(self) -> int:
        batch = int(getattr(self.args, "rollout_batch_size", 1) or 1)
        return math.ceil(len(self.rows) / batch) * batch

    def get_buffer_length(self) -> int:
        """Miles' name for the epoch length."""
        return len(self)

    def _order(self, epoch: int) -> List[int]:
        if epoch not in self._orders:
            order = list(range(len(self.rows)))
            if self.shuffle:
                random.Random(self.seed + epoch).shuffle(order)
            self._orders = {epoch: order}
        return self._orders[epoch]

    def group_prompt(self, index: int) -> Dict[str, Any]:
        """The prompt row of group ``index`` (epoch ``index // len(rows)``), with ``index`` and
        ``group_index`` set.

        Example::

            ds.group_prompt(0)["prompt"]
        """
        epoch, pos = divmod(index, len(self.rows))
        row = self.rows[self._order(epoch)[pos]]
        return {**row, "index": index, "group_index": index}

    def get_samples(self, num_samples: int) -> List[List[Any]]:
        """slime's interface: ``num_samples`` groups of ``n_samples_per_prompt`` ``Sample``\\ s."""
        from .adapter import sample_class

        cls = sample_class()
        out = self.buffer[:num_samples]
        self.buffer = self.buffer[num_samples:]
        while len(out) < num_samples:
            row = self.group_prompt(self.offset)
            self.offset += 1
            out.append([cls(group_index=row["index"], index=row["index"] * self.n_samples + j, prompt=row["prompt"], label=row["label"], metadata=dict(row["metadata"])) for j in range(self.n_samples)])
        return out

    def add_samples(self, samples: List[List[Any]]) -> None:
        """slime's interface: groups returned to the buffer are served first."""
        self.buffer.extend(samples)

    def _path(self, rollout_id: int) -> Optional[str]:
        save = getattr(self.args, "save", None)
        return os.path.join(save, "polar_data_source", f"{rollout_id}.json") if save else None

    def save(self, rollout_id: int) -> None:
        """With slime's checkpoint of ``rollout_id``: the scheduler commits steps up to it."""
        if self.bridge is not None:
            self.bridge.checkpointed(rollout_id)
        path = self._path(rollout_id)
        if path:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_write_json(path, {"offset": self.offset, "rollout_id": rollout_id})

    def load(self, rollout_id: Optional[int] = None) -> None:
        """With slime's ``--load``: remembers the checkpoint's rollout for the bridge's resume."""
        if rollout_id is None:
            return
        self.loaded_rollout_id = int(rollout_id)
        path = self._path(rollout_id)
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                self.offset = int(json.load(f).get("offset", 0))
