"""deepgym_ray: sandboxed, verdict-aware rewards for RL on code, scored on a Ray cluster.

Importing the package starts nothing: heavy parts (Ray, the sandboxes, the trainers'
integrations) load on first use of the name that needs them.

Example:
    >>> from deepgym_ray import RunResult
    >>> RunResult(error_type="sandbox_error").reward is None
    True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> the module that defines it. Resolved lazily by __getattr__.
_EXPORTS: dict[str, str] = {
    # the reward contract
    "MODEL_FAULT_ERRORS": "deepgym_ray.contract",
    "is_verdict": "deepgym_ray.contract",
    "check_score": "deepgym_ray.contract",
    # models
    "Environment": "deepgym_ray.models",
    "RunResult": "deepgym_ray.models",
    "CaseResult": "deepgym_ray.models",
    "BatchResult": "deepgym_ray.models",
    "EvalResult": "deepgym_ray.models",
    # exceptions
    "DeepGymError": "deepgym_ray.exceptions",
    "SandboxError": "deepgym_ray.exceptions",
    "SandboxDiedError": "deepgym_ray.exceptions",
    "SandboxExpiredError": "deepgym_ray.exceptions",
    "SandboxEvictedError": "deepgym_ray.exceptions",
    "ProviderError": "deepgym_ray.exceptions",
    "ProviderConnectionError": "deepgym_ray.exceptions",
    "ProviderTimeoutError": "deepgym_ray.exceptions",
    "ProviderHTTPError": "deepgym_ray.exceptions",
    "ProviderUnavailableError": "deepgym_ray.exceptions",
    "VerifierError": "deepgym_ray.exceptions",
    "DeepGymTimeoutError": "deepgym_ray.exceptions",
    "is_infrastructure_failure": "deepgym_ray.exceptions",
    # client, environments, sandboxes
    "DeepGym": "deepgym_ray.client",
    "default_client": "deepgym_ray.client",
    "Scorer": "deepgym_ray.scoring",
    "load_environment": "deepgym_ray.suites",
    "resolve_environments": "deepgym_ray.suites",
    "list_environments": "deepgym_ray.envs",
    "make_provider": "deepgym_ray.sandboxes",
    "SandboxProvider": "deepgym_ray.sandboxes",
    "LocalProvider": "deepgym_ray.sandboxes.local",
    "DaytonaProvider": "deepgym_ray.sandboxes.daytona",
    "E2BProvider": "deepgym_ray.sandboxes.e2b",
    "ModalProvider": "deepgym_ray.sandboxes.modal",
    # the Ray pool and reward functions
    "VerifierPool": "deepgym_ray.pool",
    "VerifierActor": "deepgym_ray.pool.actor",
    "get_pool": "deepgym_ray.pool",
    "ensure_ray": "deepgym_ray.pool.connect",
    "ClusterConnectionError": "deepgym_ray.pool.connect",
    "pool_status": "deepgym_ray.pool.admin",
    "shutdown_pools": "deepgym_ray.pool.admin",
    "RewardFunction": "deepgym_ray.reward",
    "AsyncRewardFunction": "deepgym_ray.reward",
    "MaskedRate": "deepgym_ray.reward",
    "grpo_advantages": "deepgym_ray.reward",
    # mixed environments and trainer integrations
    "MixedEnvironment": "deepgym_ray.reward.mixed",
    "make_trl_reward_fn": "deepgym_ray.integrations.trl",
    "make_trl_async_reward_fn": "deepgym_ray.integrations.trl",
    "mask_unjudged": "deepgym_ray.integrations.trl_mask",
    "make_trl_environment": "deepgym_ray.integrations.trl_env",
    "make_dapo_reward_fn": "deepgym_ray.integrations.dapo",
    "make_dapo_shaped_reward_fn": "deepgym_ray.integrations.dapo",
    "MixedConfig": "deepgym_ray.reward.mixed_config",
    "load_mixed_config": "deepgym_ray.reward.mixed_config",
    "RowScorer": "deepgym_ray.integrations.rows",
    "score_dataset": "deepgym_ray.integrations.ray_data",
    "make_lm_eval_task": "deepgym_ray.integrations.lm_eval",
    "generate_axolotl_config": "deepgym_ray.integrations.axolotl",
    # verl and HTTP trainers
    "VerlRewardSettings": "deepgym_ray.integrations.verl",
    "compute_judged_grpo_advantage": "deepgym_ray.integrations.verl",
    "verl_rows": "deepgym_ray.integrations.verl",
    "write_verl_parquet": "deepgym_ray.integrations.verl",
    "ServeSettings": "deepgym_ray.integrations.serve",
    "start_service": "deepgym_ray.integrations.serve",
    # repository tasks
    "PatchTask": "deepgym_ray.repo_tasks",
    "TerminalTask": "deepgym_ray.repo_tasks",
    "ImageRecipe": "deepgym_ray.repo_tasks",
    "ImageBuildError": "deepgym_ray.images",
    # agent episodes
    "Action": "deepgym_ray.sessions",
    "Observation": "deepgym_ray.sessions",
    "Trajectory": "deepgym_ray.sessions",
    "TrajectoryStep": "deepgym_ray.sessions",
    "failure_result": "deepgym_ray.sessions",
    "agent_exhausted": "deepgym_ray.sessions",
    "Session": "deepgym_ray.sessions",
    "AsyncSession": "deepgym_ray.sessions",
    "SessionStateError": "deepgym_ray.sessions",
    "MultiTurnTask": "deepgym_ray.multi_turn",
    # benchmark suites
    "list_suites": "deepgym_ray.suites",
    "load_suite": "deepgym_ray.suites",
    "load_suite_environment": "deepgym_ray.suites",
    # completions
    "completion_to_code": "deepgym_ray.completions",
    "extract_code": "deepgym_ray.completions",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'deepgym_ray' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from deepgym_ray.client import DeepGym, default_client
    from deepgym_ray.completions import completion_to_code, extract_code
    from deepgym_ray.contract import MODEL_FAULT_ERRORS, check_score, is_verdict
    from deepgym_ray.envs import list_environments
    from deepgym_ray.exceptions import (
        DeepGymError,
        DeepGymTimeoutError,
        ProviderConnectionError,
        ProviderError,
        ProviderHTTPError,
        ProviderTimeoutError,
        ProviderUnavailableError,
        SandboxDiedError,
        SandboxError,
        SandboxEvictedError,
        SandboxExpiredError,
        VerifierError,
        is_infrastructure_failure,
    )
    from deepgym_ray.images import ImageBuildError
    from deepgym_ray.integrations.axolotl import generate_axolotl_config
    from deepgym_ray.integrations.dapo import make_dapo_reward_fn, make_dapo_shaped_reward_fn
    from deepgym_ray.integrations.lm_eval import make_lm_eval_task
    from deepgym_ray.integrations.ray_data import score_dataset
    from deepgym_ray.integrations.rows import RowScorer
    from deepgym_ray.integrations.serve import ServeSettings, start_service
    from deepgym_ray.integrations.trl import make_trl_async_reward_fn, make_trl_reward_fn
    from deepgym_ray.integrations.trl_env import make_trl_environment
    from deepgym_ray.integrations.trl_mask import mask_unjudged
    from deepgym_ray.integrations.verl import (
        VerlRewardSettings,
        compute_judged_grpo_advantage,
        verl_rows,
        write_verl_parquet,
    )
    from deepgym_ray.models import BatchResult, CaseResult, Environment, EvalResult, RunResult
    from deepgym_ray.multi_turn import MultiTurnTask
    from deepgym_ray.pool import VerifierPool, get_pool
    from deepgym_ray.pool.actor import VerifierActor
    from deepgym_ray.pool.admin import pool_status, shutdown_pools
    from deepgym_ray.pool.connect import ClusterConnectionError, ensure_ray
    from deepgym_ray.repo_tasks import ImageRecipe, PatchTask, TerminalTask
    from deepgym_ray.reward import AsyncRewardFunction, MaskedRate, RewardFunction, grpo_advantages
    from deepgym_ray.reward.mixed import MixedEnvironment
    from deepgym_ray.reward.mixed_config import MixedConfig, load_mixed_config
    from deepgym_ray.sandboxes import SandboxProvider, make_provider
    from deepgym_ray.sandboxes.daytona import DaytonaProvider
    from deepgym_ray.sandboxes.e2b import E2BProvider
    from deepgym_ray.sandboxes.local import LocalProvider
    from deepgym_ray.sandboxes.modal import ModalProvider
    from deepgym_ray.scoring import Scorer
    from deepgym_ray.sessions import (
        Action,
        AsyncSession,
        Observation,
        Session,
        SessionStateError,
        Trajectory,
        TrajectoryStep,
        agent_exhausted,
        failure_result,
    )
    from deepgym_ray.suites import (
        list_suites,
        load_environment,
        load_suite,
        load_suite_environment,
        resolve_environments,
    )
