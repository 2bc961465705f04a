"""Built-in environments (one folder each) and the loader.

Example:
    >>> from deepgym_ray.envs import load_environment
    >>> load_environment("coin_change").case_timeout
    5.0
"""

from deepgym_ray.envs.registry import (
    builtin_names,
    list_environments,
    load_environment,
    load_folder,
)

__all__ = ["builtin_names", "list_environments", "load_environment", "load_folder"]
