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
    "VerifierError": "deepgym_ray.exceptions",
    "DeepGymTimeoutError": "deepgym_ray.exceptions",
    "is_infrastructure_failure": "deepgym_ray.exceptions",
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
    from deepgym_ray.completions import completion_to_code, extract_code
    from deepgym_ray.contract import MODEL_FAULT_ERRORS, check_score, is_verdict
    from deepgym_ray.exceptions import (
        DeepGymError,
        DeepGymTimeoutError,
        ProviderConnectionError,
        ProviderError,
        ProviderHTTPError,
        ProviderTimeoutError,
        SandboxDiedError,
        SandboxError,
        SandboxEvictedError,
        SandboxExpiredError,
        VerifierError,
        is_infrastructure_failure,
    )
    from deepgym_ray.models import BatchResult, CaseResult, Environment, EvalResult, RunResult
