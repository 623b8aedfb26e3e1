"""Eval mode: one shot over datasets, metrics per dataset, reproducible seeds per sample.

Each dataset becomes batches ``{run_id}-eval-{dataset}-{step}`` (``-c{k}`` per chunk of
``max_tasks_per_batch`` tasks), so asking again for the same ``run_id`` and ``step`` — after a
crash, say — replays the same batches (idempotent submit) and reads the same results. Task ``i`` of
a dataset gets ``metadata.eval_sampling_seed_base = seed_base + i × n_samples`` (unless it has its
own), so its sample ``j`` is seeded ``base + j`` (upstream's key: a harness that reads it samples
reproducibly). Rewards are averaged over COMPLETED sessions (upstream's rule); infra failures are
excluded, never scored.

Example::

    report = evaluate(client, {"calc": [task_a, task_b]}, run_id="run1", step=10, n_samples=4, seed_base=1000)
    report.metrics()   # {"eval/calc/mean_reward": 0.5, "eval/calc/pass_at_n": 1.0, ...}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from .client import PolarClient
from .samples import classify, finite_number

_IDENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")


@dataclass
class DatasetMetrics:
    """What one dataset scored.

    Attributes:
        mean_reward: mean reward of COMPLETED sessions with a numeric reward (None if none).
        success_rate: fraction of those with reward >= ``correct_threshold``.
        pass_at_n: fraction of tasks with at least one correct session.
        sessions_by_kind: trainable / failed / excluded / refused counts (samples.classify).
        per_task: task_id → mean reward of its completed sessions.
        rows: one dict per session (task_id, session_id, status, reward, seed).
        results: the session results themselves, by session id.
    """

    dataset: str
    tasks: int
    sessions: int
    completed: int
    mean_reward: Optional[float]
    success_rate: Optional[float]
    pass_at_n: Optional[float]
    truncated: int
    sessions_by_kind: Dict[str, int] = field(default_factory=dict)
    per_task: Dict[str, Optional[float]] = field(default_factory=dict)
    rows: List[Dict[str, Any]] = field(default_factory=list)
    results: List[Dict[str, Any]] = field(default_factory=list, repr=False)


@dataclass
class EvalReport:
    """Metrics per dataset.

    Example::

        report.datasets["calc"].mean_reward
    """

    run_id: str
    step: int
    datasets: Dict[str, DatasetMetrics]

    def metrics(self, prefix: str = "eval") -> Dict[str, float]:
        """Flat ``{prefix}/{dataset}/{metric}`` numbers for a logger (None values left out)."""
        out: Dict[str, float] = {}
        for name, m in self.datasets.items():
            for key in ("tasks", "sessions", "completed", "mean_reward", "success_rate", "pass_at_n", "truncated"):
                v = getattr(m, key)
                if v is not None:
                    out[f"{prefix}/{name}/{key}"] = float(v)
        return out


def eval_batches(
    name: str,
    tasks: Sequence[Dict[str, Any]],
    *,
    run_id: str,
    step: int,
    n_samples: int,
    seed_base: Optional[int],
    queue: Optional[str],
    max_tasks_per_batch: int,
) -> List[Dict[str, Any]]:
    """The batch bodies of one dataset (deterministic; see the module doc).

    Example::

        [b["batch_id"] for b in eval_batches("calc", tasks, run_id="r", step=0, n_samples=2, seed_base=7, queue=None, max_tasks_per_batch=100)]
    """
    if not _IDENT.match(name):
        raise ValueError(f"dataset name must match {_IDENT.pattern}, got {name!r}")
    specs = []
    for i, task in enumerate(tasks):
        if not isinstance(task, dict) or "instruction" not in task or "agent" not in task:
            raise ValueError(f"dataset {name} task {i}: needs 'instruction' and 'agent'")
        meta = dict(task.get("metadata") or {})
        meta.update(eval_dataset=name, eval_index=i)
        if seed_base is not None:
            meta.setdefault("eval_sampling_seed_base", seed_base + i * n_samples)
        specs.append({**task, "task_id": f"{name}-{i:05d}", "num_samples": n_samples, "metadata": meta})
    bodies = []
    chunks = [specs[k : k + max_tasks_per_batch] for k in range(0, len(specs), max_tasks_per_batch)]
    for k, chunk in enumerate(chunks):
        suffix = "" if len(chunks) == 1 else f"-c{k}"
        body: Dict[str, Any] = {"batch_id": f"{run_id}-eval-{name}-{step}{suffix}", "tasks": chunk}
        if queue:
            body["queue"] = queue
        bodies.append(body)
    return bodies


def _metrics(name: str, tasks: int, results: List[Dict[str, Any]], threshold: float) -> DatasetMetrics:
    kinds: Dict[str, int] = {}
    per_task: Dict[str, List[float]] = {}
    rows = []
    truncated = 0
    for r in results:
        o = classify(r, trajectory_index=0)
        kinds[o.kind] = kinds.get(o.kind, 0) + 1
        truncated += any(s.status == "truncated" for s in o.samples)
        reward = r.get("reward")
        ok = r.get("status") == "COMPLETED" and finite_number(reward)
        per_task.setdefault(str(r.get("task_id")), [])
        if ok:
            per_task[str(r.get("task_id"))].append(float(reward))
        meta = r.get("metadata") or {}
        rows.append({"task_id": r.get("task_id"), "session_id": r.get("session_id"), "status": r.get("status"), "reward": reward, "kind": o.kind, "seed_base": meta.get("eval_sampling_seed_base")})
    scored = [x for xs in per_task.values() for x in xs]
    with_any = [xs for xs in per_task.values() if xs]
    return DatasetMetrics(
        dataset=name,
        tasks=tasks,
        sessions=len(results),
        completed=len(scored),
        mean_reward=sum(scored) / len(scored) if scored else None,
        success_rate=sum(1 for x in scored if x >= threshold) / len(scored) if scored else None,
        pass_at_n=sum(1 for xs in with_any if any(x >= threshold for x in xs)) / tasks if tasks and with_any else None,
        truncated=truncated,
        sessions_by_kind=kinds,
        per_task={k: (sum(v) / len(v) if v else None) for k, v in sorted(per_task.items())},
        rows=sorted(rows, key=lambda x: str(x["session_id"])),
        results=sorted(results, key=lambda r: str(r.get("session_id"))),
    )


def evaluate(
    client: PolarClient,
    datasets: Dict[str, Sequence[Dict[str, Any]]],
    *,
    run_id: str,
    step: int = 0,
    n_samples: int = 1,
    seed_base: Optional[int] = None,
    queue: Optional[str] = None,
    max_tasks_per_batch: int = 500,
    correct_threshold: float = 1.0,
    wait: int = 20,
    timeout: Optional[float] = None,
) -> EvalReport:
    """Submits every dataset, waits for every result, and returns the metrics per dataset.

    Example::

        evaluate(client, {"hello": [hello_task]}, run_id="run1", step=3, n_samples=2, seed_base=0)
    """
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    plan = {name: eval_batches(name, tasks, run_id=run_id, step=step, n_samples=n_samples, seed_base=seed_base, queue=queue, max_tasks_per_batch=max_tasks_per_batch) for name, tasks in datasets.items()}
    for bodies in plan.values():
        for body in bodies:
            client.submit(body)
    report: Dict[str, DatasetMetrics] = {}
    for name, bodies in plan.items():
        results = [r for body in bodies for _, r in client.iter_results(body["batch_id"], wait=wait, timeout=timeout)]
        report[name] = _metrics(name, len(datasets[name]), results, correct_threshold)
    return EvalReport(run_id=run_id, step=step, datasets=report)
