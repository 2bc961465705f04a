"""Daytona's limits on creating sandboxes, as the service enforces them.

Creation is rate-limited per organization: past ``limit`` creates in ``window`` seconds the API
answers HTTP 429 ("ThrottlerException: Too Many Requests", NestJS's throttler) with a
``Retry-After`` header, the seconds until the window lets one more through. And the
organization's running sandboxes share a quota of CPU: a create that would pass it is refused
with HTTP 403 "Total CPU limit exceeded. Maximum allowed: N." until one is stopped or deleted
(a stopped sandbox frees its CPU). Both are off unless set (the service's own figures are far
above what a test reaches); tests that need them set them on the server.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque

from .box import HttpError


class Limits:
    """``create_limit``: (creates, window seconds); ``cpu_quota``: vCPUs of running
    sandboxes; ``None`` for no limit."""

    def __init__(self, create_limit: tuple[int, float] | None = None,
                 cpu_quota: int | None = None) -> None:
        self.create_limit = create_limit
        self.cpu_quota = cpu_quota
        self.refused = {"rate": 0, "quota": 0}
        self._creates: deque[float] = deque()
        self._lock = threading.Lock()

    def check_create(self, cpu_in_use: int, cpu: int) -> None:
        """Raise the service's refusal when a create of ``cpu`` vCPUs may not happen now."""
        with self._lock:
            if self.create_limit is not None:
                limit, window = self.create_limit
                now = time.monotonic()
                while self._creates and now - self._creates[0] >= window:
                    self._creates.popleft()
                if len(self._creates) >= limit:
                    self.refused["rate"] += 1
                    wait = window - (now - self._creates[0])
                    raise HttpError(429, "ThrottlerException: Too Many Requests",
                                    headers={"Retry-After": str(max(1, math.ceil(wait)))})
            if self.cpu_quota is not None and cpu_in_use + cpu > self.cpu_quota:
                self.refused["quota"] += 1
                raise HttpError(403, f"Total CPU limit exceeded. Maximum allowed: "
                                     f"{self.cpu_quota}.")
            if self.create_limit is not None:
                self._creates.append(time.monotonic())
