"""verl (0.9) on the shared pool: a custom reward function, a judged-only GRPO estimator, data.

Reward: point verl's reward loop at :func:`compute_score` (or :func:`compute_score_async`)::

    reward:
      custom_reward_function:
        path: pkg://deepgym_ray.integrations.verl
        name: compute_score_async
        reward_kwargs: {environments: [coin_change, knapsack_01], no_verdict_score: .nan}

verl's ``RewardLoopWorker`` actors call it once per sample. Each sample is routed by its
``extra_info`` (``env_name``, ``benchmark``, ``task_id``, ...) with MixedEnvironment's rules,
``data_source`` standing in for ``benchmark`` when ``extra_info`` has none, and scored on the
cluster's one named pool: the workers are Ray actors of the same cluster, so
:func:`~deepgym_ray.pool.get_pool` finds the pool's named actors instead of starting its own.
The result is a dict with the same keys for every sample (verl takes them from the first):
``score``, ``has_verdict``, ``error_type``, ``env_name`` and ``reward/<component>`` for each of
``reward_kwargs.components``.

No verdict: verl wants a number (``None`` crashes its reward assembly). ``no_verdict_score``
(default 0.0) is what such a sample scores. With the judged-only estimator below, set it to
NaN: verl 0.9's ``compute_advantage`` hands a registered estimator only ``token_level_rewards``,
``response_mask``, ``index`` and ``config`` (the ``has_verdict`` column reaches the batch's
``non_tensor_batch`` but not the estimator; the v1 trainer does not even fetch it), so the NaN
score is the mark that reaches it. The estimator also takes ``has_verdict=`` or
``non_tensor_batch=`` directly when a caller can pass them.

Advantages: importing this module registers :data:`ADV_ESTIMATOR` with verl's own registry
(``register_adv_est``). verl imports it by itself through the ``verl.plugins`` entry point this
package declares; ``VERL_USE_EXTERNAL_MODULES=deepgym_ray.integrations.verl`` does the same.
Set ``algorithm.adv_estimator: deepgym_grpo_judged``. A sample without a verdict gets exactly
zero advantage, and its group's mean and std are those of its judged samples alone (verl's own
GRPO run on the judged rows, so every other detail matches ``adv_estimator: grpo``, including
``algorithm.norm_adv_by_std_in_grpo``, read from the config verl passes, as verl reads it).

Data: :func:`write_verl_parquet` writes the columns verl's RL dataset reads.

Example:
    write_verl_parquet("train.parquet", mixed, n=512)
    compute_score("coin_change", "```python\\n...```", "coin_change",
                  {"env_name": "coin_change"})
    # {'score': 1.0, 'has_verdict': True, 'error_type': '', 'env_name': 'coin_change'}
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from deepgym_ray.integrations.rows import RowScorer
from deepgym_ray.models import Environment
from deepgym_ray.reward.mixed import NAME_FIELDS, SUITE_FIELDS, TASK_ID_FIELDS, MixedEnvironment

__all__ = [
    "ADV_ESTIMATOR",
    "VerlRewardSettings",
    "compute_judged_grpo_advantage",
    "compute_score",
    "compute_score_async",
    "register_advantage_estimator",
    "verl_rows",
    "write_verl_parquet",
]

logger = logging.getLogger(__name__)

ADV_ESTIMATOR = "deepgym_grpo_judged"

# Keyword arguments verl itself may add to a reward call; they are not settings.
_VERL_ARGUMENTS = frozenset({"reward_router_address", "reward_model_tokenizer"})
_ROUTING_FIELDS = (*NAME_FIELDS, *SUITE_FIELDS, *TASK_ID_FIELDS)


class VerlRewardSettings(BaseModel):
    """What ``reward.custom_reward_function.reward_kwargs`` may hold.

    ``environments``: names as ``deepgym-ray eval`` takes them (suites expand to their
    members); ``mixed``: a mixture file (see :mod:`deepgym_ray.reward.mixed_config`); neither: every
    built-in environment. ``config``: a DeepGymConfig YAML (provider, pool name and shape);
    default: the trainers' default client. ``no_verdict_score``: a sample's score without a
    verdict (NaN for the judged-only estimator). ``components``: reward components to report.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    environments: tuple[str, ...] | None = None
    mixed: str | None = None
    config: str | None = None
    no_verdict_score: float = 0.0
    components: tuple[str, ...] = ()
    max_parallel: int = Field(default=32, ge=1)


