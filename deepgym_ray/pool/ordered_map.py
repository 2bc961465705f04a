"""One ``VerifierPool.map`` call: backpressure, input order, and retries on another actor.

A :class:`MapRun` pulls answers lazily from the caller's iterable (taking the code out of each on
the driver), keeps at most ``max_parallel`` of them running, and yields one RunResult per input in
input order. Each live actor gets a lease, a share of ``max_parallel`` it runs at once, and is
sent up to as much again in chunks that wait on the actor (:mod:`deepgym_ray.pool.shares`). A run
lost for an infrastructure reason (the actor died, its node went away, or the result has no
verdict because of a sandbox fault) is sent again to another actor, at most ``max_retries``
times; after that it settles for a result without a verdict naming the cause. Every input gets
exactly one result. It knows its pool only as an
:class:`~deepgym_ray.pool.liveness.ActorRoster`.

Memory stays flat: answers are read only when there is room for them, and finished results
wait for their turn in a reorder buffer bounded by ``reorder_window``.

Example:
    run = pool.map(env, answers, max_parallel=64)
    rewards = [r.reward for r in run]
    run.stats.retries
    # 0
"""

from __future__ import annotations

import collections
import logging
import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from deepgym_ray import contract
from deepgym_ray.completions import completion_to_code
from deepgym_ray.exceptions import describe_error, error_type_for, is_infrastructure_failure
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.pool.env_refs import EnvTable, pairs
from deepgym_ray.pool.liveness import REVIVE_DELAY, ActorLiveness, ActorRoster
from deepgym_ray.pool.shares import Shares

__all__ = ["MapRun", "MapStats"]

logger = logging.getLogger(__name__)

CANCEL_ACK_SECONDS = 5.0  # a given-up map waits this long at most for the actors to hear it


@dataclass
class MapStats:
    """What happened during one map call (read it after iterating)."""

    results: int = 0
    no_verdict: int = 0
    retries: int = 0
    exhausted: int = 0
    actor_failures: int = 0
    chunks: int = 0


class _Job:
    __slots__ = ("index", "slot", "answer", "attempts", "avoid")

    def __init__(self, index: int, slot: int, answer: Any) -> None:
        self.index = index
        self.slot = slot
        self.answer = answer
        self.attempts = 0  # failed attempts so far
        self.avoid: set[int] | None = None  # actors this job already failed on


def _retryable(result: RunResult) -> bool:
    """A result that a sandbox fault left without a verdict: worth a run on another actor."""
    return not result.has_verdict and result.error_type == contract.SANDBOX_ERROR


