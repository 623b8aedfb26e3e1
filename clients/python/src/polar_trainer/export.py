"""JSONL export of training samples, one JSON object per line, readable by any trainer.

Schema ``polar.sample.v1`` (every array of per-token values has ONE ENTRY PER RESPONSE TOKEN,
i.e. ``response_length = len(tokens) - prompt_length`` entries):

==================  ==========================================================================
key                 meaning
==================  ==========================================================================
schema              ``"polar.sample.v1"``
run_id, step        the scheduler's run and the training step that took the group
group_id            the group's batch id; samples of one group_id form a GRPO group
group_index         the group counter of the run
trajectory_index    the session's sample number in its group (traces of one session share it)
trace_index         the trace's position in its session
session_id, task_id where the sample came from
tokens              prompt ids + response ids, exactly as the engine saw and sampled them
prompt_length       number of prompt ids at the start of ``tokens``
loss_mask           per response token: 1 = sampled by the policy (train), 0 = context
rollout_logprobs    per response token: the engine's logprob (0.0 on context tokens); the
                    behaviour policy's logprob for importance ratios / off-policy correction
token_versions      per response token: the policy version it was sampled under, or null
reward              the trace's reward
advantage           the estimator's advantage (0.0 for removed samples)
status              ``completed``, ``truncated`` or ``failed``
removed             true: contributes no gradient (failed session); its mask is all 0
truncated_from      token count before the cut to a causal prefix, or null
finish_reason       why the engine stopped the last call of the trace
group_version       the oldest version of any trained token of the group
policy_version      the trainer's version when the step took the group
staleness           policy_version − group_version
token_staleness     per response token: policy_version − its version, or null (unknown
                    version, or no policy_version in the row); the input of staleness weights
sample_staleness    the largest token_staleness of a trained token, or null
==================  ==========================================================================

``token_staleness`` and ``sample_staleness`` were added to v1 (rows written before lack them;
:func:`read_jsonl` checks ``token_staleness``'s length when it is there).

Example::

    write_batch("out/step-000003.jsonl", batch)
    for row in read_jsonl("out/step-000003.jsonl"):
        assert len(row["loss_mask"]) == len(row["tokens"]) - row["prompt_length"]
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, Iterator, List

from .samples import Sample
from .versions import parse_version

if TYPE_CHECKING:
    from .scheduler import TrainingBatch

SCHEMA = "polar.sample.v1"


def sample_row(sample: Sample, **context: Any) -> Dict[str, Any]:
    """One sample as a ``polar.sample.v1`` row; ``context`` adds run_id, step, versions.

    Example::

        row = sample_row(s, run_id="run1", step=3, group_version=2, policy_version=3, staleness=1)
    """
    row: Dict[str, Any] = {"schema": SCHEMA}
    row.update(context)
    policy_version = parse_version(context.get("policy_version"))
    row.update(
        group_id=sample.group_id,
        group_index=sample.group_index,
        trajectory_index=sample.trajectory_index,
        trace_index=sample.trace_index,
        session_id=sample.session_id,
        task_id=sample.task_id,
        tokens=sample.tokens,
        prompt_length=sample.prompt_length,
        loss_mask=sample.loss_mask,
        rollout_logprobs=sample.rollout_logprobs,
        token_versions=sample.token_versions,
        reward=sample.reward,
        advantage=sample.advantage,
        status=sample.status,
        removed=sample.removed,
        truncated_from=sample.truncated_from,
        finish_reason=sample.finish_reason,
        token_staleness=[None] * sample.response_length if policy_version is None else sample.token_staleness(policy_version),
        sample_staleness=None if policy_version is None else sample.max_staleness(policy_version),
        routed_experts=None if sample.routed_experts is None else sample.routed_experts.to_json(),
    )
    return row


def batch_rows(batch: "TrainingBatch") -> List[Dict[str, Any]]:
    """Every sample of a training batch as rows (group by group).

    Example::

        rows = batch_rows(scheduler.next_batch())
    """
    rows = []
    for g in batch.groups:
        ctx = {"run_id": batch.run_id, "step": batch.step, "group_version": g.version, "policy_version": batch.policy_version, "staleness": g.staleness}
        rows.extend(sample_row(s, **ctx) for s in g.samples())
    return rows


def write_jsonl(path: str, rows: List[Dict[str, Any]]) -> str:
    """Writes ``rows`` atomically (a temporary file renamed over ``path``); returns ``path``.

    Example::

        write_jsonl("out/eval.jsonl", rows)
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, allow_nan=False, separators=(",", ":")))
            f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def write_batch(path: str, batch: "TrainingBatch") -> str:
    """Exports a training batch to ``path`` (atomically).

    Example::

        write_batch(f"out/step-{batch.step:06d}.jsonl", batch)
    """
    return write_jsonl(path, batch_rows(batch))


def read_jsonl(path: str) -> Iterator[Dict[str, Any]]:
    """Reads rows back, checking the schema and the per-token lengths.

    Example::

        rows = list(read_jsonl("out/step-000001.jsonl"))
    """
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if row.get("schema") != SCHEMA:
                raise ValueError(f"{path}:{n}: schema is {row.get('schema')!r}, expected {SCHEMA!r}")
            k = len(row["tokens"]) - row["prompt_length"]
            for key in ("loss_mask", "rollout_logprobs", "token_versions", "token_staleness"):
                if (key != "token_staleness" or key in row) and len(row[key]) != k:
                    raise ValueError(f"{path}:{n}: {key} has {len(row[key])} entries for {k} response tokens")
            yield row
