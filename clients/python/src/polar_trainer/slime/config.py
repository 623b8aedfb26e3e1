"""The bridge's ``polar_*`` keys, read from slime's ``args`` (set them with
``--custom-config-path polar.yaml``, whose keys slime puts on ``args``), as upstream's bridge does.

An unknown ``polar_*`` key is an error naming it (a typo never silently changes a run); upstream
keys this bridge has no use for are accepted with a warning saying why.

Example::

    cfg = BridgeConfig.from_args(args)
    cfg.scheduler.max_in_flight   # rollout_batch_size × polar_max_async_level
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from dataclasses import dataclass
from typing import Any, Dict, Optional

from ..config import SchedulerConfig

log = logging.getLogger("polar_trainer.slime")

#: key → (default, what it does)
KEYS: Dict[str, Any] = {
    "polar_rollout_url": (None, "the control plane's URL (required)"),
    "polar_trainer_token": (None, "the trainer token (default: the POLAR_TRAINER_TOKEN variable)"),
    "polar_queue": (None, "the control plane queue (default: the server's default queue)"),
    "polar_run_id": (None, "names the run's groups (default: derived from prompt_data and save, stable across restarts)"),
    "polar_state_dir": (None, "the scheduler's durable state (default: <save>/polar_state)"),
    "polar_task_template": (None, "the task spec; must include agent; placeholders as upstream"),
    "polar_instruction_template": (None, "renders the instruction (default: the prompt's text)"),
    "polar_reward_key": (None, "the reward dict key (default: reward_key, else score)"),
    "polar_max_async_level": (2, "groups owned = rollout_batch_size × this"),
    "polar_max_off_policy_steps": (None, "default: polar_max_async_level + update_weights_interval"),
    "polar_min_complete_accept_fraction": (0.0, "fraction of usable sessions a group needs"),
    "polar_early_stop_grace_sessions": (2, "early stop at min(n, ceil(n·f) + grace) usable sessions"),
    "polar_max_trajectory_tokens": (None, "traces longer are cut to a causal prefix"),
    "polar_drop_all_wrong_groups": (False, "drop groups whose trajectories are all wrong"),
    "polar_drop_all_keep_groups": (False, "drop groups whose trajectory rewards are all equal"),
    "polar_balance_all_correct_groups": (False, "all-correct groups at most as many as mixed ones"),
    "polar_correct_threshold": (1.0, "a trajectory with reward >= this is correct"),
    "polar_train_agent_timeout": (None, "metadata.agent_timeout of training tasks (seconds)"),
    "polar_eval_agent_timeout": (None, "metadata.agent_timeout of eval tasks (seconds)"),
    "polar_task_timeout_floor": (None, "timeout_seconds of every task is at least this"),
    "polar_weight_update_fence": ("drain", "drain | abort | none: what the weight-update hooks do"),
    "polar_weight_update_pause_timeout": (300.0, "the fence's timeout_seconds"),
    "polar_results_transport": ("poll", "poll | sse"),
    "polar_request_timeout": (None, "socket timeout of a request (seconds)"),
    "polar_advantage_baseline": ("loo", "loo (upstream's leave-one-trajectory-out) | mean (GRPO)"),
    "polar_eval_dataset_name": ("polar_eval", "the name of an eval dataset given without one"),
    "polar_eval_sampling_seed_base": (None, "metadata.eval_sampling_seed_base of eval task 0 (task i: + i × n)"),
}

#: Upstream keys with no use here, and why.
UNUSED = {
    "polar_topology_path": "gateways are configured on their hosts; the control plane URL is polar_rollout_url",
    "polar_callback_host": "results are read from the control plane by cursor, no callback listener",
    "polar_scoring_mode": "rewards come from the task's evaluator",
    "polar_add_generation_prompt": "the gateway's proxy renders the chat template",
    "polar_task_id_template": "task ids are the group's batch id, deterministic for idempotent resubmission",
    "polar_fully_async": "the scheduler is always asynchronous (polar_max_async_level bounds it)",
    "polar_gateway_url": "the bridge talks to the control plane only",
    "polar_allow_single_sample_over_token_cap": "over-long traces are cut to a causal prefix",
    "polar_eval_aggregate_weights": "eval metrics are reported per dataset",
}


def _arg(args: Any, name: str) -> Any:
    return getattr(args, name, KEYS[name][0])


@dataclass
class BridgeConfig:
    """The resolved configuration of the bridge.

    Example::

        BridgeConfig.from_args(args).reward_key
    """

    url: str
    token: str
    scheduler: SchedulerConfig
    state_dir: str
    task_template: Dict[str, Any]
    instruction_template: Optional[str]
    reward_key: Optional[str]
    fence: str
    fence_timeout: float
    request_timeout: Optional[float]
    update_weights_interval: int
    train_agent_timeout: Optional[float]
    eval_agent_timeout: Optional[float]
    task_timeout_floor: Optional[float]
    advantage_baseline: str
    eval_dataset_name: str
    eval_seed_base: Optional[int]

    @staticmethod
    def from_args(args: Any) -> "BridgeConfig":
        """Reads and checks every ``polar_*`` key of ``args`` (see :data:`KEYS`).

        Example::

            BridgeConfig.from_args(SimpleNamespace(polar_rollout_url=url, polar_task_template=t, rollout_batch_size=4, n_samples_per_prompt=8))
        """
        names = [k for k in vars(args) if k.startswith("polar_")] if hasattr(args, "__dict__") else []
        for k in names:
            if k in UNUSED:
                log.warning("%s is not used by this bridge: %s", k, UNUSED[k])
            elif k not in KEYS:
                raise ValueError(f"unknown key {k} (known: {', '.join(sorted(KEYS))})")
        url = _arg(args, "polar_rollout_url")
        if not url:
            raise ValueError("polar_rollout_url is required (the control plane's URL)")
        token = _arg(args, "polar_trainer_token") or os.environ.get("POLAR_TRAINER_TOKEN", "")
        if not token:
            raise ValueError("polar_trainer_token is not set and neither is POLAR_TRAINER_TOKEN")
        template = _arg(args, "polar_task_template")
        if not isinstance(template, dict) or "agent" not in template:
            raise ValueError("polar_task_template must be a mapping that includes an agent spec")
        batch = int(getattr(args, "rollout_batch_size", 1) or 1)
        n = int(getattr(args, "n_samples_per_prompt", 1) or 1)
        interval = int(getattr(args, "update_weights_interval", 1) or 1)
        level = int(_arg(args, "polar_max_async_level"))
        off = _arg(args, "polar_max_off_policy_steps")
        fence = str(_arg(args, "polar_weight_update_fence"))
        if fence not in ("drain", "abort", "none"):
            raise ValueError(f"polar_weight_update_fence must be drain, abort or none, got {fence!r}")
        baseline = str(_arg(args, "polar_advantage_baseline"))
        if baseline not in ("loo", "mean"):
            raise ValueError(f"polar_advantage_baseline must be loo or mean, got {baseline!r}")
        save = getattr(args, "save", None)
        run_id = _arg(args, "polar_run_id")
        if not run_id:
            seed = f"{getattr(args, 'prompt_data', '')}|{save or ''}"
            run_id = f"slime-{hashlib.sha1(seed.encode()).hexdigest()[:12]}"
        sched = SchedulerConfig(
            run_id=str(run_id),
            rollout_batch_size=batch,
            group_size=n,
            max_async_level=level,
            max_off_policy_steps=int(off) if off is not None else level + interval,
            admission="in_flight",  # the bridge documents polar_max_async_level as the bound on groups owned
            queue=_arg(args, "polar_queue"),
            advantage="none",  # slime computes advantages through post_process_rewards
            min_complete_fraction=float(_arg(args, "polar_min_complete_accept_fraction") or 0.0),
            early_stop_grace_sessions=int(_arg(args, "polar_early_stop_grace_sessions")),
            drop_all_wrong_groups=bool(_arg(args, "polar_drop_all_wrong_groups")),
            drop_all_equal_groups=bool(_arg(args, "polar_drop_all_keep_groups")),
            balance_all_correct_groups=bool(_arg(args, "polar_balance_all_correct_groups")),
            correct_threshold=float(_arg(args, "polar_correct_threshold")),
            max_trajectory_tokens=_arg(args, "polar_max_trajectory_tokens"),
            results_transport=str(_arg(args, "polar_results_transport")),
        )
        fence_timeout = float(_arg(args, "polar_weight_update_pause_timeout"))
        if not (math.isfinite(fence_timeout) and 0 < fence_timeout <= 3600):
            raise ValueError(f"polar_weight_update_pause_timeout must be > 0 and <= 3600, got {fence_timeout}")
        seed_base = _arg(args, "polar_eval_sampling_seed_base")
        return BridgeConfig(
            url=str(url),
            token=token,
            scheduler=sched,
            state_dir=_arg(args, "polar_state_dir") or os.path.join(save or ".", "polar_state"),
            task_template=template,
            instruction_template=_arg(args, "polar_instruction_template"),
            reward_key=_arg(args, "polar_reward_key") or getattr(args, "reward_key", None) or None,
            fence=fence,
            fence_timeout=fence_timeout,
            request_timeout=_arg(args, "polar_request_timeout"),
            update_weights_interval=interval,
            train_agent_timeout=_arg(args, "polar_train_agent_timeout"),
            eval_agent_timeout=_arg(args, "polar_eval_agent_timeout"),
            task_timeout_floor=_arg(args, "polar_task_timeout_floor"),
            advantage_baseline=baseline,
            eval_dataset_name=str(_arg(args, "polar_eval_dataset_name")),
            eval_seed_base=None if seed_base is None else int(seed_base),
        )
