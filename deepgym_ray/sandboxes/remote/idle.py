"""The sandboxes a remote provider keeps for its next runs, by kind (image, resources).

Not thread-safe: the provider holds its lock around every call.

Example:
    >>> idle = IdleSandboxes()
    >>> idle.pop(("python:3.11", None), fresh_for=60.0)
    (None, [])
"""

from __future__ import annotations

import time

from deepgym_ray.sandboxes.remote.handles import Remote

__all__ = ["IdleSandboxes"]


class IdleSandboxes:
    """Idle sandboxes per kind, the most recently used first out."""

    def __init__(self) -> None:
        self._by_key: dict[tuple, list[Remote]] = {}

    def put(self, remote: Remote) -> None:
        remote.last_used = time.monotonic()
        self._by_key.setdefault(remote.key, []).append(remote)

    def pop(self, key: tuple, fresh_for: float) -> tuple[Remote | None, list[Remote]]:
        """One of kind ``key`` idle for less than ``fresh_for`` seconds, if any, and those
        found idle for longer on the way (taken out too: the caller deletes them)."""
        idle, stale = self._by_key.get(key, []), []
        while idle:
            remote = idle.pop()
            if time.monotonic() - remote.last_used < fresh_for:
                return remote, stale
            stale.append(remote)
        return None, stale

    def pop_oldest(self) -> Remote | None:
        """The one idle the longest, of any kind (to free the quota it holds)."""
        every = [r for remotes in self._by_key.values() for r in remotes]
        oldest = min(every, key=lambda r: r.last_used, default=None)
        if oldest is not None:
            self._by_key[oldest.key].remove(oldest)
        return oldest

    def clear(self) -> None:
        self._by_key.clear()
