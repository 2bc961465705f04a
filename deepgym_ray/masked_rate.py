"""MaskedRate: how often results had no verdict, with a warning when too many in a row did.

One implementation for every path that hands out rewards: the reward functions, the trainers'
integrations and the agent episodes (``deepgym_ray.sessions``).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Sequence

from deepgym_ray.models import RunResult

__all__ = ["MaskedRate"]

logger = logging.getLogger(__name__)


class MaskedRate:
    """Counts samples without a verdict; warns when more than ``threshold`` of the last
    ``window`` had none (a provider outage, or a policy that learned to break its judge).

    Example:
        >>> rate = MaskedRate(window=100, threshold=5)
        >>> rate.update([1.0] * 95 + [None] * 5)
        >>> rate.window_masked, rate.warnings
        (5, 0)
    """

    def __init__(self, window: int = 100, threshold: int = 5, name: str = "reward") -> None:
        if window < 1 or threshold < 0:
            raise ValueError(f"window must be >= 1 and threshold >= 0, got {window}, {threshold}")
        self.window = window
        self.threshold = threshold
        self.name = name
        self.total = 0  # samples seen
        self.masked = 0  # samples without a verdict, ever
        self.warnings = 0  # warnings logged
        self._recent: collections.deque[bool] = collections.deque(maxlen=window)
        self._window_masked = 0
        self._since_warning: int | None = None  # samples since the last warning, while over
        self._lock = threading.Lock()

    @property
    def window_masked(self) -> int:
        """Samples without a verdict among the last ``window``."""
        return self._window_masked

    @property
    def rate(self) -> float:
        """The no-verdict rate over the last ``window`` samples (0.0 before any)."""
        return self._window_masked / len(self._recent) if self._recent else 0.0

    @property
    def total_rate(self) -> float:
        return self.masked / self.total if self.total else 0.0

    def counts(self) -> dict[str, float]:
        """Everything at once, for a trainer's logs."""
        return {"total": self.total, "masked": self.masked, "window_masked": self.window_masked,
                "rate": self.rate, "total_rate": self.total_rate, "warnings": self.warnings}

    def update(self, samples: Sequence[RunResult | float | None]) -> None:
        """Count results (no verdict) or rewards (None) of one batch."""
        with self._lock:
            for sample in samples:
                judged = sample.has_verdict if isinstance(sample, RunResult) else sample is not None
                self._record(not judged)

    def _record(self, masked: bool) -> None:
        if len(self._recent) == self.window and self._recent[0]:
            self._window_masked -= 1
        self._recent.append(masked)
        self._window_masked += masked
        self.total += 1
        self.masked += masked
        if self._window_masked <= self.threshold:
            self._since_warning = None
            return
        # Warn on crossing the threshold, then once per window while it stays above.
        if self._since_warning is None or self._since_warning >= self.window:
            self.warnings += 1
            self._since_warning = 0
            logger.warning(
                "%s: %d of the last %d samples had no verdict (more than %d): a provider "
                "outage, or a policy that found a failure that gets masked",
                self.name, self._window_masked, len(self._recent), self.threshold)
        self._since_warning += 1
