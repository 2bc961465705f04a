"""A map call's environments: each answer paired with one, each one shipped to Ray once.

:func:`pairs` matches the caller's answers to environments (one Environment for all, or one
per answer, with a clear error when the counts differ). :class:`EnvTable` gives each distinct
Environment a small slot number and puts it in the object store once, so a chunk sends
references, not copies: a verifier read from a file on the driver travels as its source,
since other nodes cannot read the driver's files.

Example:
    >>> env = Environment(name="e", verifier_code="return 1.0")
    >>> [(e.name, item) for e, item in pairs(env, ["a", "b"])]
    [('e', 'a'), ('e', 'b')]
    >>> table = EnvTable()
    >>> table.slot(env, 0), table.slot(env, 1)
    (0, 0)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

import ray

from deepgym_ray.models import Environment

__all__ = ["EnvTable", "pairs"]


class EnvTable:
    """Each distinct Environment of a map call, put in the object store once."""

    def __init__(self) -> None:
        self._slots: dict[int, int] = {}
        # (content key, [object ref], the caller's env: kept so its id() stays unique)
        self.entries: list[tuple[str, list[ray.ObjectRef], Environment]] = []

    def slot(self, env: Any, index: int) -> int:
        slot = self._slots.get(id(env))
        if slot is not None:
            return slot
        if not isinstance(env, Environment):
            raise TypeError(
                f"input {index}: the environment must be an Environment, got {type(env).__name__}"
            )
        wire = env
        if env.verifier_path is not None:  # other nodes cannot read the driver's files
            wire = env.model_copy(
                update={"verifier_code": env.verifier_source(), "verifier_path": None}
            )
        key = hashlib.sha256(wire.model_dump_json().encode()).hexdigest()
        slot = len(self.entries)
        self.entries.append((key, [ray.put(wire)], env))
        self._slots[id(env)] = slot
        return slot

    def name(self, slot: int) -> str:
        return self.entries[slot][2].name


def pairs(envs: Any, items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
    """Yield ``(environment, answer)``: one Environment for all, or one per answer."""
    if isinstance(envs, Environment):
        for item in items:
            yield envs, item
        return
    env_iter, item_iter = iter(envs), iter(items)
    index = 0
    for item in item_iter:
        try:
            env = next(env_iter)
        except StopIteration:
            raise ValueError(f"more answers than environments: none for input {index}") from None
        yield env, item
        index += 1
    if next(env_iter, _END) is not _END:
        raise ValueError(f"more environments than answers ({index} answers)")


_END = object()
