"""``/v1/sessions``: agent episodes over HTTP, on the reward service's pool.

- ``POST /v1/sessions`` ``{"env_name": "fix_the_calculator"}`` opens an episode on a pool
  actor: ``{"session_id", "observation"}`` (``env_name`` may be left out on a service of one
  multi-turn environment). ``env_name`` names a built-in environment, a suite member or one of
  the service's own; never a folder of the server's by its path;
- ``POST /v1/sessions/{id}/step`` ``{"action_type": "bash", "content": "ls"}`` (an
  :class:`~deepgym_ray.sessions.Action`): ``{"observation", "reward", "done"}``;
- ``POST /v1/sessions/{id}/score``: the episode's one result (``score``, ``has_verdict``,
  ``reward`` - null without a verdict -, ``error_type``, ``details``);
- ``DELETE /v1/sessions/{id}``: abandons it (no verdict), a step under way included; its result.

The service keeps nothing: a session's id names its actor, which holds the episode, so any
replica of the service can serve any call of it. A session whose actor is lost answers as the
contract says (done, no verdict); one its actor no longer holds (the actor restarted) is HTTP
410 with that result; an unknown one 404, an ended one 409 with its result; one that cannot
start (ours: the agent has not acted) 503 with its no-verdict result. An episode takes
one step or score at a time: another sent to the same replica while one runs is HTTP 409 at
once (send the next once the last has answered), so no client can hold the actor's threads.
Errors name what was wrong in one line; no traceback leaves the service.

Example:
    curl -X POST localhost:8000/v1/sessions -d '{"env_name": "sales_report"}'
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from deepgym_ray.exceptions import describe_error
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.pool.session_host import SessionLostError
from deepgym_ray.sessions import Action, failure_result
from deepgym_ray.sessions.session import SessionEndedError, SessionStateError

__all__ = ["SessionRoutes"]

logger = logging.getLogger(__name__)

# Waits of one call beyond its own limit on the actor (its steps and verifier bound it there).
CALL_LIMIT = 3600.0
# How long an episode whose call failed on the way is given to be abandoned on its actor.
ABANDON_WAIT = 60.0


class SessionBusyError(SessionStateError):
    """A step or score sent while another of the same episode runs (HTTP 409)."""


class SessionNotOpened(RuntimeError):
    """An episode whose start failed (ours: HTTP 503), with its result."""

    def __init__(self, message: str, result: RunResult | None) -> None:
        super().__init__(message)
        self.result = result


class SessionRoutes:
    """The ``/v1/sessions`` endpoints of one replica (see the module docstring), on its event
    loop: a call to an actor is awaited, not waited for in a thread, so episodes' long steps
    hold none of the replica's threads. ``served``: the service's environment (or mixture)."""

    def __init__(self, client: Any, served: Any = None) -> None:
        self.client = client
        members = [served] if isinstance(served, Environment) \
            else list(getattr(served, "environments", None) or [])
        self.own = {env.name: env for env in members if env.multi_turn is not None}
        self.default_env = served if isinstance(served, Environment) \
            and served.multi_turn is not None else None
        self._running: set[tuple[int, str]] = set()  # (actor, session) with a call under way

    async def handle(self, method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        """``(HTTP status, JSON answer)`` of one request."""
        parts = path.strip("/").split("/")[2:]  # after v1/sessions
        try:
            if method == "POST" and not parts:
                loop = asyncio.get_running_loop()
                return 200, await loop.run_in_executor(None, self.create, body)
            if len(parts) == 2 and method == "POST" and parts[1] in ("step", "score"):
                return 200, await self._one_at_a_time(parts[0], parts[1], body)
            if len(parts) == 1 and method == "DELETE":
                return 200, await self.delete(parts[0])
        except SessionEndedError as exc:
            return 409, {"error": _message(exc), "result": _result(exc.result)}
        except SessionStateError as exc:
            return 409, {"error": _message(exc)}
        except SessionLostError as exc:  # its actor restarted: the episode is gone
            return 410, {"error": _message(exc),
                         "result": _result(failure_result(_cause(exc), path))}
        except SessionNotOpened as exc:
            return 503, {"error": str(exc), "result": _result(exc.result)}
        except KeyError as exc:
            return 404, {"error": _message(exc)}
        except (ValueError, TypeError) as exc:  # a pydantic ValidationError is a ValueError
            return 400, {"error": _message(exc)}
        except Exception as exc:  # noqa: BLE001 - ours: said in one line, logged in full
            logger.exception("%s %s failed", method, path)
            return 500, {"error": f"the service failed: {describe_error(_cause(exc))}"}
        return 404, {"error": f"no endpoint {method} {path}"}

    def create(self, body: Any) -> dict[str, Any]:
        """Open an episode (blocking: run on the replica's executor)."""
        env = self._environment(body)
        session = self._pool().session(env)
        try:
            observation = session.start()
        except Exception as exc:  # nothing of the agent's ran: no verdict, and not the client's
            raise SessionNotOpened(f"the episode could not start: {describe_error(_cause(exc))}",
                                   session.result) from exc
        return {"session_id": f"{session.index}.{session.id}",
                "observation": observation.model_dump()}

    async def step(self, session_id: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ValueError("the body must be an action object")
        action = Action.model_validate(body)
        try:
            observation, reward, done = await self._call(session_id, "step", action)
        except (SessionStateError, SessionLostError, KeyError, ValueError, TypeError):
            raise
        except Exception as exc:  # noqa: BLE001 - the actor, its node or the call is lost
            result = await self._ended_by(session_id, exc)
            return {"observation": {"content": f"[the episode ended: {result.details}]",
                                    "done": True, "metadata": {"error": result.error_type}},
                    "reward": None, "done": True, "result": _result(result)}
        return {"observation": observation.model_dump(), "reward": reward, "done": done}

    async def score(self, session_id: str) -> dict[str, Any]:
        try:
            return _result(await self._call(session_id, "score"))
        except (SessionStateError, SessionLostError, KeyError, ValueError, TypeError):
            raise
        except Exception as exc:  # noqa: BLE001 - the actor, its node or the call is lost
            return _result(await self._ended_by(session_id, exc))

    async def delete(self, session_id: str) -> dict[str, Any]:
        result = await self._call(session_id, "abandon", "deleted through the HTTP API")
        if result is None:
            raise KeyError(f"no session {session_id}")
        return _result(result)

    # --- inside ---------------------------------------------------------------------------

    async def _one_at_a_time(self, session_id: str, op: str, body: Any) -> dict[str, Any]:
        """A step or score, refused while another of the same episode runs here: queued, a
        flood of them would hold every thread its actor has for episodes, and every other
        client's episode on that actor would wait behind it."""
        key = _address(session_id)
        if key in self._running:
            raise SessionBusyError(f"session {session_id} has a call under way: send the next "
                                   "once it has answered")
        self._running.add(key)
        try:
            return await (self.step(session_id, body) if op == "step" else self.score(session_id))
        finally:
            self._running.discard(key)

    def _environment(self, body: Any) -> Environment:
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        extra = sorted(set(body) - {"env_name"})
        if extra:
            raise ValueError(f"unknown field(s) {extra}: a session takes 'env_name' only")
        name = body.get("env_name")
        if name is None:
            if self.default_env is None:
                raise ValueError("'env_name' is required: this service has no multi-turn "
                                 "environment of its own")
            return self.default_env
        if not isinstance(name, str):
            raise ValueError(f"'env_name' must be a string, got {type(name).__name__}")
        env = self.own.get(name) or _named_environment(name)
        if not isinstance(env, Environment) or env.multi_turn is None:
            raise ValueError(f"environment {name!r} is not multi-turn: score its answers "
                             "with /score")
        return env

    def _pool(self) -> Any:
        from deepgym_ray.pool import get_pool

        pool = get_pool(self.client)
        pool.use(self.client)
        return pool

    async def _call(self, session_id: str, op: str, *args: Any) -> Any:
        index, sid = _address(session_id)
        pool = await asyncio.get_running_loop().run_in_executor(None, self._pool)
        if index >= len(pool.actors):
            raise KeyError(f"no session {session_id}")
        ref = pool.actors[index].session.remote(op, sid, *args)
        return await asyncio.wait_for(asyncio.wrap_future(ref.future()), CALL_LIMIT)

    async def _ended_by(self, session_id: str, exc: BaseException) -> RunResult:
        """The one result of an episode whose call failed on the way (a lost actor or node, a
        call past its limit): the actor is told to abandon it, and its answer is the result;
        where the actor cannot answer, the contract's (no verdict for what is ours)."""
        logger.warning("session %s: %s", session_id, describe_error(_cause(exc)))
        try:
            kept = await asyncio.wait_for(self._call(session_id, "abandon",
                                                     "its call failed on the way"), ABANDON_WAIT)
        except Exception:  # noqa: BLE001 - gone with its actor: the contract's result
            kept = None
        return kept or failure_result(_cause(exc), session_id)


def _address(session_id: str) -> tuple[int, str]:
    """``(actor index, session id on the actor)`` of an id ``index.session``; KeyError for one
    that cannot be an id (an index of other than ASCII digits, no session part)."""
    index, _, sid = session_id.partition(".")
    if not (index.isascii() and index.isdigit()) or not sid:
        raise KeyError(f"no session {session_id}")
    return int(index), sid


def _named_environment(name: str) -> Any:
    """The environment a client names: a built-in one or a suite member, loaded by name. A
    path (or a name the server would read as a folder) is refused: the client would choose
    which of the server's folders is loaded, verifier and all."""
    from deepgym_ray.envs.registry import builtin_names, multi_turn_names
    from deepgym_ray.suites import list_suites, load_environment

    suite = name.partition("/")[0].lower()
    if name in multi_turn_names() or name in builtin_names() or suite in list_suites():
        try:
            return load_environment(name)
        except (LookupError, OSError) as exc:  # a member the suite does not have, its files
            raise ValueError(f"cannot load environment {name!r}: {exc}") from None
    raise ValueError(f"unknown environment {name!r}: a session names a built-in environment, "
                     "a suite member or one this service serves (deepgym-ray envs lists them), "
                     "never a folder")


def _cause(exc: BaseException) -> BaseException:
    """What failed on the actor, for an exception Ray raised on its behalf (whose text is the
    actor's traceback); else ``exc``."""
    from ray.exceptions import RayTaskError

    cause = getattr(exc, "cause", None) if isinstance(exc, RayTaskError) else None
    return cause if isinstance(cause, BaseException) else exc


def _message(exc: BaseException) -> str:
    cause = _cause(exc)
    if isinstance(cause, KeyError):  # str() of a KeyError is its key's repr
        return str(cause.args[0]) if cause.args else "not found"
    return str(cause)


def _result(result: RunResult | None) -> dict[str, Any]:
    if result is None:
        return {}
    return {"score": result.score, "passed": result.passed, "has_verdict": result.has_verdict,
            "reward": result.reward, "error_type": result.error_type,
            "details": result.details, "env_name": result.env_name}
