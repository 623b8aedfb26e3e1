"""slime's ``--custom-rm-path polar_trainer.slime.reward.reward_func``: the reward is already on
the sample (the task's evaluator scored it on the gateway), so this only reads it back.

slime awaits ``rm(args, sample)``, or ``rm(args, samples)`` for a batch (``--group-rm``); both
forms are served. A reward that is not a finite number never reaches here: the scheduler refuses it.

Example::

    await reward_func(args, sample)        # 1.0
    await reward_func(args, [s1, s2])      # [1.0, 0.0]
"""

from __future__ import annotations

from typing import Any, List, Union


def _value(args: Any, sample: Any) -> float:
    r = sample.reward
    key = getattr(args, "reward_key", None)
    if isinstance(r, dict):
        return float(r[key]) if key else float(next(iter(r.values())))
    return float(r) if r is not None else 0.0


async def reward_func(args: Any, sample: Union[Any, List[Any]], **_: Any) -> Union[float, List[float]]:
    """The reward stored on the sample (or on each sample of a list).

    Example::

        rewards = await reward_func(args, group)
    """
    if isinstance(sample, list):
        return [_value(args, s) for s in sample]
    return _value(args, sample)
