"""An agent's episode in one sandbox: :class:`Session` (and :class:`AsyncSession`, its twin).

``start()`` makes the sandbox, writes the environment's files into the agent's work directory,
runs its ``setup.sh`` and gives the first observation; ``step(action)`` carries out one action
as the agent's unprivileged user, offline, under the sandbox's limits (the processes it starts
end with it) and gives ``(observation, reward, done)``; ``score()`` has the verifier judge the
work directory once, after the last step; ``close()`` tears the sandbox down; ``abandon(reason)``
ends an episode without a verdict. A failure after the agent acted is judged by the contract's
one rule (:func:`~deepgym_ray.sessions.rules.failure_result`); a failure before it leaves no
verdict. Every episode gets exactly one result.

Example:
    session = Session(provider, load_environment("fix_the_calculator"))
    first = session.start()
    observation, reward, done = session.step(Action(action_type="bash", content="ls"))
    session.step(Action(action_type="done"))
    session.score().score    # 0.0: nothing was fixed
    session.close()
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from deepgym_ray import contract
from deepgym_ray.exceptions import (
    DeepGymError,
    ProviderUnavailableError,
    RunCancelledError,
    SandboxError,
    error_type_for,
)
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.sandboxes.base import CancelSignal, Sandbox, SandboxProvider
from deepgym_ray.sessions.rules import agent_exhausted, failure_result, record_episode
from deepgym_ray.sessions.shapes import Action, Observation, Trajectory, TrajectoryStep
from deepgym_ray.sessions.steps import (
    MISSING_TOOLS,
    StepRefused,
    action_request,
    files_request,
    observation_text,
    run_request,
)
from deepgym_ray.sessions.verdict import judge_work_dir, session_files

__all__ = ["AsyncSession", "Session", "SessionEndedError", "SessionStateError", "run_episode"]

logger = logging.getLogger(__name__)

SETUP_TIMEOUT = 300.0


def check_keeps_work(name: str, keeps_work: bool) -> None:
    """ProviderUnavailableError unless the provider ``name`` keeps a sandbox's work from one
    run to the next (``SandboxProvider.keeps_work``), as an episode's steps need."""
    if not keeps_work:
        raise ProviderUnavailableError(
            f"the {name!r} sandbox provider does not run agent episodes: each of its runs "
            "starts on a fresh work directory, so the agent's work would not last from one "
            "step to the next; use mode 'local' or 'docker'")


class SessionStateError(DeepGymError, RuntimeError):
    """A session used out of order: a step before ``start()`` or after the episode ended."""


class SessionEndedError(SessionStateError):
    """A call on an episode that has ended (scored, abandoned, reaped); ``result`` is its one
    result."""

    def __init__(self, message: str, result: RunResult | None = None) -> None:
        super().__init__(message)
        self.result = result

    def __reduce__(self):  # Ray pickles it from the actor to the driver: keep the result
        return type(self), (str(self), self.result)


