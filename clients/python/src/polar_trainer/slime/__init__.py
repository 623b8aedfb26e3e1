"""The slime bridge (Miles too where its hooks match): rollout function, reward function, reward
post-processing and data source that slime loads by module path; see ``docs/training.md``.

Importing this package needs no slime; calling the rollout function does (it builds slime's
``Sample``).
"""
