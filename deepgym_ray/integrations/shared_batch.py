"""One scoring of a batch, shared by sibling reward functions.

One reward function per reward component (``component="correctness"``, ``component="style"``)
means TRL calls several functions on the same completions each step. Functions built on the same
client and environment share a :class:`SharedBatch`, so the sandboxes run once per batch: the
first function to see a batch scores it, its siblings take the same results.

The rules that keep it safe: a batch is recognised by a digest of its completions and of the
environment each one routes to, never by object identity (a caller reusing a list sees fresh
results); each function takes a shared batch at most once (the same function called again on
the same batch scores it again, as TRL's next step must); a sibling whose shared scoring
failed scores the batch itself. A synchronous function only takes a scoring that has finished
(TRL runs its synchronous reward functions one after another); an async one may await one in
flight, so async siblings gathered by TRL also share.

Example:
    >>> shared = SharedBatch()
    >>> future, owner = shared.claim(user=1, key="k")
    >>> owner
    True
    >>> future.set_result(["r"])
    >>> sibling, owner = shared.claim(user=2, key="k")
    >>> sibling.result(), owner
    (['r'], False)
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

__all__ = ["SharedBatch", "batch_key", "shared_batch_for"]


class SharedBatch:
    """The most recent batch scored by a group of sibling reward functions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: str | None = None
        self._future: Future | None = None
        self._users: set[int] = set()

    def claim(self, user: int, key: str) -> tuple[Future, bool]:
        """``(future, owner)``: the owner scores and settles ``future``; others wait on it."""
        with self._lock:
            if self._future is not None and self._key == key and user not in self._users:
                self._users.add(user)
                return self._future, False
            future: Future = Future()
            self._key, self._future, self._users = key, future, {user}
            return future, True


# Groups live as long as a reward function holds them; the key's ids cannot be reused while
# that function also holds the client and the environment.
_GROUPS: weakref.WeakValueDictionary[tuple[int, int], SharedBatch] = (
    weakref.WeakValueDictionary()
)
_GROUPS_LOCK = threading.Lock()


def shared_batch_for(client: Any, env: Any) -> SharedBatch:
    """The SharedBatch of every reward function built on this client and environment."""
    with _GROUPS_LOCK:
        key = (id(client), id(env))
        group = _GROUPS.get(key)
        if group is None:
            group = _GROUPS[key] = SharedBatch()
        return group


def batch_key(completions: Sequence[Any], env_names: Sequence[str]) -> str:
    """A digest of what a batch's scoring depends on: the completions and their environments."""
    payload = json.dumps([list(completions), list(env_names)], sort_keys=True, default=repr)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()
