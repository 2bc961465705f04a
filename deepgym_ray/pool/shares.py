"""Each actor's share of one map call's ``max_parallel``: its slots, its load, its lease.

A ready actor holds a lease on a share of the call's ``max_parallel`` (its *slots*: runs of
this call at once there) and is sent up to as much again to queue, so a slot is refilled the
moment a run ends there, not a driver round trip later (the actor side is
:mod:`deepgym_ray.pool.slots`). The shares add up to ``max_parallel`` at most. A failed actor's
slots go to the others, with a new lease key (by epoch) for it; they never shrink on a live one.

Example:
    >>> ready = {0, 1}  # the call's live actors (see liveness)
    >>> shares = Shares(2, max_parallel=8, ready=ready)
    >>> shares.grant(); shares.slots
    [4, 4]
    >>> shares.room(0), shares.chunk_limit(0)
    (8, 2)
    >>> ready.discard(1); shares.revoke(1); shares.grant(); shares.slots  # actor 1 failed
    [8, 0]
"""

from __future__ import annotations

import uuid

__all__ = ["MAX_CHUNK", "WHOLE_SHARE", "Shares"]

# Answers per actor call at most: bigger delays the chunk's first results; smaller costs more
# calls. With a no-op provider, 2 actors x 256 slots: chunks of 128 cost the driver 21-28 us
# and the actors 112-131 us per completion, chunks of 64: 29-35 and 136-150 us, chunks of 256
# (2 in flight per actor) dispatched slower again (bench/pool_dispatch.py).
MAX_CHUNK = 128
# A chunk returns when its slowest run ends (a straggler holds the chunk's other slots), yet
# every chunk costs a round trip and a driver turn (~1-3 ms on 2 busy cores). Below this share
# of max_parallel per actor, each actor's share is split in two chunks to soften stragglers;
# from it on, one chunk per share: 4 actors x 50 at 100 ms per run measured 0.83 of the ideal
# rate with chunks of 50 against 0.80 with chunks of 25 (bench/pool_latency.py).
WHOLE_SHARE = 32


class Shares:
    """The shares of ``n`` actors in one call; ``ready`` is the live set the call keeps (read,
    never changed here)."""

    def __init__(self, n: int, max_parallel: int, ready: set[int],
                 chunk_size: int | None = None) -> None:
        self.key = uuid.uuid4().hex  # this call's leases, on every actor
        self.slots = [0] * n
        self.load = [0] * n  # runs sent to each actor and not back yet
        self.epoch = [0] * n
        self.unassigned = max_parallel
        self.ready = ready
        self.chunk_size = chunk_size

    def grant(self) -> None:
        """Hand the slots nobody holds to the ready actors, evenly."""
        if not self.unassigned or not self.ready:
            return
        ready = sorted(self.ready)
        for _ in range(self.unassigned):
            self.slots[min(ready, key=self.slots.__getitem__)] += 1
        self.unassigned = 0

    def room(self, actor: int) -> int:
        """How many more runs ``actor`` takes: its slots running and as many queued."""
        return 2 * self.slots[actor] - self.load[actor]

    def free(self) -> int:
        """How many more runs the ready actors take together."""
        return sum(max(0, self.room(i)) for i in self.ready)

    def chunk_limit(self, actor: int) -> int:
        if self.chunk_size:
            return self.chunk_size
        share = self.slots[actor]
        return max(1, min(MAX_CHUNK, share if share >= WHOLE_SHARE else share // 2))

    def pick(self, avoid: set[int] | None) -> int | None:
        """The ready actor with the most room, one not in ``avoid`` if there is one."""
        open_ = [i for i in self.ready if self.room(i) > 0]
        candidates = [i for i in open_ if not avoid or i not in avoid] or open_
        return max(candidates, key=self.room) if candidates else None

    def lease(self, actor: int) -> list:
        """What a chunk sent to ``actor`` carries: its lease's key and its slots."""
        return [f"{self.key}/{self.epoch[actor]}", self.slots[actor]]

    def revoke(self, actor: int) -> None:
        """``actor`` failed: its runs died with it, and its slots go to the others."""
        if self.slots[actor]:
            self.unassigned += self.slots[actor]
            self.slots[actor] = 0
            self.epoch[actor] += 1
