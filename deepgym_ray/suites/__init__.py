"""Benchmark suites turned into environments, and the one resolver of the names a user gives.

- :mod:`~deepgym_ray.suites.catalog`: the suites by name (``builtin``, ``humaneval``,
  ``swebench``/``swebench_pro`` from a local file of rows, ``terminal_bench``/
  ``terminal_bench_2`` from a folder of Harbor tasks), loaded
  only when one is asked for;
- :mod:`~deepgym_ray.suites.resolver`: what a name stands for (a suite, a suite member, a
  built-in environment or a folder), for the API and the CLI.

The built-in environment folders and their format are :mod:`deepgym_ray.envs`, the layer above:
suites read them, and envs knows nothing of suites.

Example:
    >>> list_suites()
    ['builtin', 'humaneval', 'swebench', 'swebench_pro', 'terminal_bench',
     'terminal_bench_2']
    >>> load_environment("builtin/coin_change").name
    'coin_change'
"""

from deepgym_ray.suites.catalog import (
    UnknownSuiteError,
    list_suites,
    load_suite,
    load_suite_environment,
    native_prompt,
    sample_to_task,
)
from deepgym_ray.suites.resolver import (
    Suite,
    UnknownEnvironmentError,
    load_environment,
    resolve_environments,
)

__all__ = [
    "Suite",
    "UnknownEnvironmentError",
    "UnknownSuiteError",
    "list_suites",
    "load_environment",
    "load_suite",
    "load_suite_environment",
    "native_prompt",
    "resolve_environments",
    "sample_to_task",
]