class MapRun(Iterator[RunResult]):
    """Iterator over one map call's results, in input order (see the module docstring)."""

    def __init__(
        self,
        pool: ActorRoster,
        envs: Environment | Sequence[Environment] | Iterable[Environment],
        items: Iterable[Any],
        *,
        max_parallel: int,
        max_retries: int,
        on_result: Callable[[int, RunResult], Any] | None = None,
        chunk_size: int | None = None,
        reorder_window: int | None = None,
        no_actor_timeout: float = 300.0,
        code: bool = False,
    ) -> None:
        self.stats = MapStats()
        self._pool = pool
        self._pairs = pairs(envs, items)
        self._max_parallel = max_parallel
        self._max_retries = max_retries
        self._on_result = on_result
        self._chunk_size = chunk_size
        self._window = reorder_window or max(4 * max_parallel, 1024)
        self._no_actor_timeout = no_actor_timeout
        self._code = code
        self._gen = self._run()

    def __next__(self) -> RunResult:
        return next(self._gen)

    def close(self) -> None:
        """Give up on the results not yet taken: the actors drop this call's queued runs and
        stop its running ones."""
        self._gen.close()

    # -- the loop ---------------------------------------------------------------------------

    def _run(self) -> Iterator[RunResult]:
        started = time.monotonic()
        finished = False
        try:
            yield from self._loop()
            finished = True
        finally:
            if finished:
                s = self.stats
                logger.info("pool %r: %d results (%d without a verdict, %d retried, %d actor "
                            "failures) in %.1fs", self._pool.name, s.results, s.no_verdict,
                            s.retries, s.actor_failures, time.monotonic() - started)
            else:
                self._withdraw()

    def _withdraw(self) -> None:
        """The caller gave up (Ctrl-C, a closed generator): the actors drop what is queued and
        stop what is running of this call."""
        in_flight = getattr(self, "_in_flight", {})
        if not in_flight:
            return
        acks = []
        for actor in {actor for actor, _ in in_flight.values()}:
            try:
                acks.append(self._actors[actor].cancel.remote(self._shares.key))
            except Exception as exc:  # the actor is gone: so is its queue
                logger.debug("cancel on actor %d: %s", actor, describe_error(exc))
        # Once an actor has the cancel, a chunk of this call that reaches it later is dropped:
        # wait for that (briefly: a dead actor never answers) so nothing new starts after us.
        if acks:
            ray.wait(acks, num_returns=len(acks), timeout=CANCEL_ACK_SECONDS)
        for ref in in_flight:
            try:
                ray.cancel(ref)
            except Exception as exc:
                logger.debug("cancel %s: %s", ref, describe_error(exc))
        logger.info("pool %r: map given up; %d runs withdrawn or stopped on the actors",
                    self._pool.name, self._n_in_flight)
        in_flight.clear()

    def _loop(self) -> Iterator[RunResult]:
        self._start()
        next_out = 0
        self._next_in = 0
        self._exhausted = False
        stalled_since: float | None = None
        while True:
            # 1. Send as much as the leases and the reorder window allow.
            jobs = self._take(next_out)
            if jobs and self._ready:
                stalled_since = None
                self._dispatch(jobs)
            elif jobs:
                stalled_since = stalled_since or time.monotonic()
                self._stalled(jobs, stalled_since)
            # 2. Hand out what is finished, in input order.
            while next_out in self._done:
                yield self._done.pop(next_out)
                next_out += 1
            if self._exhausted and next_out == self._next_in:
                return
            # 3. Wait for a chunk, a ping, or the next revival.
            self._live.revive_due()
            self._wait(stalled_since)

    def _start(self) -> None:
        """The call's state; which actors are up (see :mod:`~deepgym_ray.pool.liveness`)."""
        self._live = ActorLiveness(self._pool)
        self._actors = self._live.actors
        self._ready = self._live.ready
        self._table = EnvTable()
        self._shares = Shares(len(self._actors), self._max_parallel, self._ready,
                              self._chunk_size)
        self._in_flight: dict[ray.ObjectRef, tuple[int, list[_Job]]] = {}
        self._n_in_flight = 0
        self._retry: collections.deque[_Job] = collections.deque()
        self._done: dict[int, RunResult] = {}
        self._live.start()

    def _take(self, next_out: int) -> list[_Job]:
        """The jobs there is room for now: retries first, then new inputs."""
        self._shares.grant()
        if self._ready:
            free = self._shares.free()
        else:  # no actor yet: take work anyway, so a stall is noticed and timed
            free = self._max_parallel - self._n_in_flight
        jobs: list[_Job] = []
        while len(jobs) < free and self._retry:
            jobs.append(self._retry.popleft())
        while (len(jobs) < free and not self._exhausted
               and self._next_in < next_out + self._window):
            pair = next(self._pairs, None)
            if pair is None:
                self._exhausted = True
                break
            env, item = pair
            index = self._next_in
            self._next_in += 1
            slot = self._table.slot(env, index)
            try:  # the code is taken out of a completion here, on the driver, once
                code = item if self._code else completion_to_code(
                    item, index, languages=env.answer_languages)
            except ValueError as exc:  # no code to run (a conversation with no answer)
                job = _Job(index, slot, None)
                self._settle(job, self._failure(job, f"no code to run: {exc}",
                                                error_type=error_type_for(exc)))
                continue
            jobs.append(_Job(index, slot, code))
        return jobs

    def _stalled(self, jobs: list[_Job], since: float) -> None:
        """No actor is up: keep the jobs for later, or fail them once it has lasted too long."""
        if self._in_flight or time.monotonic() - since < self._no_actor_timeout:
            self._retry.extendleft(reversed(jobs))  # keep them, in order, for later
            return
        for job in jobs:
            self._settle(job, self._failure(
                job, f"no live verifier actor in pool {self._pool.name!r} for "
                f"{self._no_actor_timeout:.0f}s"))

    def _wait(self, stalled_since: float | None) -> None:
        refs = [*self._in_flight, *self._live.pings]
        deadlines = self._live.deadlines()
        if stalled_since is not None:
            deadlines.append(stalled_since + self._no_actor_timeout)
        timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        if not refs:
            time.sleep(timeout if timeout is not None else REVIVE_DELAY)
            return
        ready, rest = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready and rest:  # take everything else that is already done, too
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready.extend(more)
        for ref in ready:
            if ref in self._live.pings:
                self._live.answered(ref)
            else:
                self._chunk_done(ref)

    # -- sending ----------------------------------------------------------------------------

    def _dispatch(self, jobs: list[_Job]) -> None:
        fresh = [job for job in jobs if job.avoid is None]
        later: list[_Job] = []
        for job in jobs:
            if job.avoid is not None:  # a retry: any actor it has not failed on yet
                actor = self._shares.pick(job.avoid)
                if actor is None:
                    later.append(job)
                else:
                    self._submit(actor, [job])
        while fresh:
            actor = self._shares.pick(None)
            if actor is None:
                later.extend(fresh)
                break
            limit = min(self._shares.chunk_limit(actor), self._shares.room(actor))
            chunk, fresh = fresh[:limit], fresh[limit:]
            self._submit(actor, chunk)
        if later:  # no room left (retries took it): keep them, in order, for the next turn
            later.sort(key=lambda job: job.index)
            self._retry.extendleft(reversed(later))

    def _submit(self, actor: int, chunk: list[_Job]) -> None:
        # Lists, not tuples: Ray serializes lists of strings and numbers itself, a tuple by a
        # call back into Python (see VerifierActor.run_chunk).
        local: dict[int, int] = {}
        envs: list[list[Any]] = []
        work: list[list[Any]] = []
        for job in chunk:
            slot = local.get(job.slot)
            if slot is None:
                slot = local[job.slot] = len(envs)
                key, refs, _ = self._table.entries[job.slot]
                envs.append([key, refs])
            work.append([slot, job.answer])
        try:
            ref = self._actors[actor].run_chunk.remote(envs, work, self._shares.lease(actor))
        except Exception as exc:  # an answer that cannot be sent (not picklable)
            if len(chunk) > 1:
                for job in chunk:
                    self._submit(actor, [job])
                return
            self._settle(chunk[0], self._failure(
                chunk[0], f"could not send input {chunk[0].index}: {describe_error(exc)}",
                error_type=error_type_for(exc)))
            return
        self._in_flight[ref] = (actor, chunk)
        self._n_in_flight += len(chunk)
        self._shares.load[actor] += len(chunk)
        self.stats.chunks += 1

    # -- receiving --------------------------------------------------------------------------

    def _chunk_done(self, ref: ray.ObjectRef) -> None:
        actor, chunk = self._in_flight.pop(ref)
        self._n_in_flight -= len(chunk)
        self._shares.load[actor] -= len(chunk)
        try:
            results = ray.get(ref)
            if isinstance(results, bytes):  # pickled by the actor (see VerifierActor.run_chunk)
                results = pickle.loads(results)
        except Exception as exc:
            self._chunk_failed(actor, chunk, exc)
            return
        if not isinstance(results, list) or len(results) != len(chunk):
            self._chunk_failed(actor, chunk, RuntimeError(
                f"returned {len(results) if isinstance(results, list) else results!r} results "
                f"for {len(chunk)} runs"))
            return
        for job, result in zip(chunk, results, strict=True):
            if _retryable(result):
                self._again(job, actor, result.details or result.error_type or "", last=result)
            else:
                self._settle(job, result)

    def _chunk_failed(self, actor: int, chunk: list[_Job], exc: BaseException) -> None:
        label = f"verifier actor {self._pool.actor_name(actor)}"
        if isinstance(exc, RayActorError) or is_infrastructure_failure(exc):
            self.stats.actor_failures += 1
            logger.warning("%s failed, retrying its %d runs elsewhere: %s",
                           label, len(chunk), describe_error(exc))
            self._live.down(actor)
            self._shares.revoke(actor)
            for job in chunk:
                self._again(job, actor, f"{label} failed: {describe_error(exc)}")
            return
        cause = exc.cause if isinstance(exc, RayTaskError) and exc.cause is not None else exc
        for job in chunk:  # a bug, not an outage: another try would fail the same way
            self._settle(job, self._failure(job, f"{label} raised {describe_error(cause)}",
                                            error_type=error_type_for(cause)))

    def _again(self, job: _Job, actor: int, cause: str, last: RunResult | None = None) -> None:
        job.attempts += 1
        job.avoid = (job.avoid or set()) | {actor}
        if job.attempts <= self._max_retries:
            self.stats.retries += 1
            self._retry.append(job)
            return
        self.stats.exhausted += 1
        details = f"no verdict after {job.attempts} attempts: {cause}"
        if last is not None:
            self._settle(job, last.model_copy(update={"details": details}))
        else:
            self._settle(job, self._failure(job, details))

    def _failure(self, job: _Job, details: str, error_type: str = contract.SANDBOX_ERROR):
        return RunResult(error_type=error_type, details=details,
                         env_name=self._table.name(job.slot))

    def _settle(self, job: _Job, result: RunResult) -> None:
        self._done[job.index] = result
        self.stats.results += 1
        if not result.has_verdict:
            self.stats.no_verdict += 1
        if self._on_result is not None:
            self._on_result(job.index, result)
