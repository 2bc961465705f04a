"""Which of a pool's actors are up, for one map call: pings in flight and revivals due.

An actor is *ready* once it answered a ping (or the pool saw it answer lately). One that fails
is pinged again; a ping that finds it gone for good (killed without restart) asks the pool for
a new actor after ``REVIVE_DELAY``; one that is restarting, or whose node is going away, is
asked again after the same delay. The map call waits on the pings with its own chunks.

It knows the pool only as an :class:`ActorRoster` (the few calls below), so data walks one way:
the pool's map call holds a liveness, never the other way round.

Example:
    live = ActorLiveness(pool)
    live.start()              # ready: the actors that answered
    live.down(2)              # actor 2 failed a chunk: ping it again
    live.answered(ref)        # a ping came back (ref was in live.pings)
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

import ray
from ray.exceptions import ActorDiedError

from deepgym_ray.exceptions import describe_error

__all__ = ["ActorLiveness", "ActorRoster"]

logger = logging.getLogger(__name__)

FIRST_PING_WAIT = 0.5  # seconds the first wave waits for slow actors at most
REVIVE_DELAY = 1.0  # seconds before asking again for an actor that is gone for good


class ActorRoster(Protocol):
    """What a map call needs of its pool (a :class:`~deepgym_ray.pool.VerifierPool` is one)."""

    name: str
    actors: list[Any]

    def actor_name(self, index: int) -> str:
        """Actor ``index``'s name, for messages."""

    def known_ready(self) -> set[int]:
        """The actors that answered lately."""

    def mark_ready(self, index: int, ready: bool) -> None:
        """Record that actor ``index`` answered (or failed)."""

    def revive(self, index: int, stale: Any) -> Any:
        """A handle on a new actor ``index`` in place of ``stale``, gone for good."""


class ActorLiveness:
    """The pool's actors as one map call sees them (``actors[i]`` is replaced on revival)."""

    def __init__(self, pool: ActorRoster) -> None:
        self.pool = pool
        self.actors: list[Any] = list(pool.actors)
        self.ready: set[int] = set()
        self.pings: dict[ray.ObjectRef, int] = {}
        # actor -> (when, make a new actor first?): a ping to send later
        self.later: dict[int, tuple[float, bool]] = {}

    def start(self) -> None:
        """Actors that answered the pool before count as ready at once: a round trip per call
        (tens of ms on a busy machine) is a tenth of a latency-bound batch. One that died
        meanwhile fails its first chunk, which is retried elsewhere like any other lost chunk.
        The others are pinged, and given a moment so the first wave spreads over them all."""
        n = len(self.actors)
        self.ready.update(i for i in self.pool.known_ready() if i < n)
        for i in range(n):
            if i not in self.ready:
                self.ping(i)
        if self.pings:
            answered, _ = ray.wait(list(self.pings), num_returns=len(self.pings),
                                   timeout=0 if self.ready else FIRST_PING_WAIT)
            for ref in answered:
                self.answered(ref)

    def ping(self, actor: int) -> None:
        if actor in self.pings.values() or actor in self.later:
            return
        self.pings[self.actors[actor].ping.remote()] = actor

    def down(self, actor: int) -> None:
        """``actor`` failed: not ready until a ping says otherwise."""
        self.ready.discard(actor)
        self.pool.mark_ready(actor, False)
        self.ping(actor)

    def answered(self, ref: ray.ObjectRef) -> None:
        """A ping (a ref in :attr:`pings`) came back, with an answer or an error."""
        actor = self.pings.pop(ref)
        try:
            ray.get(ref)
        except ActorDiedError:  # gone for good (killed without restart): make a new one
            self.later[actor] = (time.monotonic() + REVIVE_DELAY, True)
            return
        except Exception as exc:  # restarting, or its node is going away: ask again later
            logger.debug("actor %d not ready yet: %s", actor, describe_error(exc))
            self.later[actor] = (time.monotonic() + REVIVE_DELAY, False)
            return
        self.ready.add(actor)
        self.pool.mark_ready(actor, True)

    def deadlines(self) -> list[float]:
        """When the next pings are due (monotonic seconds)."""
        return [when for when, _ in self.later.values()]

    def revive_due(self) -> None:
        """Send the pings that are due, making a new actor first where one is gone for good."""
        now = time.monotonic()
        for actor, (when, revive) in list(self.later.items()):
            if when > now:
                continue
            del self.later[actor]
            if revive:
                try:
                    self.actors[actor] = self.pool.revive(actor, self.actors[actor])
                except Exception as exc:  # Ray could not make it now: try again later
                    logger.warning("could not restart verifier actor %s: %s",
                                   self.pool.actor_name(actor), describe_error(exc))
                    self.later[actor] = (now + REVIVE_DELAY, True)
                    continue
            self.ping(actor)
