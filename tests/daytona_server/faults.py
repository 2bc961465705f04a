"""Faults the local Daytona server injects on demand, by call name.

A rule names the calls it hits (``create``, ``get``, ``start``, ``stop``, ``delete``,
``autostop``, ``autodelete``, ``proxy_url``, ``upload``, ``execute``, ``session``,
``session_exec``, or ``*``), what happens (``status`` with an HTTP code, ``hang``, ``drop`` the
connection, ``vanish``: the sandbox disappears while the command runs), and how often: the next
``times`` matching calls, or each call with probability ``rate``. ``latency`` is added to every
call (``*``) or only to the named ones.
"""

from __future__ import annotations

import random
import socket
import threading
from dataclasses import dataclass, field

ACTIONS = ("status", "hang", "drop", "vanish")


@dataclass
class Rule:
    call: str
    action: str
    status: int = 503
    times: int | None = 1  # None: every matching call (with ``rate``)
    rate: float = 1.0
    hits: int = 0

    def matches(self, call: str) -> bool:
        return self.call in ("*", call)


@dataclass
class Faults:
    """The server's fault table; safe to change from any thread while it serves."""

    rules: list[Rule] = field(default_factory=list)
    latency: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)
        self.release = threading.Event()  # set to let hung calls go (and on shutdown)

    def add(self, call: str, action: str, *, status: int = 503, times: int | None = 1,
            rate: float = 1.0) -> Rule:
        if action not in ACTIONS:
            raise ValueError(f"unknown fault action {action!r}; choose one of {ACTIONS}")
        rule = Rule(call, action, status, times, rate)
        with self._lock:
            self.rules.append(rule)
        return rule

    def set_latency(self, seconds: float, call: str = "*") -> None:
        with self._lock:
            self.latency[call] = float(seconds)

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()
            self.latency.clear()
        self.release.set()
        self.release = threading.Event()

    def delay_for(self, call: str) -> float:
        with self._lock:
            return self.latency.get(call, self.latency.get("*", 0.0))

    def pick(self, call: str) -> Rule | None:
        """The rule that fires for this call, if any (counted as a hit)."""
        with self._lock:
            for rule in self.rules:
                if not rule.matches(call) or (rule.times is not None and rule.times <= 0):
                    continue
                if rule.rate < 1.0 and self._random.random() >= rule.rate:
                    continue
                if rule.times is not None:
                    rule.times -= 1
                rule.hits += 1
                return rule
        return None

    def load(self, spec: dict) -> None:
        """Rules and latency from a JSON-able dict (the control endpoint and the CLI)."""
        for item in spec.get("rules", []):
            self.add(item["call"], item["action"], status=int(item.get("status", 503)),
                     times=item.get("times", 1), rate=float(item.get("rate", 1.0)))
        for call, seconds in (spec.get("latency") or {}).items():
            self.set_latency(seconds, call)


def hold_or_drop(rule: Rule | None, faults: Faults, handler) -> bool:
    """Carry out a ``hang`` or ``drop`` rule on the request ``handler`` (an
    ``http.server.BaseHTTPRequestHandler``) serves: True when the request got no answer."""
    if rule is not None and rule.action == "hang":
        faults.release.wait()
        handler.close_connection = True
        return True
    if rule is not None and rule.action == "drop":
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)
        return True
    return False
