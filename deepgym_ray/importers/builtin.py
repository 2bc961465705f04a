"""The ``builtin`` suite: every environment shipped in ``deepgym_ray/envs``, by name.

``deepgym-ray eval builtin --reference`` scores each built-in reference solution, which is the
quickest check that a machine (or a cluster) judges correctly end to end.

Example:
    >>> [env.name for env in load_builtin()][:2]        # doctest: +SKIP
    ['balanced_brackets', 'coin_change']
"""

from __future__ import annotations

from deepgym_ray.models import Environment


def load_builtin() -> list[Environment]:
    """Every built-in environment, in name order."""
    from deepgym_ray.envs import list_environments, load_environment

    return [load_environment(info["name"]) for info in list_environments()]


def load_builtin_environment(name: str) -> Environment:
    """``builtin/NAME``: the built-in environment NAME."""
    from deepgym_ray.envs import load_environment

    return load_environment(name.partition("/")[2])
