"""The ``builtin`` suite names every built-in environment."""

from __future__ import annotations

from deepgym_ray.envs import list_environments
from deepgym_ray.suites import list_suites, load_environment, load_suite


def test_builtin_suite_is_every_builtin_environment():
    assert "builtin" in list_suites()
    names = [env.name for env in load_suite("builtin")]
    assert names == [info["name"] for info in list_environments()]
    assert len(names) >= 15


def test_builtin_member_by_suite_name():
    assert load_environment("builtin/coin_change") == load_environment("coin_change")
