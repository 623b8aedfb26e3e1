"""A stand-in of the slime package for the bridge's tests: only ``slime.utils.types.Sample`` and
``slime.rollout.base_types``, with exactly slime's fields (see ``utils/types.py``). No torch, no
Megatron, no SGLang: the bridge uses nothing else of slime."""
