"""Rewards for trainers: reward functions (TRL's convention: plain callables, keyword
arguments), routing a batch over several environments, and the judged-only GRPO advantages.

- :mod:`~deepgym_ray.reward.functions`: :class:`RewardFunction`, :class:`AsyncRewardFunction`,
  :class:`MaskedRate`, :func:`grpo_advantages`;
- :mod:`~deepgym_ray.reward.mixed`: :class:`MixedEnvironment`, which routes each sample once;
- :mod:`~deepgym_ray.reward.mixed_config`: a mixture written down in a YAML file.
"""

from deepgym_ray.reward.functions import (
    AsyncRewardFunction,
    MaskedRate,
    RewardFunction,
    grpo_advantages,
)

__all__ = ["AsyncRewardFunction", "MaskedRate", "RewardFunction", "grpo_advantages"]
