"""Reward functions for TRL's GRPOTrainer (and any trainer with TRL's calling convention).

TRL calls a reward function as ``fn(prompts=..., completions=..., completion_ids=..., **columns,
trainer_state=..., log_extra=..., log_metric=...)``: every dataset column comes as a list aligned
with the completions, ``log_metric(name, value)`` records a scalar for the step and
``log_extra(column, values)`` adds a column to the completions table (TRL >= 1.x; older versions
pass neither, and both are optional here).

What the reward function does with a batch: each completion (plain text, or a conversation whose
last assistant turn is the answer) is routed to its environment (a
:class:`~deepgym_ray.reward.mixed.MixedEnvironment` reads the row's columns), scored on the Ray pool
with at most ``max_parallel`` runs in flight, and turned into a reward: the score, or one reward
component with ``component=`` (a result without that component gives its score), or None where there
is no verdict (TRL then leaves the completion out of its group's baseline, but only when every
reward function gives None: beside other functions, wrap them all with
:func:`~deepgym_ray.integrations.trl_mask.mask_unjudged`). It logs the batch's
no-verdict rate as ``<name>/no_verdict_rate`` and each completion's ``error_type``.
Functions built on the same client and environment (one per component) score each batch once
between them (see :mod:`deepgym_ray.integrations.shared_batch`).

Example:
    from deepgym_ray.suites import load_environment
    reward_fn = make_trl_reward_fn(load_environment("coin_change"))
    trainer = GRPOTrainer(model=..., reward_funcs=[reward_fn], ...)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from deepgym_ray.client import default_client
from deepgym_ray.completions import check_completions
from deepgym_ray.config import check_max_parallel
from deepgym_ray.integrations.shared_batch import batch_key, shared_batch_for
from deepgym_ray.models import Environment, RunResult

if TYPE_CHECKING:  # pragma: no cover
    from deepgym_ray.client import DeepGym

__all__ = [
    "TRLAsyncRewardFunction",
    "TRLRewardFunction",
    "make_trl_async_reward_fn",
    "make_trl_reward_fn",
    "reward_of",
]

logger = logging.getLogger(__name__)

# Keyword arguments TRL passes that are not dataset columns: never used for routing.
TRL_ARGUMENTS = frozenset(
    {"prompts", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments"}
)


def _for_siblings(exc: BaseException) -> Exception:
    """What siblings waiting on a failed scoring see: an Exception, so they score themselves
    (a cancelled owner must not cancel them)."""
    return exc if isinstance(exc, Exception) else RuntimeError(f"scoring interrupted: {exc!r}")


def reward_of(result: RunResult, component: str | None = None) -> float | None:
    """The reward a trainer gets for ``result``: None without a verdict, else the score or
    the named reward component (the score when the result lacks that component)."""
    if not result.has_verdict:
        return None
    if component is not None and result.reward_components \
            and component in result.reward_components:
        return float(result.reward_components[component])
    return float(result.score)


class _TRLRewardBase:
    """What the sync and async TRL reward functions share: checks, naming, logging."""

    def __init__(
        self,
        env: Any,
        client: DeepGym | None = None,
        max_parallel: int = 32,
        component: str | None = None,
        name: str | None = None,
    ) -> None:
        from deepgym_ray.reward.mixed import MixedEnvironment

        # Any router with MixedEnvironment's route() will do; a name or a path will not.
        if not isinstance(env, (Environment, MixedEnvironment)) \
                and not callable(getattr(env, "route", None)):
            raise TypeError(
                "env must be an Environment or a MixedEnvironment, got "
                f"{type(env).__name__} (load one with deepgym_ray.load_environment)"
            )
        check_max_parallel(max_parallel)
        if component is not None and (not isinstance(component, str) or not component):
            raise ValueError(f"component must be a reward component's name, got {component!r}")
        self.env = env
        self.client = client if client is not None else default_client()
        self.max_parallel = max_parallel
        self.component = component
        # TRL names the reward in its logs after __name__.
        self.__name__ = name or ("deepgym" if component is None else f"deepgym_{component}")
        self._scorer = self._make_scorer()
        self._shared = shared_batch_for(self.client, env)

    def _make_scorer(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def error_type_column(self) -> str:
        """The completions-table column this function fills (one per function, so two
        reward functions never write into the same column)."""
        return "error_type" if self.__name__ == "deepgym" else f"{self.__name__}/error_type"

    @staticmethod
    def _columns(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in kwargs.items() if k not in TRL_ARGUMENTS}

    def _claim(self, completions: list[Any], columns: dict[str, Any]):
        """Route the batch (once: a bad row fails here, named), then join a sibling's scoring
        of this very batch or own its scoring (see :mod:`~deepgym_ray.integrations.shared_batch`).
        Returns (environments, future, owner)."""
        envs = self._scorer.environments(completions, **columns)
        names = [self.env.name] if isinstance(self.env, Environment) else [e.name for e in envs]
        return (envs, *self._shared.claim(id(self), batch_key(completions, names)))

    def _reused(self, results: list[RunResult]) -> list[RunResult]:
        self._scorer.masked_rate.update(results)  # this function's own tally counts them too
        return list(results)

    def _finish(self, results: Sequence[RunResult], kwargs: dict[str, Any]) -> list[float | None]:
        rewards = [reward_of(r, self.component) for r in results]
        missing = sum(1 for r in rewards if r is None)
        rate = missing / len(rewards) if rewards else 0.0
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric(f"{self.__name__}/no_verdict_rate", rate)
        log_extra = kwargs.get("log_extra")
        if callable(log_extra):
            log_extra(self.error_type_column, [r.error_type for r in results])
        if missing:
            logger.debug("%s: %d of %d completions got no verdict", self.__name__, missing,
                         len(rewards))
        return rewards

    def __repr__(self) -> str:
        env_name = getattr(self.env, "name", "?")
        extra = f", component={self.component!r}" if self.component else ""
        return f"{type(self).__name__}({env_name!r}{extra}, max_parallel={self.max_parallel})"


class TRLRewardFunction(_TRLRewardBase):
    """The synchronous TRL reward function (see :func:`make_trl_reward_fn`)."""

    def _make_scorer(self) -> Any:
        from deepgym_ray.reward import RewardFunction

        return RewardFunction(
            self.env, client=self.client, max_parallel=self.max_parallel, name=self.__name__
        )

    def results(self, completions: Sequence[Any], **kwargs: Any) -> list[RunResult]:
        """The RunResult of each completion, in order (routing by the row columns in kwargs)."""
        completions = check_completions(completions, "completions")
        columns = self._columns(kwargs)
        envs, future, owner = self._claim(completions, columns)
        # Only a finished sibling scoring is taken: waiting here on one still running could be
        # waiting on an async sibling of this very thread's event loop.
        if not owner and future.done() and future.exception() is None:
            return self._reused(future.result())
        if not owner:
            return list(self._scorer.score_routed(completions, envs))
        try:
            results = list(self._scorer.score_routed(completions, envs))
        except BaseException as exc:
            future.set_exception(_for_siblings(exc))
            raise
        future.set_result(results)
        return results

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        return self._finish(self.results(completions, **kwargs), kwargs)


class TRLAsyncRewardFunction(_TRLRewardBase):
    """The asynchronous TRL reward function (see :func:`make_trl_async_reward_fn`). TRL runs
    async reward functions concurrently with each other on its own event loop."""

    def _make_scorer(self) -> Any:
        from deepgym_ray.reward import AsyncRewardFunction

        return AsyncRewardFunction(
            self.env, client=self.client, max_parallel=self.max_parallel, name=self.__name__
        )

    async def results(self, completions: Sequence[Any], **kwargs: Any) -> list[RunResult]:
        """The RunResult of each completion, in order, without blocking the event loop."""
        completions = check_completions(completions, "completions")
        columns = self._columns(kwargs)
        envs, future, owner = self._claim(completions, columns)
        if not owner:
            try:
                return self._reused(await asyncio.wrap_future(future))
            except Exception:  # the sibling's scoring failed: try on our own
                return list(await self._scorer.score_routed(completions, envs))
        try:
            results = list(await self._scorer.score_routed(completions, envs))
        except BaseException as exc:
            future.set_exception(_for_siblings(exc))
            raise
        future.set_result(results)
        return results

    async def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        return self._finish(await self.results(completions, **kwargs), kwargs)


def make_trl_reward_fn(
    env: Any,
    client: DeepGym | None = None,
    max_parallel: int = 32,
    component: str | None = None,
    *,
    name: str | None = None,
) -> TRLRewardFunction:
    """A reward function for ``GRPOTrainer(reward_funcs=[...])``.

    ``env`` is an Environment or a MixedEnvironment; ``client`` a DeepGym client (default
    ``DeepGym(mode="auto")``); ``max_parallel`` caps the runs in flight; ``component`` returns
    that reward component instead of the score; ``name`` overrides the name TRL logs it under
    (``deepgym``, or ``deepgym_<component>``).

    Example:
        reward_fn = make_trl_reward_fn(env, DeepGym(mode="local"))
        reward_fn(completions=["```python\\nprint(1)\\n```"])
        # [0.0]
    """
    return TRLRewardFunction(env, client, max_parallel, component, name)


def make_trl_async_reward_fn(
    env: Any,
    client: DeepGym | None = None,
    max_parallel: int = 32,
    component: str | None = None,
    *,
    name: str | None = None,
) -> TRLAsyncRewardFunction:
    """The async version of :func:`make_trl_reward_fn` (``await reward_fn(completions=...)``)."""
    return TRLAsyncRewardFunction(env, client, max_parallel, component, name)
