"""Sandbox providers and :func:`make_provider`, which picks one by mode.

Example:
    >>> provider = make_provider("local")  # doctest: +SKIP
    >>> provider.name                      # doctest: +SKIP
    'local'
"""

from __future__ import annotations

import importlib.util
import logging
import os
from typing import Any

from deepgym_ray.exceptions import DeepGymError
from deepgym_ray.sandboxes.base import CommandResult, Sandbox, SandboxProvider

__all__ = ["CommandResult", "Sandbox", "SandboxProvider", "make_provider", "resolve_mode"]

logger = logging.getLogger(__name__)
MODES = ("auto", "local", "docker", "daytona")
_warned_missing_sdk = False


def resolve_mode(mode: str) -> str:
    """The concrete provider ``mode`` stands for ('auto': Daytona when configured, else local)."""
    global _warned_missing_sdk
    if mode not in MODES:
        raise ValueError(f"unknown sandbox mode {mode!r}; choose one of {', '.join(MODES)}")
    if mode != "auto":
        return mode
    if not os.environ.get("DAYTONA_API_KEY"):
        return "local"
    if importlib.util.find_spec("daytona") is not None:
        return "daytona"
    if not _warned_missing_sdk:
        _warned_missing_sdk = True
        logger.warning("DAYTONA_API_KEY is set but the 'daytona' SDK is not installed "
                       "(pip install 'deepgym_ray[daytona]'); using the local sandbox")
    return "local"


def make_provider(mode: str = "auto", **options: Any) -> SandboxProvider:
    """A new provider for ``mode`` ('local', 'docker', 'daytona' or 'auto') with ``options``."""
    concrete = resolve_mode(mode)
    if concrete == "local":
        from deepgym_ray.sandboxes.local import LocalProvider

        return LocalProvider(**options)
    module_name = f"deepgym_ray.sandboxes.{concrete}"
    if importlib.util.find_spec(module_name) is None:
        raise DeepGymError(f"the {concrete!r} sandbox provider is not built yet; "
                           "use mode='local'")
    module = importlib.import_module(module_name)
    factory = getattr(module, "make_provider", None) or getattr(module, "PROVIDER_CLASS", None)
    if factory is None:
        raise DeepGymError(f"{module_name} defines no make_provider() or PROVIDER_CLASS")
    return factory(**options)
