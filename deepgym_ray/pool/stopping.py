"""Stopping verifier actors so that nothing they made outlives them.

``ray.kill`` alone ends an actor's process with no chance to close its provider: a Docker
actor's warm containers, a Daytona actor's sandboxes would stay behind (the containers until
the next provider on the host sweeps them, the sandboxes until their auto-delete). So each live
actor is first asked to close (:meth:`~deepgym_ray.pool.actor.VerifierActor.close`: its runs
stopped, its provider closed, every sandbox deleted), and killed only once it answered or the
bound passed. An actor that is not alive (dead, restarting, not started yet) is killed at once:
it has no provider to close, and what a dead process left is the sweep's.

Example:
    problems = stop_actors(ray, handles, names)   # [] when every sandbox was deleted
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["CLOSE_TIMEOUT", "stop_actors"]

logger = logging.getLogger(__name__)

# Seconds an actor gets to close: its runs stopped (at most a minute, see actor.py), then its
# sandboxes deleted, each call bounded by the provider; a Daytona creation in flight may take
# its whole create timeout first (six minutes in all by default).
CLOSE_TIMEOUT = 600.0


def _alive(handle: Any) -> bool:
    """Whether the actor runs now, as the GCS actor table says (a private but long-standing
    API, as in ``admin``); True when that cannot be read, so it is asked (bounded)."""
    try:
        from ray._private.state import actors

        return actors(handle._actor_id.hex()).get("State") == "ALIVE"
    except Exception as exc:  # noqa: BLE001
        logger.debug("actor state of %s: %s", handle, exc)
        return True


UNAVAILABLE = "unavailable while closing (ActorUnavailableError)"


def _answer(ray: Any, ref: Any, timeout: float | None = None) -> str | None:
    """What an actor's ``close`` left (None: nothing), or why it could not say."""
    try:
        return ray.get(ref, timeout=timeout)
    except ray.exceptions.ActorUnavailableError:
        return UNAVAILABLE
    except ray.exceptions.GetTimeoutError:
        return "did not close in time"
    except ray.exceptions.RayActorError as exc:  # it died meanwhile: left to the sweep
        return f"died while closing ({type(exc).__name__})"
    except Exception as exc:  # noqa: BLE001 - an actor of an older version, say
        return f"{type(exc).__name__}: {exc}"


def stop_actors(ray: Any, handles: Sequence[Any], names: Sequence[str],
                timeout: float = CLOSE_TIMEOUT) -> list[str]:
    """Ask every live actor of ``handles`` (named ``names``) to close, wait for them (at
    most ``timeout`` seconds in all), then kill them all. Returns one line per actor that
    could not delete everything it made, naming it and what is left."""
    deadline = time.monotonic() + timeout
    asked = {handle.close.remote(): (handle, name)
             for handle, name in zip(handles, names, strict=True) if _alive(handle)}
    ready, late = ray.wait(list(asked), num_returns=len(asked), timeout=timeout) \
        if asked else ([], [])
    problems = [f"{asked[ref][1]}: did not close within {timeout:.0f}s" for ref in late]
    for ref in ready:
        handle, name = asked[ref]
        left = _answer(ray, ref)
        while left == UNAVAILABLE and time.monotonic() < deadline:
            # Restarting (Ray brings a killed actor back): ask the new process in turn.
            time.sleep(1.0)
            left = _answer(ray, handle.close.remote(), deadline - time.monotonic())
        if left:
            problems.append(f"{name}: {left}")
    for handle in handles:
        try:
            ray.kill(handle, no_restart=True)
        except Exception as exc:  # noqa: BLE001 - already gone
            logger.debug("kill %s: %s", handle, exc)
    return problems
