"""VerifierActor: one Ray actor holding one Scorer, running several verifications at once.

The pool sends it chunks of work: a table of environments (object references, fetched once and
cached by content key) and a list of ``(env slot, code)`` jobs. It runs the jobs on its own
threads with ``scorer.run_safe``, which never raises, and returns one RunResult per job in order.
A chunk may carry a lease (see :mod:`deepgym_ray.pool.slots`): the caller's cap on how many of its
runs go at once on this actor, so it can send work ahead of its slots without exceeding them.
It also counts the runs it has in flight, so tests can check the pool's backpressure, and
records Ray metrics (``ray.util.metrics``: runs by outcome, no-verdict runs by error type, run
latency, queue wait), which Ray's dashboard and Prometheus show. A caller that gives up on a map
(Ctrl-C, a closed generator) withdraws its queued runs here with :meth:`VerifierActor.cancel`,
which also stops its running ones: each run started for a lease has its own cancel signal,
passed down to the provider, which kills the run's processes as at its deadline. A stopped
run's result (``cancelled``, no verdict) goes nowhere: its caller is gone.

Example:
    actor = VerifierActor.remote(Scorer("local"), "deepgym", 0, 1, 4)
    ray.get(actor.stats.remote())["runs"]   # 0
"""

from __future__ import annotations

import collections
import functools
import os
import pickle
import threading
import time
import uuid
from typing import Any

import ray

from deepgym_ray import contract
from deepgym_ray.exceptions import error_type_for
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.pool.image_builders import image_builder_for_this_node
from deepgym_ray.pool.niceness import take_node_niceness
from deepgym_ray.pool.session_host import SessionHost
from deepgym_ray.pool.slots import Leases
from deepgym_ray.sandboxes.base import CancelSignal
from deepgym_ray.scoring import Scorer

__all__ = ["VerifierActor"]

# Environments kept per actor; a training run uses a handful, a mixed suite a few dozen.
ENV_CACHE_SIZE = 256
# Run intervals kept for stats (enough for the tests to rebuild the in-flight curve).
RUN_LOG_SIZE = 10_000
# Seconds a closing actor waits for its stopped runs to end (a cancelled run ends in seconds).
CLOSE_RUNS_WAIT = 60.0
# Calls on agent episodes (see session_host) running at once on one actor: a step holds a
# thread while its command runs; more wait. Open sessions themselves hold no thread.
SESSION_THREADS = 32


# Seconds; runs span a few ms (a trivial verifier) to minutes (a suite's slowest).
_LATENCY_BOUNDARIES = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]


class _Metrics:
    """The actor's Ray metrics, tagged with its pool. Each run is noted here and handed to Ray
    once its chunk is done (:meth:`flush`, from the chunk's own thread): a Ray metric call costs
    microseconds, as much as the rest of a fast run's bookkeeping, and more when the threads
    running the runs contend for it. Counts go as one call per outcome."""

    def __init__(self, pool: str) -> None:
        from ray.util import metrics

        self.tags = {"pool": pool}
        self._lock = threading.Lock()
        self._counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self._times: list[tuple[float, float]] = []
        self.runs = metrics.Counter(
            "deepgym_runs", "Runs scored, by outcome (passed, failed, no_verdict, cancelled).",
            tag_keys=("pool", "outcome"))
        self.no_verdict = metrics.Counter(
            "deepgym_no_verdict", "Runs without a verdict, by error type.",
            tag_keys=("pool", "error_type"))
        self.latency = metrics.Histogram(
            "deepgym_run_seconds", "Time of one run in the sandbox.",
            boundaries=_LATENCY_BOUNDARIES, tag_keys=("pool",)).set_default_tags(self.tags)
        self.queue_wait = metrics.Histogram(
            "deepgym_queue_wait_seconds", "Time a run waited on its actor before it started.",
            boundaries=_LATENCY_BOUNDARIES, tag_keys=("pool",)).set_default_tags(self.tags)

    def record(self, result: RunResult, seconds: float, waited: float) -> None:
        outcome = "passed" if result.has_verdict and result.passed else (
            "failed" if result.has_verdict else "no_verdict")
        if result.error_type == contract.CANCELLED:  # given up by its caller: not an outage
            outcome = "cancelled"
        with self._lock:
            self._counts["outcome", outcome] += 1
            if outcome == "no_verdict":
                self._counts["error_type", result.error_type or "unknown"] += 1
            self._times.append((seconds, waited))

    def flush(self) -> None:
        """Hand what was noted so far to Ray."""
        with self._lock:
            counts, self._counts = self._counts, collections.Counter()
            times, self._times = self._times, []
        for (tag, value), n in counts.items():
            metric = self.runs if tag == "outcome" else self.no_verdict
            metric.inc(n, {**self.tags, tag: value})
        for seconds, waited in times:
            self.latency.observe(seconds)
            self.queue_wait.observe(waited)


