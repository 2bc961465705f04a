"""``/v1/sessions``: agent episodes over HTTP, on the reward service's pool.

- ``POST /v1/sessions`` ``{"env_name": "fix_the_calculator"}`` opens an episode on a pool
  actor: ``{"session_id", "observation"}`` (``env_name`` may be left out on a service of one
  multi-turn environment);
- ``POST /v1/sessions/{id}/step`` ``{"action_type": "bash", "content": "ls"}`` (an
  :class:`~deepgym_ray.sessions.Action`): ``{"observation", "reward", "done"}``;
- ``POST /v1/sessions/{id}/score``: the episode's one result (``score``, ``has_verdict``,
  ``reward`` - null without a verdict -, ``error_type``, ``details``);
- ``DELETE /v1/sessions/{id}``: abandons it (no verdict); its result.

The service keeps nothing: a session's id names its actor, which holds the episode, so any
replica of the service can serve any call of it. A session whose actor is lost answers as the
contract says (done, no verdict); one its actor no longer holds (the actor restarted) is HTTP
410 with that result; an unknown one 404, an ended one 409 with its result.

Example:
    curl -X POST localhost:8000/v1/sessions -d '{"env_name": "sales_report"}'
"""

from __future__ import annotations

from typing import Any

from deepgym_ray.models import Environment, RunResult
from deepgym_ray.pool.session_host import SessionLostError
from deepgym_ray.sessions import Action, failure_result
from deepgym_ray.sessions.session import SessionEndedError, SessionStateError

__all__ = ["SessionRoutes"]

# Waits of one call beyond its own limit on the actor (its steps and verifier bound it there).
CALL_LIMIT = 3600.0


class SessionRoutes:
    """The ``/v1/sessions`` endpoints of one replica (see the module docstring); blocking,
    run on the replica's executor."""

    def __init__(self, client: Any, default_env: Any = None) -> None:
        self.client = client
        self.default_env = default_env if isinstance(default_env, Environment) \
            and default_env.multi_turn is not None else None

    def handle(self, method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        parts = path.strip("/").split("/")[2:]  # after v1/sessions
        try:
            if method == "POST" and not parts:
                return 200, self.create(body)
            if len(parts) == 2 and method == "POST" and parts[1] in ("step", "score"):
                if parts[1] == "step":
                    return 200, self.step(parts[0], body)
                return 200, _result(self._call(parts[0], "score"))
            if len(parts) == 1 and method == "DELETE":
                return 200, self.delete(parts[0])
        except SessionEndedError as exc:
            return 409, {"error": str(exc), "result": _result(exc.result)}
        except SessionStateError as exc:
            return 409, {"error": str(exc)}
        except SessionLostError as exc:  # its actor restarted: the episode is gone
            return 410, {"error": str(exc), "result": _result(failure_result(exc, path))}
        except KeyError as exc:
            return 404, {"error": str(exc.args[0])}
        except (ValueError, TypeError) as exc:
            return 400, {"error": str(exc)}
        return 404, {"error": f"no endpoint {method} {path}"}

    def create(self, body: Any) -> dict[str, Any]:
        env = self._environment(body)
        pool = self._pool()
        session = pool.session(env)
        observation = session.start()  # raises what failed: the service answers 500
        return {"session_id": f"{session.index}.{session.id}",
                "observation": observation.model_dump()}

    def step(self, session_id: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ValueError("the body must be an action object")
        action = Action.model_validate(body)
        try:
            observation, reward, done = self._call(session_id, "step", action)
        except (SessionStateError, SessionLostError, KeyError, ValueError):
            raise
        except Exception as exc:  # noqa: BLE001 - the actor or its node is lost
            result = failure_result(exc, session_id)
            return {"observation": {"content": f"[the episode ended: {result.details}]",
                                    "done": True, "metadata": {"error": result.error_type}},
                    "reward": None, "done": True, "result": _result(result)}
        return {"observation": observation.model_dump(), "reward": reward, "done": done}

    def delete(self, session_id: str) -> dict[str, Any]:
        result = self._call(session_id, "abandon", "deleted through the HTTP API")
        if result is None:
            raise KeyError(f"no session {session_id}")
        return _result(result)

    # --- inside ---------------------------------------------------------------------------

    def _environment(self, body: Any) -> Environment:
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        name = body.get("env_name")
        if name is None:
            if self.default_env is None:
                raise ValueError("'env_name' is required: this service has no multi-turn "
                                 "environment of its own")
            return self.default_env
        from deepgym_ray.suites import load_environment

        env = load_environment(str(name))
        if not isinstance(env, Environment) or env.multi_turn is None:
            raise ValueError(f"environment {name!r} is not multi-turn: score its answers "
                             "with /score")
        return env

    def _pool(self) -> Any:
        from deepgym_ray.pool import get_pool

        pool = get_pool(self.client)
        pool.use(self.client)
        return pool

    def _call(self, session_id: str, op: str, *args: Any) -> Any:
        index, _, sid = session_id.partition(".")
        pool = self._pool()
        if not index.isdigit() or int(index) >= len(pool.actors) or not sid:
            raise KeyError(f"no session {session_id}")
        ref = pool.actors[int(index)].session.remote(op, sid, *args)
        return pool._ray.get(ref, timeout=CALL_LIMIT)


def _result(result: RunResult | None) -> dict[str, Any]:
    if result is None:
        return {}
    return {"score": result.score, "passed": result.passed, "has_verdict": result.has_verdict,
            "reward": result.reward, "error_type": result.error_type,
            "details": result.details, "env_name": result.env_name}