_SCORERS: dict[str, RowScorer] = {}
_SCORERS_LOCK = threading.Lock()


def _build_scorer(settings: VerlRewardSettings) -> RowScorer:
    from deepgym_ray.envs import builtin_names
    from deepgym_ray.integrations.rows import row_scorer
    from deepgym_ray.reward.mixed_config import mixture_of

    env = None
    if settings.mixed is None:
        env = mixture_of(list(settings.environments or builtin_names()))
    return row_scorer(env, mixed=settings.mixed, config=settings.config,
                      max_parallel=settings.max_parallel,
                      no_verdict_score=settings.no_verdict_score,
                      components=settings.components)


def _plain(value: Any) -> Any:
    """verl's ``reward_kwargs`` values arrive as OmegaConf containers; settings want lists."""
    if type(value).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(value, resolve=True)
    return value


def _scorer(kwargs: Mapping[str, Any]) -> RowScorer:
    """This process's scorer for these settings (built once: the environments load once)."""
    settings = VerlRewardSettings.model_validate(
        {k: _plain(v) for k, v in kwargs.items() if k not in _VERL_ARGUMENTS})
    key = json.dumps(settings.model_dump(mode="json"), sort_keys=True)
    with _SCORERS_LOCK:
        scorer = _SCORERS.get(key)
        if scorer is None:
            scorer = _SCORERS[key] = _build_scorer(settings)
        return scorer


def _routing_row(data_source: Any, extra_info: Any) -> dict[str, Any]:
    """The metadata MixedEnvironment routes by: ``extra_info``'s fields, ``data_source`` as
    the ``benchmark`` when ``extra_info`` names none."""
    info = dict(extra_info) if isinstance(extra_info, Mapping) else {}
    row = {k: info.get(k) for k in _ROUTING_FIELDS if k in info}
    if row.get("benchmark") in (None, "") and data_source not in (None, ""):
        row["benchmark"] = data_source
    return row


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Score one sample for verl; see the module docstring. ``kwargs`` are the settings
    (:class:`VerlRewardSettings`) verl passes from ``reward_kwargs``. Raises ValueError
    naming the sample's metadata when it routes to no environment."""
    scorer = _scorer(kwargs)
    [fields] = scorer.score([solution_str], [_routing_row(data_source, extra_info)])
    if isinstance(fields, ValueError):
        raise fields
    return fields


