"""The agent episodes one pool actor holds: each a :class:`~deepgym_ray.sessions.Session` in one
sandbox of the actor's provider, from its start to its end.

Every call names its session by id; the driver's :class:`~deepgym_ray.pool.pooled_session.
PooledSession` always sends it to the actor that opened it, so its steps reach its sandbox.
A session nobody called for ``idle_timeout`` seconds is reaped: its sandbox is torn down and
its result has no verdict (``session_idle_timeout``). Results of ended sessions are kept for a
while, so a late ``score()`` still gets the one result its episode has.

Example (what the actor does):
    host = SessionHost(lambda: scorer.provider)
    first = host.open("s-1", env, idle_timeout=600)
    observation, reward, done = host.step("s-1", Action(action_type="bash", content="ls"))
    host.score("s-1").score
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from deepgym_ray import contract
from deepgym_ray.exceptions import SandboxEvictedError
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.sandboxes.base import SandboxProvider
from deepgym_ray.sessions import Action, Observation, Session, SessionStateError
from deepgym_ray.sessions.session import SessionEndedError

__all__ = ["SESSION_IDLE_TIMEOUT", "SessionHost", "SessionLostError"]

logger = logging.getLogger(__name__)

SESSION_IDLE_TIMEOUT = 600.0
ENDED_KEPT = 20_000


class SessionLostError(SandboxEvictedError):
    """A call for a session its actor does not hold: the actor restarted (it died), and the
    sandbox went with it. Ours, not the agent's: no verdict."""


class SessionHost:
    """Open sessions by id (see the module docstring). Thread-safe: the actor runs calls for
    different sessions at once, and a session's own calls one at a time."""

    def __init__(self, provider: Callable[[], SandboxProvider]) -> None:
        self._provider = provider
        self._idle: dict[str, float] = {}  # each session's idle timeout
        self._lock = threading.Lock()
        self._open: dict[str, Session] = {}
        self._last: dict[str, float] = {}
        self._busy: collections.Counter[str] = collections.Counter()
        self._ended: collections.OrderedDict[str, RunResult] = collections.OrderedDict()
        self._reaper: threading.Thread | None = None
        self._closed = threading.Event()
        self.opened = self.reaped = 0

    def open(self, sid: str, env: Environment,
             idle_timeout: float = SESSION_IDLE_TIMEOUT) -> Observation:
        """Start session ``sid`` of ``env``; its first observation. Raises what failed (the
        session then has no verdict, and is not kept). It is reaped after ``idle_timeout``
        seconds without a call."""
        session = Session(self._provider(), env)
        with self._lock:
            if sid in self._open or sid in self._ended:
                raise SessionStateError(f"session {sid} exists already")
            self._open[sid] = session
            self._idle[sid] = idle_timeout
            self._mark(sid, +1)
            self.opened += 1
        self._start_reaper()
        try:
            return session.start()
        except BaseException:
            self._end(sid, session)
            raise
        finally:
            self._touch(sid, -1)

    def step(self, sid: str, action: Action) -> tuple[Observation, float | None, bool]:
        session = self._take(sid)
        try:
            return session.step(action)
        finally:
            self._touch(sid, -1)

    def score(self, sid: str) -> RunResult:
        """The episode's one result (scored now, or kept since it ended)."""
        with self._lock:
            ended = self._ended.get(sid)
        if ended is not None:
            return ended
        session = self._take(sid)
        try:
            result = session.score()
        finally:
            self._touch(sid, -1)
        self._end(sid, session)
        return result

    def abandon(self, sid: str, reason: str, error_type: str | None = None) -> RunResult | None:
        """End ``sid`` without a verdict (a step under way is stopped); its result, or None
        for a session this actor does not know."""
        with self._lock:
            session = self._open.get(sid)
            ended = self._ended.get(sid)
        if session is None:
            return ended
        result = session.abandon(reason)
        if error_type is not None and result.error_type == contract.SESSION_ABANDONED:
            result = session.result = result.model_copy(update={"error_type": error_type})
        self._end(sid, session)
        return result

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"open_sessions": len(self._open), "sessions_opened": self.opened,
                    "sessions_reaped": self.reaped}

    def close(self, reason: str = "its actor is closing") -> None:
        """Abandon every open session (their sandboxes are torn down)."""
        self._closed.set()
        with self._lock:
            sids = list(self._open)
        for sid in sids:
            self.abandon(sid, reason)

    # --- inside ---------------------------------------------------------------------------

    def _take(self, sid: str) -> Session:
        with self._lock:
            session = self._open.get(sid)
            if session is None:
                ended = self._ended.get(sid)
                if ended is not None:
                    what = ended.error_type or "scored"
                    raise SessionEndedError(f"session {sid} has ended ({what}): "
                                            f"{ended.details}", ended)
                raise SessionLostError(f"no session {sid} on this actor: the actor restarted, "
                                       "and the session's sandbox went with it")
            self._mark(sid, +1)
            return session

    def _touch(self, sid: str, busy: int) -> None:
        with self._lock:
            self._mark(sid, busy)

    def _mark(self, sid: str, busy: int) -> None:
        """A call on ``sid`` began (+1) or ended (-1) now; with the lock held."""
        self._last[sid] = time.monotonic()
        self._busy[sid] += busy
        if self._busy[sid] <= 0:
            del self._busy[sid]

    def _end(self, sid: str, session: Session) -> None:
        session.close()
        with self._lock:
            self._open.pop(sid, None)
            self._last.pop(sid, None)
            self._idle.pop(sid, None)
            if session.result is not None:
                self._ended[sid] = session.result
                while len(self._ended) > ENDED_KEPT:
                    self._ended.popitem(last=False)

    def _start_reaper(self) -> None:
        with self._lock:
            if self._reaper is not None:
                return
            self._reaper = threading.Thread(target=self._reap, name="deepgym-session-reaper",
                                            daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        every = 0.05
        while not self._closed.wait(every):
            now = time.monotonic()
            with self._lock:
                idle = [(sid, self._idle[sid]) for sid, last in self._last.items()
                        if sid in self._open and not self._busy.get(sid)
                        and now - last > self._idle[sid]]
                every = max(0.05, min([5.0, *(t / 4 for t in self._idle.values())]))
            for sid, timeout in idle:
                logger.info("session %s idle for %gs: reaped", sid, timeout)
                self.abandon(sid, f"no call for {timeout:g}s (idle timeout)",
                             contract.SESSION_IDLE)
                with self._lock:
                    self.reaped += 1
