"""Environments: the built-in folders and the folder format.

What a name stands for (a built-in, a folder, a suite or its member) is resolved one layer
below, by :mod:`deepgym_ray.suites.resolver` (``deepgym_ray.load_environment``): suites are
made of environments, so envs knows nothing of suites.

Example:
    >>> from deepgym_ray.envs import BUILTIN_DIR, load_folder
    >>> load_folder(BUILTIN_DIR / "coin_change").case_timeout
    5.0
"""

from deepgym_ray.envs.registry import (
    BUILTIN_DIR,
    MULTI_TURN_DIR,
    builtin_names,
    is_environment_folder,
    list_environments,
    load_folder,
    load_folder_suite,
    multi_turn_names,
)

__all__ = ["BUILTIN_DIR", "MULTI_TURN_DIR", "builtin_names", "is_environment_folder",
           "list_environments", "load_folder", "load_folder_suite", "multi_turn_names"]
