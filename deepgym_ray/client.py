"""DeepGym: score model outputs against environments, one at a time or in batches.

``run`` raises when nothing was judged (SandboxError, TimeoutError, VerifierError); ``run_safe``,
``run_batch`` and ``eval`` turn every raise into a result without a verdict, so one bad run
never sinks a batch. The code is taken out of each completion here, once, on the driver; a
:class:`~deepgym_ray.scoring.Scorer` (the sandbox settings, small and picklable) scores it, on
the shared Ray pool's actors or on this process's threads (``backend``). The default,
``backend="auto"``, is the CLI's rule: the pool when this process is already on Ray or a
cluster is running (``RAY_ADDRESS``, ``ray start``), otherwise threads, since a Ray instance
started for one machine adds seconds of start-up and no cores; which one is logged at INFO.

Example:
    from deepgym_ray import DeepGym, load_environment
    dg = DeepGym(mode="local")
    env = load_environment("coin_change")
    dg.run(env, "```python\\n" + env.reference_solution + "```").score    # 1.0
    dg.run_batch(env, outputs).pass_rate      # on the Ray pool when a cluster is running
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from deepgym_ray.completions import check_completion, check_completions, completion_to_code
from deepgym_ray.config import DeepGymConfig, check_max_parallel
from deepgym_ray.exceptions import error_type_for
from deepgym_ray.models import BatchResult, Environment, EvalResult, RunResult
from deepgym_ray.sandboxes.base import SandboxProvider
from deepgym_ray.scoring import ProviderSpec, Scorer, map_threads

if TYPE_CHECKING:
    from deepgym_ray.pool.pooled_session import PooledSession
    from deepgym_ray.sessions import Action, AsyncSession, Observation, Session

__all__ = ["DeepGym", "config_client", "default_client"]

logger = logging.getLogger(__name__)

OnResult = Callable[[int, RunResult], object]


class DeepGym:
    """A scoring client. ``mode`` picks the sandbox provider (see ``make_provider``);
    ``config`` (a DeepGymConfig) overrides ``mode``, ``backend`` and ``max_parallel``;
    ``provider`` is a ready provider or a zero-argument factory of one; extra keyword
    arguments are the provider's options. ``check`` runs the provider's ``preflight`` (a
    remote provider's SDK and credentials) now, so a wrong key fails here, in one line."""

    def __init__(self, mode: str = "auto", *, config: DeepGymConfig | None = None,
                 provider: ProviderSpec = None, backend: str = "auto",
                 max_parallel: int | None = None, check: bool = True,
                 **provider_options: Any) -> None:
        if config is None:
            config = DeepGymConfig(
                mode=mode, backend=backend, provider_options=provider_options,
                **({} if max_parallel is None else {"max_parallel": max_parallel}))
        elif not isinstance(config, DeepGymConfig):
            raise TypeError(f"config must be a DeepGymConfig, got {type(config).__name__}")
        elif provider_options or max_parallel is not None:
            data = config.model_dump()
            if provider_options:
                data["provider_options"] = {**config.provider_options, **provider_options}
            if max_parallel is not None:
                data["max_parallel"] = max_parallel
            config = DeepGymConfig(**data)  # validated like any other settings
        self.config = config
        self.scorer = Scorer(config.mode, config.provider_options, provider)
        self._on_pool = False  # scored on the Ray pool: close() releases it
        self._backend: str | None = None  # "auto" resolved on the first batch
        if provider is None and check:
            # A mode that cannot run here fails now, once, not on every run of a batch.
            from deepgym_ray.sandboxes import check_mode

            check_mode(config.mode, **config.provider_options)

    @property
    def backend(self) -> str:
        """``"ray"`` or ``"threads"``: the configured backend, ``"auto"`` resolved once (the
        pool when this process is on Ray or a cluster is running, else threads)."""
        if self._backend is None:
            backend = self.config.backend
            if backend == "auto":
                from deepgym_ray.pool.connect import auto_backend

                backend = auto_backend()
                logger.info("backend auto: %s", "the Ray pool (a Ray cluster is running)"
                            if backend == "ray" else "this process's threads (no Ray cluster "
                            "is running; backend='ray' starts a local one)")
            self._backend = backend
        return self._backend

    def __repr__(self) -> str:
        return f"DeepGym(mode={self.config.mode!r}, backend={self.config.backend!r})"

    @property
    def provider(self) -> SandboxProvider:
        """The sandbox provider, built on first use."""
        return self.scorer.provider

    def close(self) -> None:
        """Release the provider (it is rebuilt if the client is used again) and the Ray pool.

        Returns once every sandbox the client's scoring made is deleted, or raises SandboxError
        naming those that could not be. On the Ray pool: the last client of this process to
        close stops a pool on the embedded Ray this process started (each actor deletes its
        sandboxes before it is killed); a pool on a cluster that outlives this process is
        detached, shared by every driver, and left running (see ``VerifierPool``)."""
        try:
            if self._on_pool:
                from deepgym_ray.pool.verifier_pool import release_pools

                self._on_pool = False
                release_pools(self)
        finally:
            self.scorer.close()

    # --- scoring ----------------------------------------------------------------------------

    @staticmethod
    def _environment(env: Environment | str) -> Environment:
        if isinstance(env, Environment):
            return env
        if isinstance(env, str):
            from deepgym_ray.suites import load_environment

            return load_environment(env)
        raise TypeError(f"env must be an Environment or its name, got {type(env).__name__}")

    def run(self, env: Environment | str, model_output: Any) -> RunResult:
        """Score one model output (a completion string, a conversation, or plain code).

        Raises SandboxError, TimeoutError or VerifierError when nothing was judged.
        """
        env = self._environment(env)
        check_completion(model_output, "model_output")
        return self.scorer.run(env, completion_to_code(model_output,
                                                       languages=env.answer_languages))

    def session(self, env: Environment | str) -> Session | PooledSession:
        """An agent's episode of the multi-turn ``env`` (call ``start()`` first): on the
        Ray pool (the ``backend``), held by one actor from start to end
        (:class:`~deepgym_ray.pool.pooled_session.PooledSession`), else in a sandbox of this
        process's provider (:class:`~deepgym_ray.sessions.Session`); the same methods."""
        env = self._environment(env)
        self._check_sessions()
        if self.backend == "ray":
            from deepgym_ray.pool import get_pool

            pool = get_pool(self)
            pool.use(self)
            self._on_pool = True
            return pool.session(env)
        from deepgym_ray.sessions import Session

        return Session(self.scorer.provider, env)

    def _check_sessions(self) -> None:
        """A ProviderUnavailableError now, where the mode's provider cannot hold an episode
        (a provider given as an object is asked where it is built)."""
        if not self.scorer.provider_given:
            from deepgym_ray.sandboxes import provider_class, resolve_mode
            from deepgym_ray.sessions.session import check_keeps_work

            mode = resolve_mode(self.config.mode)
            check_keeps_work(mode, provider_class(mode).keeps_work)

    def async_session(self, env: Environment | str) -> AsyncSession:
        """:meth:`session` for asyncio code (:class:`~deepgym_ray.sessions.AsyncSession`)."""
        from deepgym_ray.sessions import AsyncSession

        return AsyncSession(self.scorer.provider, self._environment(env))

    def run_episode(self, env: Environment | str,
                    agent: Callable[[Observation], Action | dict[str, Any]]) -> RunResult:
        """Run ``agent``, a plain function from observation to action, through an episode of
        the multi-turn ``env`` to its end; the episode's result (see
        :func:`~deepgym_ray.sessions.run_episode`)."""
        from deepgym_ray.sessions import run_episode

        return run_episode(self.session(env), agent)

    def run_safe(self, env: Environment | str, code_or_output: Any) -> RunResult:
        """Like :meth:`run`, but a raise becomes a result without a verdict."""
        started = time.monotonic()
        name = env.name if isinstance(env, Environment) else str(env)
        try:
            return self.run(env, code_or_output)
        except Exception as exc:  # every failure must become a result
            logger.debug("run on %s raised %r", name, exc)
            return RunResult(error_type=error_type_for(exc), details=f"{type(exc).__name__}: "
                             f"{exc}", env_name=name, duration=time.monotonic() - started,
                             sandbox_id=getattr(exc, "sandbox_id", None))

    def run_batch(self, env: Environment | str, outputs: Sequence[Any],
                  max_parallel: int | None = None) -> BatchResult:
        """Score many outputs against one environment; results in input order, never raises
        for a single run's failure."""
        started = time.monotonic()
        env = self._environment(env)
        outputs = check_completions(outputs, "outputs")
        results = self.score_outputs([env] * len(outputs), outputs, max_parallel)
        return BatchResult(results=results, duration=time.monotonic() - started)

    def eval(self, envs: Sequence[Environment | str], outputs: Sequence[Any] | None = None,
             max_parallel: int | None = None) -> EvalResult:
        """Score ``outputs[i]`` against ``envs[i]`` (default: each env's reference solution)."""
        started = time.monotonic()
        if isinstance(envs, (str, Environment)):
            raise TypeError(f"envs must be a list of environments (one per output), got one "
                            f"{type(envs).__name__}; use run_batch for many outputs of one")
        envs = [self._environment(e) for e in envs]
        if outputs is None:  # reference solutions are code already: sent as they are
            results = self.score_code(envs, [e.reference_solution or "" for e in envs],
                                      max_parallel)
        else:
            outputs = check_completions(outputs, "outputs")
            if len(outputs) != len(envs):
                raise ValueError(f"got {len(outputs)} outputs for {len(envs)} environments")
            results = self.score_outputs(envs, outputs, max_parallel)
        return EvalResult(results=results, env_names=[e.name for e in envs],
                          duration=time.monotonic() - started)

    def score_outputs(self, envs: Sequence[Environment], outputs: Sequence[Any],
                      max_parallel: int | None = None, *,
                      on_result: OnResult | None = None) -> list[RunResult]:
        """Take the code out of each output (once, here) and score it: one result per output,
        in order. An output whose code cannot be taken (a conversation with no answer) gets a
        result without a verdict that says why; the others are scored as usual."""
        codes: list[str] = []
        sent: list[int] = []
        unsent: dict[int, RunResult] = {}
        for index, output in enumerate(outputs):
            try:
                codes.append(completion_to_code(output, index,
                                                languages=envs[index].answer_languages))
                sent.append(index)
            except ValueError as exc:
                unsent[index] = RunResult(error_type=error_type_for(exc), env_name=envs[index].name,
                                          details=f"no code to run: {exc}")
        if not unsent:
            return self.score_code(envs, codes, max_parallel, on_result=on_result)
        for index, result in unsent.items():
            if on_result is not None:
                on_result(index, result)
        scored = self.score_code(
            [envs[i] for i in sent], codes, max_parallel,
            on_result=None if on_result is None else lambda i, r: on_result(sent[i], r))
        results = dict(unsent)
        results.update(zip(sent, scored, strict=True))
        return [results[i] for i in range(len(outputs))]

    def score_code(self, envs: Sequence[Environment], codes: Sequence[str],
                   max_parallel: int | None = None, *, on_result: OnResult | None = None,
                   chunk_size: int | None = None) -> list[RunResult]:
        """Score ``codes[i]`` (code, sent as it is) against ``envs[i]`` on the client's backend:
        the shared Ray pool, or this process's threads. ``on_result(index, result)`` hears of
        each result as soon as it is known; the list comes back in input order."""
        limit = check_max_parallel(self.config.max_parallel if max_parallel is None
                                   else max_parallel)
        if self.backend == "threads":
            return map_threads(self.scorer, envs, codes, limit, on_result)
        from deepgym_ray.pool import get_pool

        pool = get_pool(self)  # its scorer, its pool settings, its usual map width
        pool.use(self)
        self._on_pool = True
        return list(pool.map(list(envs), list(codes), limit, on_result=on_result,
                             chunk_size=chunk_size, code=True))


# Names a DeepGymConfig YAML for the default client.
CONFIG_VARIABLE = "DEEPGYM_CONFIG"
_DEFAULT_CLIENTS: dict[str, DeepGym] = {}
_DEFAULT_LOCK = threading.Lock()


def config_client(path: str) -> DeepGym:
    """The client of the DeepGymConfig YAML at ``path`` (or a shipped config's name), one per
    process and path: for settings that arrive as a file's name."""
    key = f"config:{path}"
    with _DEFAULT_LOCK:
        client = _DEFAULT_CLIENTS.get(key)
        if client is None:
            client = _DEFAULT_CLIENTS[key] = DeepGym(config=DeepGymConfig.from_yaml(path))
        return client


def default_client() -> DeepGym:
    """The client used when none is given (reward functions, integrations): the DeepGymConfig
    YAML that ``DEEPGYM_CONFIG`` names, when set, else ``mode='auto'`` on the Ray pool; one per
    process and setting.

    ``DEEPGYM_CONFIG`` is for harnesses that load a reward by its dotted name and pass it no
    settings (Axolotl, lm-eval's task files): set it in the trainer's environment.
    Auto picks Daytona when ``DAYTONA_API_KEY`` is set and its SDK is installed, else local
    sandboxes, with one warning when the key is set but the SDK is missing. The choice is made
    here, on the driver, and the actors get the concrete mode (deciding in every actor would
    warn once per actor). Reward functions built without a client share it, so sibling
    functions (one per reward component) share each batch's scoring.
    """
    import os

    path = os.environ.get(CONFIG_VARIABLE) or None
    if path is not None:
        return config_client(path)
    from deepgym_ray.sandboxes import resolve_mode

    mode = resolve_mode("auto")
    with _DEFAULT_LOCK:
        client = _DEFAULT_CLIENTS.get(mode)
        if client is None:
            client = _DEFAULT_CLIENTS[mode] = DeepGym(mode=mode, backend="ray")
        return client