class Session:
    """One agent episode of a multi-turn ``env`` in a sandbox of ``provider`` (see the module
    docstring). Safe to abandon or close from another thread while a step runs."""

    def __init__(self, provider: SandboxProvider, env: Environment) -> None:
        if env.multi_turn is None:
            raise ValueError(f"environment {env.name!r} is not multi-turn (its metadata.json "
                             "needs \"type\": \"multi-turn\"); score its answers with run()")
        check_keeps_work(provider.name, provider.keeps_work)
        self.provider, self.env, self.task = provider, env, env.multi_turn
        self.trajectory = Trajectory(env_name=env.name)
        self.result: RunResult | None = None
        self.sandbox: Sandbox | None = None
        self.done = False
        self._cancel = CancelSignal()
        self._lock = threading.Lock()  # one step, score or teardown at a time
        self._started = self._agent_seconds = 0.0
        self._acted = False
        self._counted = False
        self._abandoned = "abandoned by its caller"

    @property
    def id(self) -> str | None:
        """The sandbox's id, once started."""
        return self.sandbox.id if self.sandbox is not None else None

    @property
    def steps(self) -> int:
        return len(self.trajectory.steps)

    # --- the episode ---------------------------------------------------------------------

    def start(self) -> Observation:
        """Make the sandbox and the agent's work directory; the first observation (the
        task). Raises what failed (no verdict: the agent has not acted)."""
        with self._lock:
            if self.sandbox is not None or self.result is not None:
                raise SessionStateError("the session was started already")
            self._started = time.monotonic()
            try:
                self.sandbox = self.provider.create(self.env)
                self.provider.put_files(self.sandbox, session_files(self.env))
                request = files_request(self.task.files, self.task.setup, SETUP_TIMEOUT,
                                        self.task.tools)
                reply = self._run(request, SETUP_TIMEOUT)
                _check_setup(reply, self.env.name)
            except BaseException as exc:
                self._end_without_verdict(exc)
                raise
            first = Observation(content=self._first_text(), step=0,
                                metadata={"files": sorted(self.task.files),
                                          "max_steps": self.task.max_steps,
                                          "allowed_actions": list(self.task.allowed_actions),
                                          "tools": list(self.task.tools)})
            self.trajectory.start = first
            return first

    def step(self, action: Action | Mapping[str, Any]) -> tuple[Observation, float | None, bool]:
        """Carry out ``action``; ``(observation, reward, done)``. An action the environment
        does not allow, or cannot run as given, is an error the agent reads (the episode goes
        on); a command past the step's time limit returns its output so far and a note."""
        if not isinstance(action, Action):
            action = Action.model_validate(action)
        with self._lock:
            if self.sandbox is None and self.result is None:
                raise SessionStateError("call start() before step()")
            if self.done or self.result is not None:
                raise SessionEndedError("the episode is over: call score() for its result",
                                        self.result)
            number = self.steps + 1
            observation, reward = self._carry_out(action, number)
            if not self.done and number >= self.task.max_steps:
                self.done = True
                observation = observation.model_copy(update={
                    "done": True, "content": observation.content + "\n[the episode's last step: "
                    f"{self.task.max_steps} steps were allowed]"})
            self.trajectory.steps.append(TrajectoryStep(action=action, observation=observation,
                                                        reward=reward))
            return observation, reward, observation.done

    def _carry_out(self, action: Action, number: int) -> tuple[Observation, float | None]:
        if action.action_type == "done":
            self.done = True
            return Observation(content="[the agent is done; the work directory is judged by "
                               "score()]", step=number, done=True), None
        if not self.task.allows(action.action_type):
            allowed = ", ".join(self.task.allowed_actions)
            return Observation(content=f"error: {action.action_type} actions are not allowed "
                               f"here (allowed: {allowed})", step=number,
                               metadata={"error": "action_not_allowed"}), None
        timeout = self.task.timeout_per_step
        try:
            request = action_request(action, timeout)
        except StepRefused as exc:
            return Observation(content=f"error: {exc}", step=number,
                               metadata={"error": "action_refused"}), None
        self._acted = True
        try:
            reply = self._run(request, timeout)
            if self._cancel.is_set():  # abandoned while it ran: what it returned is moot
                raise RunCancelledError("the session was abandoned during the step")
            if not reply.get("ok", False):
                raise _StepFailed(f"the step could not run: {reply.get('error')}")
        except BaseException as exc:
            result = self._fail(exc)
            self._finish()  # the episode is over: its sandbox goes now
            return Observation(content=f"[the episode ended: {result.details}]", step=number,
                               done=True, metadata={"error": result.error_type}), None
        # The agent's own time: how long its commands ran, not what our side took around them.
        self._agent_seconds += float(reply.get("duration") or 0.0)
        reward = self._step_reward() if self.task.step_verifier is not None else None
        meta = {"exit_code": reply.get("exit_code"), "timed_out": bool(reply.get("timed_out")),
                "duration": reply.get("duration")}
        return Observation(content=observation_text(reply, timeout), step=number,
                           metadata=meta), reward

    def _step_reward(self) -> float | None:
        """The step verifier's score of the work directory now (None without a verdict)."""
        try:
            result = judge_work_dir(self.provider, self.sandbox, self.env, step=True,
                                    cancel=self._cancel)
        except Exception as exc:  # noqa: BLE001 - a step without a reward, not an ended episode
            logger.info("%s: the step verifier judged nothing (%s)", self.env.name, exc)
            return None
        return result.reward

    def score(self) -> RunResult:
        """The episode's result: the verifier's judgement of the work directory (once; later
        calls give the same result). Ends the episode and tears the sandbox down."""
        with self._lock:
            if self.result is None:
                if self.sandbox is None:
                    raise SessionStateError("call start() before score()")
                self.done = True
                try:
                    self.result = judge_work_dir(self.provider, self.sandbox, self.env,
                                                 acted=self._acted, cancel=self._cancel)
                except BaseException as exc:
                    if not self._acted:  # nothing of the agent's to judge: not its 0
                        self._end_without_verdict(exc)
                        if not isinstance(exc, Exception):
                            raise
                    else:
                        self._fail(exc)
                self.result.duration = time.monotonic() - self._started
            self._finish()
            self.trajectory.result = self.result
            return self.result

    def abandon(self, reason: str = "abandoned by its caller") -> RunResult:
        """End the episode without a verdict (a step under way is stopped at once on a
        provider that can cancel); the result, unless one was settled before."""
        self._abandoned = reason
        self._cancel.set()
        with self._lock:
            if self.result is None:
                self.result = self._abandoned_result()
            self.done = True
            self._finish()
            self.trajectory.result = self.result
            return self.result

    def close(self) -> None:
        """Tear the sandbox down (an episode never scored ends without a verdict)."""
        if self.result is None:
            self.abandon("closed before it was scored")
            return
        with self._lock:
            self._finish()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- inside ---------------------------------------------------------------------------

    def _run(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        return run_request(self.provider, self.sandbox, request, timeout=timeout,
                           cancel=self._cancel, env=self.env.env_vars or None)

    def _first_text(self) -> str:
        files = "\n".join(f"  {name}" for name in sorted(self.task.files)) or "  (none)"
        actions = ", ".join(self.task.allowed_actions)
        tools = f"\nPrograms you can run: {', '.join(self.task.tools)}." if self.task.tools \
            else ""
        return (f"{self.env.task.strip()}\n\nFiles in your work directory:\n{files}\n\n"
                f"Actions: {actions} (at most {self.task.max_steps} steps, "
                f"{self.task.timeout_per_step:g}s each).{tools}")

    def _fail(self, exc: BaseException) -> RunResult:
        """The contract's result for ``exc`` after the agent acted; the episode is over. A
        step stopped because the session was abandoned has no verdict, whatever it raised."""
        if self._cancel.is_set():
            self.result = self._abandoned_result()
        else:
            session_seconds = time.monotonic() - self._started
            result = failure_result(exc, self.id, exhausted=agent_exhausted(
                self._agent_seconds, session_seconds))
            self.result = result.model_copy(update={"env_name": self.env.name})
        self.done = True
        return self.result

    def _abandoned_result(self) -> RunResult:
        return RunResult(error_type=contract.SESSION_ABANDONED, env_name=self.env.name,
                         details=f"the session was abandoned: {self._abandoned}",
                         sandbox_id=self.id)

    def _end_without_verdict(self, exc: BaseException) -> None:
        self.result = RunResult(error_type=error_type_for(exc), env_name=self.env.name,
                                details=f"{type(exc).__name__}: {exc}"[:2000],
                                sandbox_id=self.id)
        self.done = True
        self._finish()

    def _finish(self) -> None:
        """Count the episode's result (once) and destroy the sandbox (once); a failed
        teardown is logged, the result stands."""
        if self.result is not None and not self._counted:
            self._counted = True
            record_episode(self.result)
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is None:
            return
        try:
            self.provider.destroy(sandbox)
        except Exception as exc:  # noqa: BLE001 - the result is settled; say what leaked
            logger.warning("%s: tearing down sandbox %s failed: %s", self.env.name, sandbox.id,
                           exc)


class _StepFailed(DeepGymError):
    """The step program reported that it could not carry out the step."""


def _check_setup(reply: Mapping[str, Any], name: str) -> None:
    if not reply.get("ok", False):
        raise SandboxError(f"environment {name!r}: the agent's work directory could not be "
                           f"made: {reply.get('error')}")
    if "exit_code" in reply and (reply.get("timed_out") or reply.get("exit_code") != 0):
        first = (reply.get("stderr") or "").partition("\n")[0]
        if first.startswith(MISSING_TOOLS):
            raise SandboxError(f"environment {name!r} needs programs its sandbox does not have "
                               f"on the agent's PATH:{first[len(MISSING_TOOLS):]}")
        output = (reply.get("stdout", "") + reply.get("stderr", ""))[-1500:]
        raise SandboxError(f"environment {name!r}: setup.sh failed (exit code "
                           f"{reply.get('exit_code')}, timed out: {bool(reply.get('timed_out'))})"
                           f": {output}")


class AsyncSession:
    """:class:`Session` for asyncio code: the same methods, awaited (each runs on a worker
    thread, so the event loop never waits on a sandbox)."""

    def __init__(self, provider: SandboxProvider, env: Environment) -> None:
        self.session = Session(provider, env)

    @property
    def trajectory(self) -> Trajectory:
        return self.session.trajectory

    async def start(self) -> Observation:
        return await asyncio.to_thread(self.session.start)

    async def step(self, action: Action | Mapping[str, Any]
                   ) -> tuple[Observation, float | None, bool]:
        return await asyncio.to_thread(self.session.step, action)

    async def score(self) -> RunResult:
        return await asyncio.to_thread(self.session.score)

    async def abandon(self, reason: str = "abandoned by its caller") -> RunResult:
        return await asyncio.to_thread(self.session.abandon, reason)

    async def close(self) -> None:
        await asyncio.to_thread(self.session.close)

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def run_episode(session: Session, agent: Callable[[Observation], Action | Mapping[str, Any]]
                ) -> RunResult:
    """Run ``agent`` (observation -> action) through ``session`` to the end; its result.

    The episode ends when the agent says ``done``, at the environment's ``max_steps``, or on
    a failure. An exception raised by ``agent`` abandons the episode (no verdict) and is
    raised again: it is the caller's code that failed, not the answer.
    """
    observation = session.start()
    try:
        while not observation.done:
            observation, _reward, _done = session.step(agent(observation))
    except BaseException as exc:
        session.abandon(f"the agent raised {type(exc).__name__}: {exc}"[:500])
        raise
    try:
        return session.score()
    finally:
        session.close()
