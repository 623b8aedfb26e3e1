"""The slime side of the SWE-Gym example's dry run (examples/swegym_slime_grpo/dry-run.ts starts
the local stack and runs this): slime's own calls into the Polar bridge, with the configuration of
the GPU host.

* The bridge's flags are read from ``run.sh`` (every ``--flag value`` of its ``train_async.py``
  call, as slime's argparse would set them), so the dry run and the GPU host cannot drift apart.
* ``polar.yaml``, rendered by dry-run.ts the way ``run.sh`` does (``${VAR}`` from the environment)
  and passed as JSON (``--config``), is set on ``args`` as slime's ``--custom-config-path`` does.
* ``--set NAME=VALUE`` changes a flag of run.sh (the dry run uses fewer samples than the GPU host;
  the report lists what was changed).
* The four hooks are loaded by their module paths from those flags, as slime's ``load_function``
  does, and driven in slime's order per rollout: the data source, ``generate_rollout`` (through the
  stand-in of slime's ``call_rollout_fn``), ``reward_func`` per sample, ``post_process_rewards``,
  ``pause_for_weight_update``, the weight sync (here the engine's ``/update_weights_from_disk``, which
  the router in front of slime's engines does by NCCL on the GPU host), ``resume_after_weight_update``
  and the data source's ``save``.
* What cannot run on a machine without the SWE-Gym images and a harness login is replaced, and the
  report says what: ``--override FILE`` is a JSON mapping of ``polar_task_template`` keys to
  replace (runtime, agent, evaluator). Before that, the template as written is rendered for every
  prompt and written to the report (``rendered_tasks``), so the caller can check it against the task
  schema and the dataset rows.

Usage: ``python dry_run_slime.py --run-sh run.sh --config polar.json --prompts prompts.jsonl
--override override.json --set n_samples_per_prompt=4 --rollouts 2 --save DIR --report report.json``
(slime's stand-in and polar_trainer on ``PYTHONPATH``, ``POLAR_TRAINER_TOKEN`` and ``ENGINE_URL``
set: the engine the gateway calls, which plays slime's router).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import re
import shlex
import sys
import urllib.request
from types import SimpleNamespace
from typing import Any, Dict, List

from polar_trainer.templates import render

HOOK_FLAGS = ("rollout_function_path", "custom_rm_path", "custom_reward_post_process_path", "data_source_path")


class DryRunError(Exception):
    """A configuration problem, reported as one line (exit code 2)."""


def slime_flags(run_sh: str) -> Dict[str, Any]:
    """The ``--flag [value]`` pairs of run.sh's ``train_async.py`` call, as slime's argparse sets
    them (dashes to underscores, numbers parsed, a flag without a value is ``True``)."""
    with open(run_sh, encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    call = next((line for line in text.splitlines() if "train_async.py" in line), None)
    if call is None:
        raise DryRunError(f"{run_sh}: no train_async.py call")
    words = shlex.split(call.split("train_async.py", 1)[1], comments=True)
    flags: Dict[str, Any] = {}
    i = 0
    while i < len(words):
        if not words[i].startswith("--"):
            raise DryRunError(f"{run_sh}: unexpected word {words[i]!r} in the train_async.py call")
        name = words[i][2:].replace("-", "_")
        if i + 1 < len(words) and not words[i + 1].startswith("--"):
            value: Any = words[i + 1]
            i += 2
            if re.fullmatch(r"-?\d+", value):
                value = int(value)
            elif re.fullmatch(r"-?\d+(\.\d*)?(e-?\d+)?", value):
                value = float(value)
        else:
            value, i = True, i + 1
        flags[name] = value
    missing = [f for f in HOOK_FLAGS if f not in flags]
    if missing:
        raise DryRunError(f"{run_sh}: the bridge's flags are missing: {', '.join('--' + m.replace('_', '-') for m in missing)}")
    return flags


def load_function(path: str) -> Any:
    """slime's ``load_function``: ``package.module.attr``."""
    module, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def post(url: str, body: Dict[str, Any]) -> Dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=60) as res:
        return json.loads(res.read() or b"{}")


