"""Waiting out a sandbox cloud that throttles creation, instead of failing the runs.

A cloud refuses a create for two reasons that are not failures: its rate limit (HTTP 429, with
a ``Retry-After`` header saying how long to wait) and the organization's quota of CPU, memory
or disk (Daytona answers 403 "Total CPU limit exceeded"). Both pass with time: the window
moves on, or one of the organization's sandboxes is deleted. A pool that turned each refusal
into a no-verdict would throw away a whole batch while the cloud was only asking it to slow
down. :class:`Throttle` decides, per refused create, whether to wait (and how long: the
``Retry-After`` when there is one, else a doubling backoff with jitter so that many actors do
not come back at the same instant), and gives up once the wait would pass its bound, so a
quota that never frees still ends as the refusal's own error (no verdict). A quota refusal
first asks the provider to free room of its own (an idle sandbox it keeps for reuse holds
quota that the new one needs). The wait ends early when the provider closes.

Example:
    >>> throttle = Throttle(bound=0)                  # never waits
    >>> throttle.wait(ProviderHTTPError(429, "slow down", retry_after=1.0))
    False
    >>> Throttle.reason(ProviderHTTPError(500, "boom")) is None
    True
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable

from deepgym_ray.exceptions import ProviderHTTPError, SandboxError

__all__ = ["Throttle"]

logger = logging.getLogger(__name__)

# A quota refusal's words (Daytona: "Total CPU limit exceeded. Maximum allowed: 10.").
_QUOTA = re.compile(r"limit exceeded|quota", re.IGNORECASE)
FIRST_DELAY, MAX_DELAY = 1.0, 30.0


class Throttle:
    """The waits of one sandbox's creation; ``bound``: the seconds it may wait in all."""

    def __init__(self, bound: float, closing: threading.Event | None = None) -> None:
        self.bound = bound
        self.closing = closing or threading.Event()
        self.waited = 0.0
        self._delay = FIRST_DELAY

    @staticmethod
    def reason(exc: BaseException) -> str | None:
        """"rate" or "quota" when ``exc`` is the cloud throttling a create, else None."""
        if not isinstance(exc, ProviderHTTPError):
            return None
        if exc.status == 429:
            return "rate"
        if exc.status == 403 and _QUOTA.search(exc.message or str(exc)):
            return "quota"
        return None

    def wait(self, exc: BaseException, free_room: Callable[[], bool] | None = None) -> bool:
        """Wait before the next try of a create that failed with ``exc``: False (at once)
        when ``exc`` is not throttling or the wait would pass the bound; raises SandboxError
        when the provider closes meanwhile."""
        why = self.reason(exc)
        if why is None:
            return False
        if why == "quota" and free_room is not None and free_room():
            delay = FIRST_DELAY  # our own idle sandbox is being deleted: try again soon
        elif why == "rate" and getattr(exc, "retry_after", None) is not None:
            delay = max(0.0, float(exc.retry_after)) + random.uniform(0, 0.5)
        else:
            delay = self._delay * random.uniform(0.75, 1.25)
            self._delay = min(MAX_DELAY, self._delay * 2)
        if self.waited + delay > self.bound:
            return False
        logger.info("the sandbox cloud throttles creation (%s: %s); trying again in %.1fs",
                    why, exc, delay)
        started = time.monotonic()
        if self.closing.wait(delay):
            raise SandboxError("the provider was closed while it waited to create a sandbox")
        self.waited += time.monotonic() - started
        return True
