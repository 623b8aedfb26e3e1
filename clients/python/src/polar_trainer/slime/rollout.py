"""slime's ``--rollout-function-path polar_trainer.slime.rollout.generate_rollout``: the async group
scheduler behind slime's synchronous rollout call.

* ``generate_rollout(args, rollout_id, data_source, evaluation=False)``: the first call starts one
  process-wide scheduler (its state in ``polar_state_dir``) that keeps
  ``rollout_batch_size × polar_max_async_level`` groups owned; each call returns the next
  ``rollout_batch_size`` accepted groups (scheduler step ``rollout_id + 1``) as
  ``RolloutFnTrainOutput(samples=[[Sample, ...], ...], metrics)`` — a bare list where slime's
  ``base_types`` is not importable (slime wraps it). ``evaluation=True`` runs eval mode over
  ``args.eval_prompt_data`` (slime's ``name path ...`` list) and returns ``RolloutFnEvalOutput``.
* ``generate_rollout.pause_for_weight_update(args)`` / ``resume_after_weight_update(args)``:
  upstream's lifecycle hooks around slime's weight sync. Pause fences the queue (``drain`` or
  ``abort``; a pause that does not drain is undone and raises), resume sets the next policy version
  (one more than the last) and resumes. Without the hooks the version is
  ``rollout_id // update_weights_interval`` (upstream's stamping).
* Restart: with :class:`~polar_trainer.slime.data_source.PolarDataSource`, slime's checkpoint
  ``save(rollout_id)`` commits the steps it holds and ``load(rollout_id)`` resumes after them; with
  another data source a call for ``rollout_id`` commits the steps before it.

Example (slime command line)::

    --rollout-function-path polar_trainer.slime.rollout.generate_rollout
    --custom-rm-path polar_trainer.slime.reward.reward_func
    --custom-reward-post-process-path polar_trainer.slime.reward_post_process.post_process_rewards
    --data-source-path polar_trainer.slime.data_source.PolarDataSource
    --custom-config-path polar.yaml
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Dict, List, Optional

from ..client import PolarClient
from ..errors import FenceError
from ..evaluation import evaluate
from ..scheduler import GroupScheduler
from ..templates import prompt_text, render
from .adapter import sample_class, to_slime_samples
from .config import BridgeConfig

log = logging.getLogger("polar_trainer.slime")

_BRIDGE: Optional["Bridge"] = None
_LOCK = threading.Lock()


def _router(args: Any) -> Optional[str]:
    ip, port = getattr(args, "sglang_router_ip", None), getattr(args, "sglang_router_port", None)
    return f"http://{ip}:{port}" if ip and port else None


class Bridge:
    """One scheduler for the slime process (built by the first ``generate_rollout`` call)."""

    def __init__(self, args: Any, data_source: Any, first_rollout_id: int) -> None:
        self.args = args
        self.data_source = data_source
        self.cfg = BridgeConfig.from_args(args)
        if self.cfg.reward_key and not getattr(args, "reward_key", None):
            args.reward_key = self.cfg.reward_key
        self.client = PolarClient(self.cfg.url, self.cfg.token, timeout=float(self.cfg.request_timeout or 30))
        self.rollout_id = first_rollout_id
        self.fenced = False
        self.ds_hooks = hasattr(data_source, "group_prompt") and hasattr(data_source, "loaded_rollout_id")
        loaded = getattr(data_source, "loaded_rollout_id", None) if self.ds_hooks else None
        # Scheduler step = rollout_id + 1; a run resumed at rollout K has trained rollouts < K.
        resume = loaded + 1 if loaded is not None else first_rollout_id
        self.scheduler = GroupScheduler(self.client, self.cfg.scheduler, self._task, self.cfg.state_dir, resume_step=resume)
        if self.ds_hooks:
            data_source.bridge = self
        self.scheduler.start()

    def _context(self, row: Dict[str, Any], index: int, instruction: str) -> Dict[str, Any]:
        return {
            "instruction": instruction,
            "num_samples": self.cfg.scheduler.group_size,
            "num_rollouts": self.cfg.scheduler.group_size,
            "rollout_id": self.rollout_id,
            "group_index": index,
            "task_position": index,
            "run_id": self.cfg.scheduler.run_id,
            "sample": {"prompt": row.get("prompt"), "label": row.get("label"), "metadata": row.get("metadata") or {}, "index": row.get("index", index), "group_index": row.get("group_index", index)},
            "args": vars(self.args) if hasattr(self.args, "__dict__") else {},
            "sglang": {"router_base_url": _router(self.args)},
        }

    def task_for(self, row: Dict[str, Any], index: int, agent_timeout: Optional[float]) -> Dict[str, Any]:
        """Renders the task template for one prompt row."""
        text = prompt_text(row.get("prompt"))
        instruction = text
        if self.cfg.instruction_template:
            instruction = render(self.cfg.instruction_template, self._context(row, index, text))
            if not isinstance(instruction, str):
                raise ValueError("polar_instruction_template must render to a string")
        task = render(self.cfg.task_template, self._context(row, index, instruction))
        if not isinstance(task, dict):
            raise ValueError("polar_task_template must render to a mapping")
        task["instruction"] = instruction
        floor = self.cfg.task_timeout_floor
        if floor is not None:
            task["timeout_seconds"] = max(float(task.get("timeout_seconds", 600)), float(floor))
        if agent_timeout is not None:
            task["metadata"] = {**(task.get("metadata") or {}), "agent_timeout": agent_timeout}
        task.pop("task_id", None)
        task.pop("num_samples", None)
        return task

    def _task(self, index: int) -> Dict[str, Any]:
        ds = self.data_source
        if self.ds_hooks:
            row = ds.group_prompt(index)
        else:
            s = ds.get_samples(1)[0][0]
            row = {"prompt": s.prompt, "label": s.label, "metadata": dict(s.metadata or {}), "index": s.index, "group_index": s.group_index}
        return self.task_for(row, index, self.cfg.train_agent_timeout)

    def train(self, args: Any, rollout_id: int) -> Any:
        self.rollout_id = rollout_id
        sched = self.scheduler
        if not self.fenced:
            derived = rollout_id // self.cfg.update_weights_interval
            if derived > sched.policy_version:
                self._label(derived)
                sched.set_policy_version(derived)
        if not self.ds_hooks and rollout_id > 0:
            sched.commit(rollout_id)  # rollouts before this one were trained
        batch = sched.next_batch(step=rollout_id + 1)
        cls = sample_class()
        groups = [to_slime_samples(g, args, rollout_id, cls) for g in batch.groups]
        c = sched.counters()
        metrics = {
            "polar/policy_version": float(c["policy_version"]),
            "polar/stale_groups": float(c["dropped"].get("stale", 0)),
            "polar/accepted_groups": float(c["accepted"]),
            "polar/in_flight_groups": float(c["in_flight"]),
            **{f"polar/dropped_{k}_groups": float(v) for k, v in c["dropped"].items()},
            **{f"polar/rejected_{k}_groups": float(v) for k, v in c["rejected"].items()},
            "polar/mean_staleness": sum(g.staleness or 0 for g in batch.groups) / len(batch.groups),
        }
        try:
            from slime.rollout.base_types import RolloutFnTrainOutput  # type: ignore[import-not-found]
        except ImportError:
            return groups
        return RolloutFnTrainOutput(samples=groups, metrics=metrics)

    def checkpointed(self, rollout_id: int) -> None:
        self.scheduler.commit(rollout_id + 1)

    def evaluate(self, args: Any, rollout_id: int) -> Any:
        spec = list(getattr(args, "eval_prompt_data", None) or [])
        if len(spec) % 2:
            spec = [self.cfg.eval_dataset_name, *spec[-1:]]
        input_key = getattr(args, "input_key", None) or "input"
        label_key = getattr(args, "label_key", None)
        meta_key = getattr(args, "metadata_key", None) or "metadata"
        datasets: Dict[str, List[Dict[str, Any]]] = {}
        for name, path in zip(spec[::2], spec[1::2]):
            with open(path, encoding="utf-8") as f:
                rows = [json.loads(line) for line in f if line.strip()]
            datasets[name] = [
                self.task_for({"prompt": r[input_key], "label": r.get(label_key) if label_key else None, "metadata": r.get(meta_key) or {}, "index": i}, i, self.cfg.eval_agent_timeout)
                for i, r in enumerate(rows)
            ]
        n = int(getattr(args, "n_samples_per_eval_prompt", 1) or 1)
        report = evaluate(self.client, datasets, run_id=self.cfg.scheduler.run_id, step=rollout_id, n_samples=n, seed_base=self.cfg.eval_seed_base, queue=self.cfg.scheduler.queue, correct_threshold=self.cfg.scheduler.correct_threshold)
        cls = sample_class()
        data: Dict[str, Dict[str, Any]] = {}
        for name, m in report.datasets.items():
            completed = [r for r in m.results if r.get("status") == "COMPLETED"]
            samples = []
            for r in completed:
                t = (r["trajectory"]["traces"] or [{}])[-1]
                tokens = list(t.get("prompt_ids") or []) + list(t.get("response_ids") or [])
                samples.append(cls(prompt=str(r.get("task_id")), tokens=tokens, response_length=len(t.get("response_ids") or []), reward=float(r["reward"]), status=cls.Status.TRUNCATED if t.get("finish_reason") == "length" else cls.Status.COMPLETED, metadata={"polar": {"session_id": r["session_id"]}}))
            data[name] = {"rewards": [float(r["reward"]) for r in completed], "truncated": [s.status == cls.Status.TRUNCATED for s in samples], "samples": samples}
        try:
            from slime.rollout.base_types import RolloutFnEvalOutput  # type: ignore[import-not-found]
        except ImportError:
            return data
        return RolloutFnEvalOutput(data=data, metrics=report.metrics("polar/eval"))

    def pause(self) -> None:
        if self.cfg.fence == "none":
            return
        queue = self.cfg.scheduler.queue or "default"
        r = self.client.pause(queue, mode=self.cfg.fence, timeout_seconds=self.cfg.fence_timeout)
        if not r.ok:
            self.client.resume(queue)
            raise FenceError(queue, "not_drained", f"gateways not paused within {self.cfg.fence_timeout} s", r)

    def resume(self) -> None:
        new = self.scheduler.policy_version + 1
        if self.cfg.fence != "none":
            self.client.resume(self.cfg.scheduler.queue or "default", policy_version=new)
        else:
            self._label(new)
        self.fenced = True
        self.scheduler.set_policy_version(new)

    def _label(self, version: int) -> None:
        # Without a pause the queue's version must still move: turns are labelled with it, and a
        # group's version (so its staleness) is read from those labels.
        self.client.set_policy_version(self.cfg.scheduler.queue or "default", version)

    def close(self) -> None:
        self.scheduler.close()


def bridge(args: Any, data_source: Any, rollout_id: int = 0) -> Bridge:
    """The process-wide bridge (built on first use)."""
    global _BRIDGE
    with _LOCK:
        if _BRIDGE is None:
            _BRIDGE = Bridge(args, data_source, rollout_id)
        return _BRIDGE


def reset() -> None:
    """Stops and forgets the process-wide bridge (tests; a new run in the same process)."""
    global _BRIDGE
    with _LOCK:
        if _BRIDGE is not None:
            _BRIDGE.close()
        _BRIDGE = None


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> Any:
    """slime's rollout function (see the module doc).

    Example::

        out = generate_rollout(args, 0, data_source)   # RolloutFnTrainOutput(samples=[[...], ...])
    """
    b = bridge(args, data_source, rollout_id)
    return b.evaluate(args, rollout_id) if evaluation else b.train(args, rollout_id)


def pause_for_weight_update(args: Any) -> None:
    """Before slime's weight sync: fence the queue (drain or abort, ``polar_weight_update_fence``)."""
    if _BRIDGE is not None:
        _BRIDGE.pause()


def resume_after_weight_update(args: Any) -> None:
    """After slime's weight sync: the next policy version, then resume."""
    if _BRIDGE is not None:
        _BRIDGE.resume()


generate_rollout.pause_for_weight_update = pause_for_weight_update  # type: ignore[attr-defined]
generate_rollout.resume_after_weight_update = resume_after_weight_update  # type: ignore[attr-defined]
