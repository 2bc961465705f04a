"""DAPO reward functions: the TRL reward function under DAPO's names.

A DAPO recipe on TRL (``GRPOConfig(loss_type="dapo", ...)``) takes the same reward functions as
GRPO. The last fenced code block of each completion runs; a completion without a verdict scores
None, which TRL leaves out of the loss and of its group's statistics.

Example:
    from deepgym_ray.suites import load_environment
    reward_fn = make_dapo_reward_fn(load_environment("coin_change"))
    reward_fn(completions=["def solve(x): return x"])
    # [0.0]
    shaped = make_dapo_shaped_reward_fn(env, component="correctness")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deepgym_ray.integrations.trl import TRLRewardFunction, make_trl_reward_fn

if TYPE_CHECKING:  # pragma: no cover
    from deepgym_ray.client import DeepGym

__all__ = ["make_dapo_reward_fn", "make_dapo_shaped_reward_fn"]


def make_dapo_reward_fn(
    env: Any, client: DeepGym | None = None, max_parallel: int = 32, **options: Any
) -> TRLRewardFunction:
    """The reward function for a DAPO run: :func:`make_trl_reward_fn` under another name."""
    return make_trl_reward_fn(env, client, max_parallel, **options)


def make_dapo_shaped_reward_fn(
    env: Any, *, component: str, client: DeepGym | None = None, max_parallel: int = 32,
    **options: Any,
) -> TRLRewardFunction:
    """A DAPO reward function returning one reward component (a result without it: its score).

    Give one per component, with ``reward_weights`` in the config, to shape the reward.
    """
    if not isinstance(component, str) or not component:
        raise ValueError(f"make_dapo_shaped_reward_fn: component must be a name, got {component!r}")
    return make_trl_reward_fn(env, client, max_parallel, component=component, **options)