@ray.remote(concurrency_groups={"control": 2, "sessions": SESSION_THREADS}, max_restarts=-1,
            max_task_retries=0)
class VerifierActor:
    """Runs verifications for a pool; Ray restarts it when it dies, the pool retries its work.

    ``max_task_retries=0``: a run lost with its actor is retried by the pool on another actor,
    never silently re-run by Ray on the same one.
    """

    def __init__(self, scorer: Scorer, pool: str, index: int, actors: int, concurrency: int,
                 creator: str | None = None):
        self._scorer = scorer
        scorer.image_builder = image_builder_for_this_node()  # one build per hash per node
        self._manifest = {
            "pool": pool,
            "index": index,
            "actors": actors,
            "concurrency": concurrency,
            "creator": creator,  # the VerifierPool that made it (it owns the pool)
            "node_id": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "scorer": scorer.label,
        }
        take_node_niceness()  # not Ray's worker niceness: see pool.niceness
        # The lease workers, started next, inherit this thread's niceness.
        self._leases = Leases(concurrency, name=f"{pool}-{index}")
        self._envs: collections.OrderedDict[str, Environment] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._fetch_lock = threading.Lock()
        self._in_flight = 0
        self._max_in_flight = 0
        self._runs = 0
        self._no_verdict = 0
        self._withdrawn = 0  # queued runs of given-up calls, dropped before they started
        self._stopped = 0  # running runs of given-up calls, stopped
        self._metrics = _Metrics(pool)
        self._chunks = 0
        self._env_fetches = 0
        self._run_log: collections.deque[tuple[float, float]] = collections.deque(
            maxlen=RUN_LOG_SIZE
        )
        self._sessions = SessionHost(lambda: self._scorer.provider)

    @ray.method(concurrency_group="control")
    def manifest(self) -> dict[str, Any]:
        """The pool shape this actor was created with, and where it runs."""
        return dict(self._manifest)

    @ray.method(concurrency_group="control")
    def ping(self) -> str:
        return self._manifest["node_id"]

    @ray.method(concurrency_group="control")
    def stats(self, run_log: bool = False) -> dict[str, Any]:
        """Counters since this actor (re)started; ``run_log`` adds (start, end) monotonic times."""
        with self._lock:
            out = dict(
                self._manifest,
                in_flight=self._in_flight,
                max_in_flight=self._max_in_flight,
                runs=self._runs,
                no_verdict=self._no_verdict,
                withdrawn=self._withdrawn,
                stopped=self._stopped,
                chunks=self._chunks,
                env_fetches=self._env_fetches,
                cached_envs=len(self._envs),
                leases=self._leases.active(),
                **self._sessions.stats(),
            )
            if run_log:
                out["run_log"] = list(self._run_log)
        return out

    def run_chunk(
        self,
        envs: list[list[Any]],
        jobs: list[list[Any]],
        lease: list[Any] | None = None,
    ) -> bytes:
        """Run ``jobs`` ([env slot, code]) against ``envs`` ([key, [ref]]); returns the
        RunResults in job order, pickled.

        The references arrive wrapped in a list so Ray passes them through unresolved: the
        environment is fetched only on a cache miss. ``lease`` is ``[key, slots]``: at most
        ``slots`` runs of all the chunks sent with that key run at once here, the others wait
        for one of them to end. It lets a caller send its next chunk before the last one is
        back (no round trip between a run's end and the next start) without ever running more
        than its share of its ``max_parallel``.

        Arguments come as lists and the results as one pickle: Ray's serializer handles lists,
        strings and bytes itself, but calls back into Python for every tuple or model in them
        (several microseconds each, as much again as the rest of a run's dispatch).
        """
        arrived = time.monotonic()
        with self._lock:
            self._chunks += 1
        resolved = [self._environment(key, refs) for key, refs in envs]
        run = functools.partial(self._run_one, arrived=arrived)
        key, slots = lease if lease is not None else (uuid.uuid4().hex, len(jobs))
        work = [(run, resolved[slot], code) for slot, code in jobs]
        try:
            results = self._leases.submit(key, slots, work).results()
        finally:
            self._metrics.flush()
        return pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL)

    @ray.method(concurrency_group="sessions")
    def session(self, op: str, sid: str, *args: Any) -> Any:
        """One call on an agent episode held here (``open``, ``step``, ``score``,
        ``abandon``; see :class:`~deepgym_ray.pool.session_host.SessionHost`)."""
        if op not in ("open", "step", "score", "abandon"):
            raise ValueError(f"unknown session call {op!r}")
        return getattr(self._sessions, op)(sid, *args)

    @ray.method(concurrency_group="control")
    def cancel(self, lease_prefix: str) -> int:
        """Give up on every lease whose key starts with ``lease_prefix`` (a map call that was
        given up): withdraw its queued runs and stop its running ones (their processes are
        killed as at the deadline). Returns how many runs that took back."""
        withdrawn, stopped = self._leases.cancel(lease_prefix)
        with self._lock:
            self._withdrawn += withdrawn
            self._stopped += stopped
        return withdrawn + stopped

    @ray.method(concurrency_group="control")
    def close(self) -> str | None:
        """Stop for good, before the pool kills this actor: give up every run here (queued
        ones dropped, running ones stopped, as for a given-up map; chunks that come later are
        dropped), wait for them to end, and close the provider, which deletes every sandbox
        it made before it returns (a kill alone runs no close: the sandboxes would outlive
        the actor). Returns None, or what the provider could not delete."""
        self._leases.cancel("")  # every lease key starts with ""
        self._sessions.close()
        ended = self._leases.wait_idle(CLOSE_RUNS_WAIT)
        try:
            self._scorer.close()  # no run is left to build another provider after it
        except Exception as exc:  # noqa: BLE001 - said to the caller, who names this actor
            return f"{type(exc).__name__}: {exc}"
        return None if ended else f"runs still going after {CLOSE_RUNS_WAIT:.0f}s"

    def _environment(self, key: str, refs: list[ray.ObjectRef]) -> Environment:
        with self._lock:
            env = self._envs.get(key)
            if env is not None:
                self._envs.move_to_end(key)
                return env
        # One fetch per key, even when several chunks miss at once; runs are not held up.
        with self._fetch_lock:
            with self._lock:
                env = self._envs.get(key)
            if env is not None:
                return env
            env = ray.get(refs[0])
            with self._lock:
                self._env_fetches += 1
                self._envs[key] = env
                while len(self._envs) > ENV_CACHE_SIZE:
                    self._envs.popitem(last=False)
        return env

    def _run_one(self, env: Environment, code: str, cancel: CancelSignal | None = None, *,
                 arrived: float | None = None) -> RunResult:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        start = time.monotonic()
        try:
            result = self._scorer.run_safe(env, code, cancel)
            if not isinstance(result, RunResult):
                raise TypeError(f"run_safe returned {type(result).__name__}, not a RunResult")
        except Exception as exc:  # run_safe promises never to raise; if it does: no verdict
            result = RunResult(
                error_type=error_type_for(exc),  # never a model fault
                details=f"the scorer raised {type(exc).__name__}: {exc}",
                env_name=env.name,
            )
        finally:
            end = time.monotonic()
            with self._lock:
                self._in_flight -= 1
                self._runs += 1
                self._run_log.append((start, end))
        with self._lock:
            self._no_verdict += not result.has_verdict and result.error_type != contract.CANCELLED
        self._metrics.record(result, end - start, start - (arrived or start))
        if result.env_name is None:
            result = result.model_copy(update={"env_name": env.name})
        return result
