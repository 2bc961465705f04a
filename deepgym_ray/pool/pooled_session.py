"""An agent episode on the pool: the driver's handle on a session one actor holds.

:meth:`VerifierPool.session` picks the actor (the one of the ready ones this process has
given the fewest open sessions, so sessions spread over the cluster's nodes) and every call of
the episode goes to it: its steps reach its sandbox. The actor may hold thousands of sessions;
a session holds a thread there only while a call runs.

A lost actor or node ends the episode by the contract's rule
(:func:`~deepgym_ray.sessions.failure_result`: a dead actor is ours, so no verdict), never by
hanging the caller: every call waits at most its own limit (the step's time, the setup's, the
verifier's) and a little more, and an episode whose call ran out is abandoned on its actor.

Example:
    session = get_pool(client).session(env)
    session.start()
    session.step(Action(action_type="bash", content="pytest -q"))
    session.score()
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from deepgym_ray import contract
from deepgym_ray.exceptions import error_type_for
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.pool.session_host import SESSION_IDLE_TIMEOUT
from deepgym_ray.sessions import (
    Action,
    Observation,
    SessionStateError,
    Trajectory,
    TrajectoryStep,
    failure_result,
)
from deepgym_ray.sessions.rules import record_episode
from deepgym_ray.sessions.session import SETUP_TIMEOUT, SessionEndedError
from deepgym_ray.sessions.steps import STEP_GRACE

__all__ = ["PooledSession"]

logger = logging.getLogger(__name__)

# Beyond a call's own limit: Ray's round trip and a queue behind the actor's other calls.
CALL_GRACE = 60.0
# Actors tried to open one session on, when one is lost or restarting.
START_TRIES = 3


class PooledSession:
    """A :class:`~deepgym_ray.sessions.Session` held by one pool actor (see the module
    docstring); the same methods and the same shapes."""

    def __init__(self, pool: Any, index: int, env: Environment,
                 idle_timeout: float = SESSION_IDLE_TIMEOUT) -> None:
        if env.multi_turn is None:
            raise ValueError(f"environment {env.name!r} is not multi-turn (its metadata.json "
                             "needs \"type\": \"multi-turn\"); score its answers with run()")
        self.pool, self.index, self.env, self.task = pool, index, env, env.multi_turn
        self.actor = pool.actors[index]
        self.id = f"{pool.name}-{uuid.uuid4().hex}"
        self.idle_timeout = idle_timeout
        self.trajectory = Trajectory(env_name=env.name)
        self.result: RunResult | None = None
        self.done = False
        self._started = False
        self._lock = threading.Lock()

    @property
    def steps(self) -> int:
        return len(self.trajectory.steps)

    def start(self) -> Observation:
        """Open the episode on its actor; the first observation. Raises what failed (no
        verdict: the agent has not acted)."""
        with self._lock:
            if self._started:
                raise SessionStateError("the session was started already")
            self._started = True
            for attempt in range(1, START_TRIES + 1):
                try:
                    first = self._call("open", self.env, self.idle_timeout,
                                       limit=SETUP_TIMEOUT + STEP_GRACE)
                    break
                except Exception as exc:
                    if attempt < START_TRIES and _actor_lost(exc):
                        # Nothing of the agent's ran: open it on another actor.
                        logger.info("session %s: actor %d could not open it (%s); trying "
                                    "another", self.id, self.index, type(exc).__name__)
                        self.pool.session_ended(self.index)
                        self.index = self.pool.session_actor(avoid=self.index)
                        self.actor = self.pool.actors[self.index]
                        continue
                    self._settle(RunResult(error_type=error_type_for(exc),
                                           env_name=self.env.name,
                                           details=f"{type(exc).__name__}: {exc}"[:2000]))
                    raise
            self.trajectory.start = first
            return first

    def step(self, action: Action | Mapping[str, Any]) -> tuple[Observation, float | None, bool]:
        """Carry out ``action`` in the episode's sandbox (see ``Session.step``)."""
        if not isinstance(action, Action):
            action = Action.model_validate(action)
        with self._lock:
            if not self._started:
                raise SessionStateError("call start() before step()")
            if self.done or self.result is not None:
                raise SessionStateError("the episode is over: call score() for its result")
            limit = self.task.timeout_per_step + STEP_GRACE
            if self.task.step_verifier is not None:
                limit += 4 * self.env.timeout
            try:
                observation, reward, done = self._call("step", action, limit=limit)
            except SessionEndedError as exc:  # reaped meanwhile: its result is settled
                self._settle(exc.result)
                observation, reward, done = self._ended_observation(), None, True
            except Exception as exc:  # the actor, its node or the call is lost
                self._lost(exc)
                observation, reward, done = self._ended_observation(), None, True
            self.done = done
            self.trajectory.steps.append(TrajectoryStep(action=action, observation=observation,
                                                        reward=reward))
            return observation, reward, done

    def score(self) -> RunResult:
        """The episode's one result (see ``Session.score``)."""
        with self._lock:
            if self.result is None:
                if not self._started:
                    raise SessionStateError("call start() before score()")
                try:
                    self._settle(self._call("score", limit=4 * self.env.timeout + STEP_GRACE))
                except Exception as exc:  # noqa: BLE001 - its actor, node or call is lost
                    self._lost(exc)
            self.trajectory.result = self.result
            return self.result

    def abandon(self, reason: str = "abandoned by its caller") -> RunResult:
        """End the episode without a verdict, at once (see ``Session.abandon``): a step under
        way on another thread is stopped on the actor and returns the ended observation."""
        kept = None
        if self._started and self.result is None:  # told at once, not after a running step
            try:
                kept = self._call("abandon", reason, limit=CALL_GRACE)
            except Exception as exc:  # noqa: BLE001 - gone with its actor: no verdict
                logger.info("session %s: abandoning it on its actor failed: %s", self.id, exc)
        with self._lock:
            if self.result is None:
                self._settle(kept or RunResult(error_type=contract.SESSION_ABANDONED,
                                               env_name=self.env.name,
                                               details=f"the session was abandoned: {reason}"))
            self.done = True
            self.trajectory.result = self.result
            return self.result

    def close(self) -> None:
        """End the episode (one never scored ends without a verdict)."""
        if self.result is None:
            self.abandon("closed before it was scored")

    def __enter__(self) -> PooledSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- inside ---------------------------------------------------------------------------

    def _call(self, op: str, *args: Any, limit: float) -> Any:
        ray = self.pool._ray
        ref = self.actor.session.remote(op, self.id, *args)
        return ray.get(ref, timeout=limit + CALL_GRACE)

    def _ended_observation(self) -> Observation:
        return Observation(content=f"[the episode ended: {self.result.details}]",
                           step=self.steps + 1, done=True,
                           metadata={"error": self.result.error_type})

    def _settle(self, result: RunResult | None) -> None:
        self.result = record_episode(result or RunResult(
            error_type=contract.SESSION_ABANDONED, env_name=self.env.name,
            details="the episode ended"))
        self.done = True
        self.pool.session_ended(self.index)

    def _lost(self, exc: BaseException) -> RunResult:
        """The contract's result of an episode whose call failed on the way (a dead actor, a
        lost node, a call past its limit): no verdict for what is ours. The actor is told to
        drop the episode, without waiting for it."""
        logger.warning("session %s on actor %s: %s", self.id, self.index,
                       f"{type(exc).__name__}: {exc}"[:300])
        try:
            self.actor.session.remote("abandon", self.id, "its caller lost it")
        except Exception:  # noqa: BLE001 - the actor is gone: nothing to tell
            pass
        self._settle(failure_result(exc, self.id).model_copy(update={"env_name": self.env.name}))
        return self.result


def _actor_lost(exc: BaseException) -> bool:
    """A dead, restarting or unreachable actor (not a failure of the session's own)."""
    import ray.exceptions as errors

    return isinstance(exc, (errors.RayActorError, errors.ActorUnavailableError,
                            errors.NodeDiedError)) and not isinstance(exc, errors.RayTaskError)


def pick_actor(open_counts: dict[int, int], ready: set[int], size: int) -> int:
    """The actor for a new session: of the ready ones (all, if none answered yet), the one
    with the fewest open sessions from this process, the lowest index on a tie."""
    candidates = sorted(ready) or list(range(size))
    return min(candidates, key=lambda i: (open_counts.get(i, 0), i))
