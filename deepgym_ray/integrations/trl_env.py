"""Agent episodes in TRL's ``GRPOTrainer(environment_factory=...)``.

:func:`make_trl_environment` returns the class TRL wants: TRL makes instances with no argument
and reuses them across batches; for each rollout it calls ``reset(**row)`` with the dataset
row, offers the instance's public methods as tools (their type hints and docstrings are the tool
schema), and calls ``get_reward()`` once the rollout is over.

- ``reset`` ends the instance's previous episode (no verdict if it was never scored), routes
  the row to its environment (one environment, or a :class:`~deepgym_ray.reward.MixedEnvironment`
  by the row's ``env_name`` and the other fields it reads) and opens a session: on the Ray pool
  when the client's backend is Ray (every trainer rank shares the pool's actors), else in this
  process. It returns the task and the agent's files, which TRL appends to the prompt.
- The tools (``run_bash``, ``run_python``, ``write_file``) are the session's actions; what they
  return is what the agent sees (an action the environment does not allow comes back as an
  error, and the episode goes on).
- ``get_reward`` scores the episode: the verifier's score, or ``None`` without a verdict (TRL
  then leaves the rollout out of its group's baseline: see ``integrations.trl_mask``).

The class pickles (by its settings, for TRL's async trainer and for Ray), and so do its
instances (an instance's open episode is not carried over: it starts clean).

Example:
    Environment = make_trl_environment(load_environment("fix_the_calculator"))
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=rows,
                          environment_factory=Environment)
"""

from __future__ import annotations

import copyreg
import logging
import threading
from typing import Any

from deepgym_ray.config import DeepGymConfig
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.reward.mixed import MixedEnvironment
from deepgym_ray.sessions import Action

__all__ = ["DeepGymToolEnvironment", "make_trl_environment"]

logger = logging.getLogger(__name__)


class _Settings(type):
    """The metaclass of the classes :func:`make_trl_environment` makes: they pickle as the
    call that made them."""


def _remake(environments: list[Environment], config: DeepGymConfig) -> type:
    return make_trl_environment(MixedEnvironment(environments) if len(environments) > 1
                                else environments[0], config=config)


copyreg.pickle(_Settings, lambda cls: (_remake, (cls._environments, cls._config)))


class DeepGymToolEnvironment(metaclass=_Settings):
    """One rollout's episode at a time (see the module docstring); made by TRL, reused."""

    _environments: list[Environment] = []
    _config: DeepGymConfig = DeepGymConfig()
    _mixed: MixedEnvironment | None = None
    _clients: dict[str, Any] = {}
    _clients_lock = threading.Lock()

    def __init__(self) -> None:
        self._session: Any = None
        self._result: RunResult | None = None

    def __reduce__(self):
        return type(self), ()

    # --- TRL's protocol ---------------------------------------------------------------------

    def reset(self, **row: Any) -> str | None:
        """Start this rollout's episode (the previous one ends); the task, for the prompt."""
        self._release("the trainer started a new rollout")
        env = self._route(row)
        self._session = self._client().session(env)
        try:
            first = self._session.start()
        except Exception as exc:  # noqa: BLE001 - the rollout gets no verdict, training goes on
            logger.warning("%s: the episode could not start: %s", env.name, exc)
            self._result = self._session.result
            return f"[the environment could not start: {type(exc).__name__}; do nothing]"
        return first.content

    def get_reward(self) -> float | None:
        """The episode's score; None when it has no verdict."""
        if self._result is None and self._session is not None:
            self._result = self._session.score()
        return None if self._result is None else self._result.reward

    # --- the tools ----------------------------------------------------------------------------

    def run_bash(self, command: str) -> str:
        """Run a bash command in your work directory and return its output and exit code.

        Args:
            command: The command line to run, as you would type it in a shell.
        """
        return self._act(Action(action_type="bash", content=command))

    def run_python(self, code: str) -> str:
        """Run Python code in your work directory and return what it printed and its exit code.

        Args:
            code: The Python source to run.
        """
        return self._act(Action(action_type="code", content=code))

    def write_file(self, path: str, content: str) -> str:
        """Write a text file in your work directory, replacing any file of that name.

        Args:
            path: The file's path, relative to your work directory.
            content: The whole new content of the file.
        """
        try:
            action = Action(action_type="write_file", path=path, content=content)
        except ValueError as exc:
            return f"error: {exc.errors()[0]['msg'] if hasattr(exc, 'errors') else exc}"
        return self._act(action)

    # --- inside -------------------------------------------------------------------------------

    def _act(self, action: Action) -> str:
        session = self._session
        if session is None:
            return "error: no episode is open"
        if session.done or session.result is not None:
            return "error: the episode is over"
        observation, _reward, _done = session.step(action)
        return observation.content

    def _route(self, row: dict[str, Any]) -> Environment:
        if self._mixed is None:
            return self._environments[0]
        return self._mixed.route_row(0, row)

    def _release(self, reason: str) -> None:
        session, self._session, self._result = self._session, None, None
        if session is not None and session.result is None:
            session.abandon(reason)

    @classmethod
    def _client(cls) -> Any:
        """One client per process and settings (its provider, or its share of the pool)."""
        from deepgym_ray.client import DeepGym

        key = cls._config.model_dump_json()
        with cls._clients_lock:
            client = DeepGymToolEnvironment._clients.get(key)
            if client is None:
                client = DeepGymToolEnvironment._clients[key] = DeepGym(config=cls._config)
        return client


_MADE: dict[tuple[str, ...], type] = {}
_MADE_LOCK = threading.Lock()


def make_trl_environment(env_or_mixed: Environment | MixedEnvironment | str, *,
                         config: DeepGymConfig | None = None) -> type[DeepGymToolEnvironment]:
    """The class for ``GRPOTrainer(environment_factory=...)`` for the multi-turn ``env``, or a
    :class:`~deepgym_ray.reward.MixedEnvironment` of them (each row routed by its metadata);
    ``config``: where the episodes run (default: local sandbox, the pool when on Ray)."""
    if isinstance(env_or_mixed, str):
        from deepgym_ray.suites import load_environment

        env_or_mixed = load_environment(env_or_mixed)
    mixed = env_or_mixed if isinstance(env_or_mixed, MixedEnvironment) else None
    envs = list(mixed.environments) if mixed is not None else [env_or_mixed]
    for env in envs:
        if not isinstance(env, Environment) or env.multi_turn is None:
            name = getattr(env, "name", env)
            raise ValueError(f"environment {name!r} is not multi-turn: environment_factory "
                             "runs agent episodes (use make_trl_reward_fn for single answers)")
    config = config or DeepGymConfig(mode="local")
    key = (config.model_dump_json(), *(env.model_dump_json() for env in envs))
    with _MADE_LOCK:
        made = _MADE.get(key)
        if made is None:
            name = "DeepGym_" + "_".join(env.name.replace("/", "_") for env in envs[:3])
            made = _MADE[key] = _Settings(name, (DeepGymToolEnvironment,), {
                "_environments": envs, "_config": config, "_mixed": mixed,
                "__doc__": DeepGymToolEnvironment.__doc__})
    return made