async def compute_score_async(
    data_source: Any,
    solution_str: str,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """:func:`compute_score` on a worker thread, so verl's event loop keeps gathering the
    other samples while this one runs in its sandbox."""
    loop = asyncio.get_running_loop()
    call = functools.partial(compute_score, data_source, solution_str, ground_truth,
                             extra_info, **kwargs)
    return await loop.run_in_executor(None, call)


# --- the judged-only GRPO estimator --------------------------------------------------------

def _judged_rows(scores: Any, has_verdict: Any, non_tensor_batch: Any) -> Any:
    """A bool tensor: which samples had a verdict (given, or read off the NaN marks)."""
    import numpy as np
    import torch

    marked = torch.isnan(scores)
    if has_verdict is None and non_tensor_batch is not None and "has_verdict" in non_tensor_batch:
        has_verdict = non_tensor_batch["has_verdict"]
    if has_verdict is None:
        return ~marked
    judged = torch.as_tensor(np.asarray(has_verdict, dtype=bool), device=scores.device)
    if judged.shape != scores.shape:
        raise ValueError(f"has_verdict has {tuple(judged.shape)} entries for "
                         f"{tuple(scores.shape)} samples")
    if bool((judged & marked).any()):
        raise ValueError("a sample with a verdict has a NaN reward: the reward function "
                         "gave no usable score for a judged sample")
    return judged


def _norm_by_std(config: Any) -> bool:
    """The setting as verl's trainers read it for ``grpo``: ``algorithm.get(key, True)``.

    verl hands a registered estimator only ``config`` (its ``algorithm`` section, an
    ``AlgoConfig`` or a DictConfig, both with ``get``); ``grpo`` gets the value as an argument
    instead, read the same way. verl reads no other ``grpo`` setting (``epsilon`` stays 1e-6).
    """
    if config is None:
        return True
    return bool(config.get("norm_adv_by_std_in_grpo", True))


def compute_judged_grpo_advantage(
    token_level_rewards: Any,
    response_mask: Any,
    index: Any,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool | None = None,
    config: Any = None,
    has_verdict: Sequence[bool] | None = None,
    non_tensor_batch: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """GRPO outcome advantages from judged samples only: ``(advantages, returns)``.

    A sample without a verdict (``has_verdict`` False, else its reward is NaN) gets exactly
    0; every other sample gets what verl's own GRPO gives it on the batch without those
    samples (group mean and std over the judged samples of its ``index`` group).
    ``norm_adv_by_std_in_grpo`` not given: read from ``config`` (verl's ``algorithm``
    section) as verl reads it for ``grpo``, default True.
    """
    import torch
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    if norm_adv_by_std_in_grpo is None:
        norm_adv_by_std_in_grpo = _norm_by_std(config)
    scores = token_level_rewards.sum(dim=-1)
    judged = _judged_rows(scores, has_verdict, non_tensor_batch)
    advantages = torch.zeros_like(token_level_rewards, dtype=torch.float32)
    rows = judged.nonzero(as_tuple=True)[0]
    if len(rows):
        judged_advantages, _ = compute_grpo_outcome_advantage(
            token_level_rewards=token_level_rewards[rows],
            response_mask=response_mask[rows],
            index=[index[i] for i in rows.tolist()],
            epsilon=epsilon,
            norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
            config=config,
        )
        advantages[rows] = judged_advantages.to(advantages.dtype)
    return advantages, advantages


def register_advantage_estimator() -> bool:
    """Register :data:`ADV_ESTIMATOR` with verl's registry; False when verl is missing."""
    try:
        from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est
    except ImportError:
        return False
    if ADV_ESTIMATOR_REGISTRY.get(ADV_ESTIMATOR) is not compute_judged_grpo_advantage:
        register_adv_est(ADV_ESTIMATOR)(compute_judged_grpo_advantage)
    return True


register_advantage_estimator()


# --- data ----------------------------------------------------------------------------------

def verl_rows(
    envs: Environment | MixedEnvironment | Sequence[Environment],
    n: int | None = None,
    *,
    seed: int = 0,
    split: str = "train",
    ability: str = "code",
) -> list[dict[str, Any]]:
    """Rows in verl's RL dataset layout: ``data_source``, ``prompt`` (a chat), ``ability``,
    ``reward_model`` (``style``, ``ground_truth``: the environment's name, since its verifier
    holds the truth) and ``extra_info`` (``env_name``, ``split``, ``index``).

    A MixedEnvironment draws ``n`` rows by weight; an environment or a list of them gives one
    row per environment (``n`` repeats the list up to ``n`` rows).
    """
    if isinstance(envs, MixedEnvironment):
        if n is None:
            raise ValueError("verl_rows: a MixedEnvironment needs n, the number of rows to draw")
        drawn = [envs.get(row["env_name"]) for row in envs.sample_batch(n, seed=seed)]
    else:
        pool = [envs] if isinstance(envs, Environment) else list(envs)
        if not pool or not all(isinstance(e, Environment) for e in pool):
            raise TypeError("verl_rows: envs must be an Environment, a list of them, or a "
                            "MixedEnvironment")
        count = len(pool) if n is None else n
        drawn = [pool[i % len(pool)] for i in range(count)]
    return [{
        "data_source": env.name,
        "prompt": [{"role": "user", "content": env.task}],
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": env.name},
        "extra_info": {"env_name": env.name, "split": split, "index": i},
    } for i, env in enumerate(drawn)]


def write_verl_parquet(
    path: str | Path,
    envs: Environment | MixedEnvironment | Sequence[Environment],
    n: int | None = None,
    **options: Any,
) -> Path:
    """Write :func:`verl_rows` to a parquet file verl's ``data.train_files`` can read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = verl_rows(envs, n, **options)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path

