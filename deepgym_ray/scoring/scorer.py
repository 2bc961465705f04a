"""Scorer: what turns (environment, code) into a RunResult, small enough to ship to any process.

A scorer holds the sandbox mode and its options (or a ready provider, or a zero-argument factory
of one); the provider itself is built lazily, once per process, so a scorer pickles cheaply into
Ray actors. It takes code, never a completion: the driver takes the code out of a completion
once (:mod:`deepgym_ray.completions`) before anything is sent. Its :attr:`label` says what scores,
so a pool never lends one scorer's actors to another.

Example:
    >>> scorer = Scorer("local")
    >>> scorer.mode, scorer.key == Scorer("local").key, scorer.key == Scorer("docker").key
    ('local', True, False)
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from deepgym_ray.exceptions import error_type_for
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.sandboxes.base import CancelSignal, SandboxProvider

__all__ = ["ProviderSpec", "Scorer"]

logger = logging.getLogger(__name__)

#: A ready provider, a zero-argument factory of one, or None (make one from the mode).
ProviderSpec = SandboxProvider | Callable[[], SandboxProvider] | None


class Scorer:
    """Scores code against environments in sandboxes of one provider. Thread-safe."""

    def __init__(self, mode: str = "auto", provider_options: Mapping[str, Any] | None = None,
                 provider: ProviderSpec = None) -> None:
        self.mode = mode
        self.provider_options = dict(provider_options or {})
        self._provider_spec = provider
        self._provider: SandboxProvider | None = None
        self._lock = threading.Lock()
        #: Builds a repository task's image where this scorer runs (a pool actor sets its
        #: node's builder); given to a provider that builds images. Not pickled.
        self.image_builder: Callable[[Any], str] | None = None

    # --- pickling: the settings travel, the built provider does not -------------------------

    def __getstate__(self) -> dict[str, Any]:
        return {"mode": self.mode, "provider_options": self.provider_options,
                "provider": self._provider_spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["mode"], state["provider_options"], state["provider"])

    def __repr__(self) -> str:
        return f"Scorer(mode={self.mode!r})"

    @property
    def provider_given(self) -> bool:
        """Whether the provider was given (an object, a class or a factory) rather than
        made from the mode."""
        return self._provider_spec is not None

    @property
    def label(self) -> str:
        """What scoring depends on: the mode, its options and the provider given, as JSON."""
        spec = self._provider_spec
        return json.dumps({
            "mode": self.mode,
            "provider_options": self.provider_options,
            "provider": None if spec is None else type(spec).__qualname__,
        }, sort_keys=True, default=repr)

    @property
    def key(self) -> str:
        """A short digest of :attr:`label` (part of a pool's actor names)."""
        return hashlib.sha1(self.label.encode()).hexdigest()[:8]

    # --- the provider -----------------------------------------------------------------------

    @property
    def provider(self) -> SandboxProvider:
        """The sandbox provider, built on first use."""
        if self._provider is None:
            with self._lock:
                if self._provider is None:
                    provider = self._build_provider()
                    if self.image_builder is not None and hasattr(provider, "image_builder"):
                        provider.image_builder = self.image_builder
                    self._provider = provider
        return self._provider

    def _build_provider(self) -> SandboxProvider:
        spec = self._provider_spec
        if isinstance(spec, SandboxProvider):
            return spec
        if callable(spec):
            return spec()
        from deepgym_ray.sandboxes import make_provider

        return make_provider(self.mode, **self.provider_options)

    def warm(self) -> threading.Thread:
        """Build the provider and let it start what it keeps warm (``SandboxProvider.warm``)
        on a background thread, so that the first runs need not wait for it. A failure is
        only logged here: the first run meets it again and reports it."""
        def build() -> None:
            try:
                self.provider.warm()
            except Exception as exc:  # the runs say what is wrong
                logger.debug("warming the %s provider failed: %r", self.mode, exc)

        thread = threading.Thread(target=build, name="deepgym-warm", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        """Release the provider (rebuilt if the scorer is used again). A provider that was
        given ready-made belongs to its owner and is left open."""
        with self._lock:
            provider, self._provider = self._provider, None
        if provider is not None and not isinstance(self._provider_spec, SandboxProvider):
            provider.close()

    # --- scoring ----------------------------------------------------------------------------

    def run(self, env: Environment, code: str, cancel: CancelSignal | None = None) -> RunResult:
        """Judge ``code`` against ``env``. Raises SandboxError, TimeoutError or VerifierError
        when nothing was judged, RunCancelledError when ``cancel`` was set (see ``judge``)."""
        from deepgym_ray.scoring.judging import judge

        return judge(self.provider, env, code, cancel)

    def run_safe(self, env: Environment, code: str,
                 cancel: CancelSignal | None = None) -> RunResult:
        """Like :meth:`run`, but a raise becomes a result without a verdict."""
        started = time.monotonic()
        try:
            result = self.run(env, code, cancel)
        except Exception as exc:  # every failure must become a result
            logger.debug("run on %s raised %r", env.name, exc)
            return RunResult(error_type=error_type_for(exc),
                             details=f"{type(exc).__name__}: {exc}", env_name=env.name,
                             duration=time.monotonic() - started,
                             sandbox_id=getattr(exc, "sandbox_id", None))
        if result.env_name is None:
            result = result.model_copy(update={"env_name": env.name})
        return result
