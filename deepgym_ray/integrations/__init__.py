"""Reward functions for trainers, built on :mod:`deepgym_ray.reward` and the Ray pool.

- :mod:`deepgym_ray.integrations.trl`: ``make_trl_reward_fn``, ``make_trl_async_reward_fn``
  for TRL's GRPOTrainer.
- :mod:`deepgym_ray.integrations.dapo`: ``make_dapo_reward_fn``, ``make_dapo_shaped_reward_fn``.
- :mod:`deepgym_ray.integrations.verl`: ``compute_score`` / ``compute_score_async`` for verl's
  reward loop, the judged-only GRPO estimator ``deepgym_grpo_judged``, ``write_verl_parquet``.
- :mod:`deepgym_ray.integrations.rows`: ``RowScorer``, what verl and the HTTP service share.
- :mod:`deepgym_ray.integrations.tiny`: a tiny local model and tokenizer for CPU smoke runs.

None of them imports a trainer library at import time.
"""
