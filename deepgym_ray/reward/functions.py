"""Reward functions for trainers: a score per completion, or None where nothing was judged.

``RewardFunction`` routes each completion to its environment once; the client takes its code out
(the last fenced block of the answer) once, on the driver, and scores it on its backend (the shared
Ray pool, or threads); rewards follow the reward contract: a run without a verdict gives None, never
a 0 or a pass. ``MaskedRate`` watches how often that happens; ``grpo_advantages`` computes group
baselines from judged samples only.

Example:
    reward_fn = RewardFunction(env, max_parallel=64)
    reward_fn(["```python\\ndef f(): return 1\\n```"])    # [1.0]

    >>> [a if a is None else round(a, 6) for a in grpo_advantages([1.0, 0.0, None])]
    [1.0, -1.0, None]
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from deepgym_ray.completions import check_completions
from deepgym_ray.config import check_max_parallel
from deepgym_ray.masked_rate import MaskedRate
from deepgym_ray.models import Environment, RunResult

if TYPE_CHECKING:  # pragma: no cover
    from deepgym_ray.client import DeepGym

__all__ = ["AsyncRewardFunction", "MaskedRate", "RewardFunction", "grpo_advantages"]

logger = logging.getLogger(__name__)


def grpo_advantages(
    samples: Sequence[RunResult | float | None],
    group_size: int | None = None,
    *,
    eps: float = 1e-8,
    scale: bool = True,
) -> list[float | None]:
    """GRPO advantages whose baselines use judged samples only; None for the others.

    ``group_size`` splits ``samples`` into consecutive groups (the completions of one prompt);
    by default they are one group. ``scale=False`` leaves out the division by the std.
    """
    rewards = [s.reward if isinstance(s, RunResult) else s for s in samples]
    if not rewards:
        return []
    size = group_size or len(rewards)
    if size < 1 or len(rewards) % size:
        raise ValueError(f"{len(rewards)} samples do not split into groups of {group_size}")
    out: list[float | None] = []
    for start in range(0, len(rewards), size):
        group = rewards[start:start + size]
        judged = [float(r) for r in group if r is not None]
        if not judged:
            out.extend([None] * len(group))
            continue
        mean = sum(judged) / len(judged)
        std = math.sqrt(sum((r - mean) ** 2 for r in judged) / len(judged))
        denom = std + eps if scale else 1.0
        out.extend(None if r is None else (float(r) - mean) / denom for r in group)
    return out


def per_test_rewards(result: RunResult) -> dict[str, float] | None:
    """``{'test_0': 1.0, ..., 'overall': 0.5}`` for one result; None without a verdict."""
    if not result.has_verdict:
        return None
    out = {f"test_{i}": case.score for i, case in enumerate(result.cases or ())}
    out["overall"] = result.score
    return out


def shaped_rewards(result: RunResult) -> dict[str, float] | None:
    """The verifier's reward components (``{'score': s}`` when it gave none); None unjudged."""
    if not result.has_verdict:
        return None
    return dict(result.reward_components) if result.reward_components else {"score": result.score}


