"""MixedEnvironment: several environments behind one reward function.

The weights only decide what :meth:`MixedEnvironment.sample_batch` draws. Scoring routes each
completion by its own dataset row (TRL passes every dataset column to a reward function as a
list aligned with the completions), never by the weights.

How a row finds its environment (the first rule that decides wins):

1. ``env_name``, then ``environment_name``: the environment's exact name (compared without
   case). A row that names an environment this mixture lacks is an error, not a fall-through,
   so a typo never silently scores against another environment.
2. ``benchmark``, then ``task_type``: an environment's exact name, or a suite, i.e. the part of
   names before the first ``/`` (``humaneval`` covers ``humaneval/0``, ``humaneval/1``...). One
   match decides; several matches are narrowed by rule 3; no match falls through to rule 3.
3. Task fields, in order ``instance_id``, ``task_id``, ``problem_id``: the value (text, compared
   without case, characters outside ``[a-z0-9_.-/]`` read as ``_``) is an environment's name
   (``HumanEval/3`` -> ``humaneval/3``), or the last part of a name after ``/``
   (``django__django-11099`` -> ``swebench/django__django-11099``), or ``<suite>/<value>`` when
   rule 2 named a suite. A value that matches several environments is ambiguous.

Anything else raises ValueError naming the completion's index and the metadata it had. Missing
values (None, empty strings, NaN: what ``datasets`` and pandas fill in for absent columns)
count as absent.

Example:
    >>> from deepgym_ray.models import Environment
    >>> a = Environment(name="coin_change", task="Make change.", verifier_code="return 1.0")
    >>> b = Environment(name="two_sum", task="Find a pair.", verifier_code="return 1.0")
    >>> mixed = MixedEnvironment(environments=[(a, 0.75), (b, 0.25)])
    >>> rows = mixed.sample_batch(4, seed=0)
    >>> sorted(rows[0])
    ['env_name', 'prompt', 'task']
    >>> [e.name for e in mixed.route(["x", "y"], env_name=["two_sum", "coin_change"])]
    ['two_sum', 'coin_change']
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from deepgym_ray.models import Environment

__all__ = ["NAME_FIELDS", "SUITE_FIELDS", "TASK_ID_FIELDS", "MixedEnvironment"]

NAME_FIELDS: tuple[str, ...] = ("env_name", "environment_name")
SUITE_FIELDS: tuple[str, ...] = ("benchmark", "task_type")
TASK_ID_FIELDS: tuple[str, ...] = ("instance_id", "task_id", "problem_id")

_UNSAFE = re.compile(r"[^a-z0-9_.\-/]")


def _norm(value: Any) -> str:
    return _UNSAFE.sub("_", str(value).strip().lower())


def _present(value: Any) -> bool:
    if isinstance(value, float) and math.isnan(value):  # pandas' missing value
        return False
    return value is not None and not (isinstance(value, str) and not value.strip())


def _suite(name: str) -> str:
    return name.split("/", 1)[0]


class MixedEnvironment:
    """Several environments, drawn by weight for datasets and routed by row metadata for scoring.

    ``environments`` is a list of ``(environment, weight)`` pairs; a bare environment weighs 1.
    An environment may be a suite, a list of environments (``load_environment("swebench_pro",
    path=...)``, ``resolve_environments(...)``): its members share its weight evenly, and rows
    reach them by ``instance_id`` or ``task_id`` (rule 3).
    An environment may also be given by name, loaded with
    :func:`deepgym_ray.suites.load_environment`. Weights are finite and >= 0, with a positive sum;
    names are unique.
    """

    def __init__(
        self,
        environments: Iterable[tuple[Environment | str | list[Environment], float]
                               | Environment | str | list[Environment]],
        *,
        task_id_fields: Sequence[str] = TASK_ID_FIELDS,
    ) -> None:
        envs: list[Environment] = []
        weights: list[float] = []
        for position, item in enumerate(environments):
            env, weight = item if isinstance(item, tuple) else (item, 1.0)
            # A suite (a list of environments, as resolve_environments gives) shares its
            # weight evenly among its members.
            members = [self._as_environment(e, position) for e in env] \
                if isinstance(env, list) else [self._as_environment(env, position)]
            if not members:
                raise ValueError(f"environments[{position}] is an empty suite")
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) \
                    or not math.isfinite(weight) or weight < 0:
                raise ValueError(
                    f"environment {members[0].name!r}: weight must be a finite number >= 0, "
                    f"got {weight!r}"
                )
            envs.extend(members)
            weights.extend([float(weight) / len(members)] * len(members))
        if not envs:
            raise ValueError("MixedEnvironment needs at least one (environment, weight) pair")
        if sum(weights) <= 0:
            raise ValueError(f"MixedEnvironment weights must not all be 0, got {weights}")
        self._by_name: dict[str, Environment] = {}
        for env in envs:
            key = _norm(env.name)
            if key in self._by_name:
                raise ValueError(f"environment {env.name!r} appears twice in the mixture")
            self._by_name[key] = env
        self._envs = envs
        self._weights = weights
        self.task_id_fields = tuple(task_id_fields)
        self._by_suite: dict[str, list[Environment]] = {}
        self._by_last_part: dict[str, list[Environment]] = {}
        for env in envs:
            key = _norm(env.name)
            self._by_suite.setdefault(_suite(key), []).append(env)
            if "/" in key:
                self._by_last_part.setdefault(key.rsplit("/", 1)[1], []).append(env)

    @staticmethod
    def _as_environment(env: Any, position: int) -> Environment:
        if isinstance(env, Environment):
            return env
        if isinstance(env, str):
            from deepgym_ray.suites import load_environment  # the registry only when names are used

            return load_environment(env)
        raise TypeError(
            f"environments[{position}] must be an Environment, a name, or an "
            f"(environment, weight) pair, got {type(env).__name__}"
        )

    # -- what the mixture holds ------------------------------------------------------------

    @property
    def environments(self) -> list[Environment]:
        """The environments, in the order given."""
        return list(self._envs)

    @property
    def weights(self) -> list[float]:
        """The weights as given, aligned with :attr:`environments`."""
        return list(self._weights)

    @property
    def probabilities(self) -> list[float]:
        """The weights normalised to sum to 1."""
        total = sum(self._weights)
        return [w / total for w in self._weights]

    @property
    def name(self) -> str:
        """A readable name for logs: ``mixed(a,b,c)``."""
        return "mixed(" + ",".join(env.name for env in self._envs) + ")"

    def __len__(self) -> int:
        return len(self._envs)

    def __repr__(self) -> str:
        pairs = ", ".join(f"{e.name}={w:g}" for e, w in zip(self._envs, self._weights, strict=True))
        return f"MixedEnvironment({pairs})"

    def get(self, name: str) -> Environment:
        """The environment called ``name``; KeyError naming the ones there are otherwise."""
        try:
            return self._by_name[_norm(name)]
        except KeyError:
            raise KeyError(f"no environment {name!r} in {self.name}") from None

    # -- drawing tasks ---------------------------------------------------------------------

    def sample_batch(
        self, n: int, seed: int | None = None, *, conversational: bool = False
    ) -> list[dict[str, Any]]:
        """Draw ``n`` task rows, each environment with probability proportional to its weight.

        Each row is ``{"prompt", "task", "env_name"}``, ready for ``datasets.Dataset.from_list``;
        ``conversational=True`` makes the prompt a one-message chat. ``seed`` makes the draw
        repeatable.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"sample_batch: n must be an int >= 0, got {n!r}")
        rng = random.Random(seed)
        drawn = rng.choices(self._envs, weights=self._weights, k=n)
        rows = []
        for env in drawn:
            prompt: Any = env.task
            if conversational:
                prompt = [{"role": "user", "content": env.task}]
            rows.append({"prompt": prompt, "task": env.task, "env_name": env.name})
        return rows

    # -- routing ---------------------------------------------------------------------------

    def route(self, completions: Sequence[Any], **kwargs: Any) -> list[Environment]:
        """The environment for each completion, read from its row's metadata in ``kwargs``.

        ``kwargs`` are the dataset columns as a trainer passes them (lists aligned with
        ``completions``); other keyword arguments (callables, trainer state) are ignored.
        """
        n = len(completions)
        keys = (*NAME_FIELDS, *SUITE_FIELDS, *self.task_id_fields)
        columns: dict[str, Sequence[Any]] = {}
        for key in keys:
            column = kwargs.get(key)
            if column is None:
                continue
            if isinstance(column, (str, bytes)) or not isinstance(column, Sequence):
                raise ValueError(
                    f"routing column {key!r} must be a list with one value per completion, "
                    f"got {type(column).__name__}"
                )
            if len(column) != n:
                raise ValueError(
                    f"routing column {key!r} has {len(column)} values for {n} completions"
                )
            columns[key] = column
        return [
            self.route_row(i, {k: col[i] for k, col in columns.items()}) for i in range(n)
        ]

    def route_row(self, index: int, row: Mapping[str, Any]) -> Environment:
        """The environment for one row's metadata; ``index`` only serves the error message."""
        meta = {k: v for k, v in row.items() if _present(v)}
        for key in NAME_FIELDS:
            if key in meta:
                env = self._by_name.get(_norm(meta[key]))
                if env is None:
                    raise ValueError(
                        f"completion {index}: {key}={meta[key]!r} names no environment of "
                        f"{self.name} (its metadata: {meta})"
                    )
                return env
        candidates: list[Environment] | None = None
        suite: str | None = None
        for key in SUITE_FIELDS:
            if key in meta:
                value = _norm(meta[key])
                if value in self._by_name:
                    return self._by_name[value]
                if value in self._by_suite:
                    candidates, suite = self._by_suite[value], value
                    if len(candidates) == 1:
                        return candidates[0]
                    break
        for key in self.task_id_fields:
            if key in meta:
                found = self._match_task_id(_norm(meta[key]), suite, candidates)
                if len(found) == 1:
                    return found[0]
                if len(found) > 1:
                    names = sorted(e.name for e in found)
                    raise ValueError(
                        f"completion {index}: {key}={meta[key]!r} matches several environments "
                        f"{names}; add an env_name or benchmark column (its metadata: {meta})"
                    )
        if candidates:
            raise ValueError(
                f"completion {index}: suite {suite!r} holds {len(candidates)} environments and "
                f"no task field ({', '.join(self.task_id_fields)}) picks one (its metadata: {meta})"
            )
        looked_at = ", ".join((*NAME_FIELDS, *SUITE_FIELDS, *self.task_id_fields))
        raise ValueError(
            f"completion {index}: no environment of {self.name} matches its metadata {meta} "
            f"(routing reads: {looked_at})"
        )

    def _match_task_id(
        self, value: str, suite: str | None, candidates: list[Environment] | None
    ) -> list[Environment]:
        allowed = None if candidates is None else {id(e) for e in candidates}

        def keep(envs: Iterable[Environment]) -> list[Environment]:
            return [e for e in envs if allowed is None or id(e) in allowed]

        exact = keep([self._by_name[value]] if value in self._by_name else [])
        if exact:
            return exact
        if suite is not None and f"{suite}/{value}" in self._by_name:
            return keep([self._by_name[f"{suite}/{value}"]])
        return keep(self._by_last_part.get(value, []))
