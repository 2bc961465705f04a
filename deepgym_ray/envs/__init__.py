"""Environments: the built-in folders, the folder format, and the one name resolver.

Example:
    >>> from deepgym_ray.envs import load_environment
    >>> load_environment("coin_change").case_timeout
    5.0
"""

from deepgym_ray.envs.registry import builtin_names, list_environments, load_folder
from deepgym_ray.envs.resolver import (
    UnknownEnvironmentError,
    load_environment,
    resolve_environments,
)

__all__ = ["UnknownEnvironmentError", "builtin_names", "list_environments", "load_environment",
           "load_folder", "resolve_environments"]
