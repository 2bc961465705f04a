"""DeepGym: score model outputs against environments, one at a time or in batches.

``run`` raises when nothing was judged (SandboxError, TimeoutError, VerifierError); ``run_safe``,
``run_batch`` and ``eval`` turn every raise into a result without a verdict, so one bad run
never sinks a batch. The client holds only its config and (if given) a provider or provider
factory; the provider itself is built lazily on first use, so a client pickles (cloudpickle)
cheaply into Ray actors.

Example:
    >>> from deepgym_ray import DeepGym, load_environment           # doctest: +SKIP
    >>> dg = DeepGym(mode="local")                                   # doctest: +SKIP
    >>> dg.run(load_environment("coin_change"), "```python\\n...```").score  # doctest: +SKIP
    1.0
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from deepgym_ray.completions import check_completion, check_completions, completion_to_code
from deepgym_ray.config import DeepGymConfig, check_max_parallel
from deepgym_ray.exceptions import error_type_for
from deepgym_ray.models import BatchResult, Environment, EvalResult, RunResult
from deepgym_ray.sandboxes.base import SandboxProvider

__all__ = ["DeepGym"]

logger = logging.getLogger(__name__)

ProviderSpec = SandboxProvider | Callable[[], SandboxProvider] | None


class DeepGym:
    """A scoring client. ``mode`` picks the sandbox provider (see ``make_provider``);
    ``config`` (a DeepGymConfig) overrides ``mode``, ``backend`` and ``max_parallel``;
    ``provider`` is a ready provider or a zero-argument factory of one; extra keyword
    arguments are the provider's options. ``check`` runs the provider's ``preflight`` (a
    remote provider's SDK and credentials) now, so a wrong key fails here, in one line."""

    def __init__(self, mode: str = "auto", *, config: DeepGymConfig | None = None,
                 provider: ProviderSpec = None, backend: str = "ray",
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
        self._provider_spec = provider
        self._provider: SandboxProvider | None = None
        self._lock = threading.Lock()
        if provider is None and check:
            # A mode that cannot run here fails now, once, not on every run of a batch.
            from deepgym_ray.sandboxes import check_mode

            check_mode(config.mode, **config.provider_options)

    # --- pickling: config and provider spec travel, the built provider does not -------------

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "provider_spec": self._provider_spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Checked where the client was made; an actor's copy does not ask the provider again.
        self.__init__(config=state["config"], provider=state["provider_spec"], check=False)

    def __repr__(self) -> str:
        return f"DeepGym(mode={self.config.mode!r}, backend={self.config.backend!r})"

    @property
    def provider(self) -> SandboxProvider:
        """The sandbox provider, built on first use."""
        if self._provider is None:
            with self._lock:
                if self._provider is None:
                    self._provider = self._build_provider()
        return self._provider

    def _build_provider(self) -> SandboxProvider:
        spec = self._provider_spec
        if isinstance(spec, SandboxProvider):
            return spec
        if callable(spec):
            return spec()
        from deepgym_ray.sandboxes import make_provider

        return make_provider(self.config.mode, **self.config.provider_options)

    def close(self) -> None:
        """Release the provider (it is rebuilt if the client is used again)."""
        with self._lock:
            provider, self._provider = self._provider, None
        if provider is not None and not isinstance(self._provider_spec, SandboxProvider):
            provider.close()

    # --- scoring ----------------------------------------------------------------------------

    @staticmethod
    def _environment(env: Environment | str) -> Environment:
        if isinstance(env, Environment):
            return env
        if isinstance(env, str):
            from deepgym_ray.envs import load_environment

            return load_environment(env)
        raise TypeError(f"env must be an Environment or its name, got {type(env).__name__}")

    def run(self, env: Environment | str, model_output: Any) -> RunResult:
        """Score one model output (a completion string, a conversation, or plain code).

        Raises SandboxError, TimeoutError or VerifierError when nothing was judged.
        """
        from deepgym_ray.judge.host import judge

        env = self._environment(env)
        check_completion(model_output, "model_output")
        return judge(self.provider, env, completion_to_code(model_output))

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

    def _map(self, envs: Sequence[Environment], outputs: Sequence[Any],
             max_parallel: int) -> list[RunResult]:
        if self.config.backend == "ray":
            try:
                from deepgym_ray.pool import get_pool
            except ImportError:
                logger.debug("deepgym_ray.pool is not available; scoring on threads")
            else:
                return list(get_pool(self).map(list(envs), list(outputs), max_parallel))
        if not outputs:
            return []
        workers = max(1, min(max_parallel, len(outputs)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deepgym") as pool:
            return list(pool.map(self.run_safe, envs, outputs))

    def run_batch(self, env: Environment | str, outputs: Sequence[Any],
                  max_parallel: int | None = None) -> BatchResult:
        """Score many outputs against one environment; results in input order, never raises
        for a single run's failure."""
        started = time.monotonic()
        env = self._environment(env)
        outputs = check_completions(outputs, "outputs")
        results = self._map([env] * len(outputs), outputs, self._parallel(max_parallel))
        return BatchResult(results=results, duration=time.monotonic() - started)

    def eval(self, envs: Sequence[Environment | str], outputs: Sequence[Any] | None = None,
             max_parallel: int | None = None) -> EvalResult:
        """Score ``outputs[i]`` against ``envs[i]`` (default: each env's reference solution)."""
        started = time.monotonic()
        if isinstance(envs, (str, Environment)):
            raise TypeError(f"envs must be a list of environments (one per output), got one "
                            f"{type(envs).__name__}; use run_batch for many outputs of one")
        envs = [self._environment(e) for e in envs]
        if outputs is None:
            outputs = [e.reference_solution or "" for e in envs]
        outputs = check_completions(outputs, "outputs")
        if len(outputs) != len(envs):
            raise ValueError(f"got {len(outputs)} outputs for {len(envs)} environments")
        results = self._map(envs, outputs, self._parallel(max_parallel))
        return EvalResult(results=results, env_names=[e.name for e in envs],
                          duration=time.monotonic() - started)

    def _parallel(self, max_parallel: int | None) -> int:
        return check_max_parallel(self.config.max_parallel if max_parallel is None
                                  else max_parallel)