class RewardFunction:
    """A reward function for any trainer: ``reward_fn(completions, **kwargs)``.

    ``env`` is one Environment, or a router with ``route(completions, **kwargs) ->
    list[Environment]`` (a MixedEnvironment) choosing each completion's environment from the
    row metadata a trainer passes as keyword arguments. ``client`` is a DeepGym client (default
    ``DeepGym()``); its ``config.backend`` picks the Ray pool or in-process threads.
    """

    def __init__(
        self,
        env: Any,
        client: DeepGym | None = None,
        max_parallel: int = 32,
        *,
        masked_rate: MaskedRate | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(env, Environment) and not callable(getattr(env, "route", None)):
            raise TypeError("env must be an Environment or have a route(completions, **kwargs) "
                            f"method, got {type(env).__name__}")
        check_max_parallel(max_parallel)
        self.env = env
        self.max_parallel = max_parallel
        self._client = client
        label = name or f"deepgym_{getattr(env, 'name', 'mixed')}".replace("/", "_")
        self.__name__ = label  # trainers (TRL) log rewards under the function's name
        self.masked_rate = masked_rate or MaskedRate(name=label)

    @property
    def client(self) -> DeepGym:
        if self._client is None:
            from deepgym_ray.client import default_client

            self._client = default_client()
        return self._client

    def environments(self, completions: Sequence[Any], **kwargs: Any) -> list[Environment]:
        """Each completion's environment."""
        if isinstance(self.env, Environment):
            return [self.env] * len(completions)
        envs = list(self.env.route(completions, **kwargs))
        if len(envs) != len(completions):
            raise ValueError(f"{type(self.env).__name__}.route gave {len(envs)} environments "
                             f"for {len(completions)} completions")
        return envs

    def results(self, completions: Sequence[Any], **kwargs: Any) -> list[RunResult]:
        """One RunResult per completion, in order (also counted by ``masked_rate``)."""
        completions = check_completions(completions, "completions")
        return self.score_routed(completions, self.environments(completions, **kwargs))

    def score_routed(self, completions: Sequence[Any],
                     envs: Sequence[Environment]) -> list[RunResult]:
        """One RunResult per completion against its environment, already routed (routing
        happens once). The client takes the code out of each completion once, on this driver;
        a completion without code to run gets a result without a verdict that says why."""
        results = self.client.score_outputs(envs, list(completions), self.max_parallel)
        self.masked_rate.update(results)
        return results

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        """Each completion's reward: its score, or None where there is no verdict."""
        return [r.reward for r in self.results(completions, **kwargs)]

    def shaped_rewards(self, completions: Sequence[Any], **kwargs: Any):
        """Each completion's reward components (None where there is no verdict)."""
        return [shaped_rewards(r) for r in self.results(completions, **kwargs)]

    def per_test_rewards(self, completions: Sequence[Any], **kwargs: Any):
        """Each completion's ``{'test_0': ..., 'overall': ...}`` (None where no verdict)."""
        return [per_test_rewards(r) for r in self.results(completions, **kwargs)]


class AsyncRewardFunction:
    """``RewardFunction``, awaitable: the batch runs on a worker thread, never on the loop.

    Example:
        rewards = await AsyncRewardFunction(env)(completions)
    """

    def __init__(self, env: Any, client: DeepGym | None = None, max_parallel: int = 32,
                 **kwargs: Any) -> None:
        self.sync = RewardFunction(env, client, max_parallel, **kwargs)
        self.__name__ = self.sync.__name__
        self.masked_rate = self.sync.masked_rate

    def environments(self, completions: Sequence[Any], **kwargs: Any) -> list[Environment]:
        """Each completion's environment (routing is cheap: it runs on the caller's thread)."""
        return self.sync.environments(completions, **kwargs)

    async def _run(self, method: str, completions: Sequence[Any], kwargs: dict[str, Any]):
        loop = asyncio.get_running_loop()
        call = functools.partial(getattr(self.sync, method), completions, **kwargs)
        return await loop.run_in_executor(None, call)

    async def results(self, completions: Sequence[Any], **kwargs: Any) -> list[RunResult]:
        return await self._run("results", completions, kwargs)

    async def score_routed(self, completions: Sequence[Any],
                           envs: Sequence[Environment]) -> list[RunResult]:
        loop = asyncio.get_running_loop()
        call = functools.partial(self.sync.score_routed, completions, envs)
        return await loop.run_in_executor(None, call)

    async def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        return await self._run("__call__", completions, kwargs)

    async def shaped_rewards(self, completions: Sequence[Any], **kwargs: Any):
        return await self._run("shaped_rewards", completions, kwargs)

    async def per_test_rewards(self, completions: Sequence[Any], **kwargs: Any):
        return await self._run("per_test_rewards", completions, kwargs)