def sample_report(s: Any) -> Dict[str, Any]:
    polar = (s.metadata or {}).get("polar", {}) if isinstance(s.metadata, dict) else {}
    logprobs = s.rollout_log_probs or []
    return {
        "tokens": len(s.tokens or []),
        "response_length": s.response_length,
        "loss_mask": len(s.loss_mask or []) if s.loss_mask is not None else None,
        "trainable_tokens": sum(s.loss_mask or []),
        "rollout_log_probs": len(logprobs),
        "logprobs_finite_nonpositive": all(isinstance(x, float) and x <= 0 for x in logprobs),
        "reward": s.reward,
        "status": str(s.status),
        "removed": bool(getattr(s, "remove_sample", False)),
        # The versions of the trainable tokens (what newer slime's Sample.weight_versions holds).
        "weight_versions": sorted({str(v) for v, m in zip(polar.get("token_versions") or [], s.loss_mask or []) if m and v is not None}, key=int),
        "session_kind": polar.get("session_kind"),
        "policy_version": polar.get("policy_version"),
        "policy_staleness": polar.get("policy_staleness"),
    }


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-sh", required=True)
    ap.add_argument("--config", required=True, help="polar.yaml, rendered, as JSON")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="change a flag of run.sh")
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--override", required=True)
    ap.add_argument("--rollouts", type=int, default=2)
    ap.add_argument("--report", required=True)
    ap.add_argument("--save", required=True, help="slime's --save (the bridge keeps its state under it)")
    o = ap.parse_args(argv)
    try:
        flags = slime_flags(o.run_sh)
        changed: Dict[str, Any] = {}
        for item in o.set:
            name, eq, value = item.partition("=")
            if not eq or name not in flags:
                raise DryRunError(f"--set {item}: not NAME=VALUE of a flag in {o.run_sh}")
            changed[name] = type(flags[name])(value) if not isinstance(flags[name], bool) else value == "true"
        flags.update(changed)
        with open(o.config, encoding="utf-8") as f:
            config = json.load(f)
        bad = [k for k in config if not k.startswith("polar_")]
        if bad:
            raise DryRunError(f"--config: keys that are not polar_*: {', '.join(bad)}")
        with open(o.override, encoding="utf-8") as f:
            override = json.load(f)
        engine_url = os.environ.get("ENGINE_URL")
        if not engine_url:
            raise DryRunError("ENGINE_URL is not set (the engine behind the gateway)")
    except DryRunError as err:
        print(f"dry-run: {err}", file=sys.stderr)
        return 2

    # slime's args: run.sh's flags, the paths of this machine, then the custom config's keys.
    args = SimpleNamespace(**flags)
    args.prompt_data = o.prompts
    args.save = o.save
    # The engine plays slime's router (run.sh's --sglang-router-ip/--sglang-router-port).
    args.sglang_router_ip, args.sglang_router_port = engine_url.split("//", 1)[1].rsplit(":", 1)
    for k, v in config.items():
        setattr(args, k, v)

    with open(o.prompts, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rendered = [
        {"instruction": r[args.input_key], **render(config["polar_task_template"], {"instruction": r[args.input_key], "sample": {"prompt": r[args.input_key], "label": r.get(args.label_key), "metadata": r.get(args.metadata_key) or {}}})}
        for r in rows
    ]
    replaced = sorted(override)
    args.polar_task_template = {**config["polar_task_template"], **override}

    from slime.rollout.base_types import call_rollout_fn  # the stand-in of slime's types

    generate_rollout = load_function(args.rollout_function_path)
    reward_func = load_function(args.custom_rm_path)
    post_process = load_function(args.custom_reward_post_process_path)
    data_source = load_function(args.data_source_path)(args)

    rollouts = []
    for rollout_id in range(o.rollouts):
        out = call_rollout_fn(generate_rollout, args, rollout_id, data_source, evaluation=False)
        flat = [s for g in out.samples for s in g]
        rm = [asyncio.run(reward_func(args, s)) for s in flat]
        raw, advantages = post_process(args, flat)
        generate_rollout.pause_for_weight_update(args)
        # slime syncs the trained weights into its engines here; the dry run moves the engine's
        # weight version, so the next rollout's traces carry the new one.
        version = rollout_id + 1
        synced = post(f"{engine_url}/update_weights_from_disk", {"model_path": os.path.join(o.save, f"iter_{version}"), "weight_version": str(version)})
        generate_rollout.resume_after_weight_update(args)
        data_source.save(rollout_id)
        rollouts.append(
            {
                "rollout_id": rollout_id,
                "groups": [[sample_report(s) for s in g] for g in out.samples],
                "metrics": out.metrics,
                "reward_func": rm,
                "raw_rewards": list(raw),
                "advantages": [float(a) for a in advantages],
                "weight_sync": bool(synced.get("success")),
            }
        )
        print(f"dry-run: rollout {rollout_id}: {len(out.samples)} groups, {len(flat)} samples, rewards {rm}", flush=True)

    report = {
        "flags": {k: flags[k] for k in sorted(flags) if k in HOOK_FLAGS or k in ("rollout_batch_size", "n_samples_per_prompt", "update_weights_interval", "input_key", "label_key", "metadata_key")},
        "polar_keys": sorted(config),
        "replaced_template_keys": replaced,
        "changed_flags": changed,
        "rendered_tasks": rendered,
        "prompts": rows,
        "rollouts": rollouts,
    }
    with open(o.report, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2, default=str)
    importlib.import_module("polar_trainer.slime.rollout").reset()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
