"""Reward functions for trainers, built on :mod:`deepgym_ray.reward` and the Ray pool.

- :mod:`deepgym_ray.integrations.trl`: ``make_trl_reward_fn``, ``make_trl_async_reward_fn``
  for TRL's GRPOTrainer.
- :mod:`deepgym_ray.integrations.dapo`: ``make_dapo_reward_fn``, ``make_dapo_shaped_reward_fn``.
- :mod:`deepgym_ray.integrations.tiny`: a tiny local model and tokenizer for CPU smoke runs.

None of them imports a trainer library at import time.
"""
