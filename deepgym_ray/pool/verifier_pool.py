"""VerifierPool: a named, cluster-wide pool of verifier actors shared by every driver.

The actors are named ``{pool}-{scorer}-{i}`` in the pool's namespace and detached, so every
process of the cluster that asks for the pool of the same name with the same scoring setup gets
the same actors (eight trainer ranks on a node share one pool), whoever created them. ``scorer``
is a short digest of what scores (the sandbox mode, its options, the provider): a client that
asks for another sandbox under the same pool name gets its own actors, never another provider's.
Actor 0 records the pool's shape; a driver that finds the pool already there adopts that shape.
The actors are spread over the nodes. :mod:`deepgym_ray.pool.admin` lists and stops pools.

Lifetime. On a cluster that outlives this process (``ray start``, ``ray job submit``) pools
are detached by design: they outlive the drivers that made them, shared by all, until
``deepgym-ray pool shutdown`` (``admin``) stops them. On the embedded Ray instance this process
started, the pool is this process's (if it made the actors: actor 0 records the token of the
``VerifierPool`` that made it), and ``DeepGym.close`` of the last client here that scored on it
stops it rather than leave it to the instance's end: each actor closes its provider, deleting
every container or sandbox it made, before it is killed, and ``close`` returns after that (or
raises naming what is left). Stopping is always that way (``shutdown``, ``shutdown_pools``): a
kill alone would leave a Docker actor's containers behind. A client never closed (a trainer's
reward function) leaves its pool to the end of the Ray instance.

Example:
    from deepgym_ray import DeepGym, VerifierPool
    pool = VerifierPool(DeepGym("local"))
    [r.reward for r in pool.map(env, answers, max_parallel=64)]
    # [1.0, 0.0, None]
"""

from __future__ import annotations

import logging
import threading
import uuid
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from deepgym_ray.config import PoolConfig, check_max_parallel
from deepgym_ray.exceptions import SandboxError
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.pool.connect import ensure_ray, started_here
from deepgym_ray.scoring import Scorer

if TYPE_CHECKING:
    from deepgym_ray.pool.pooled_session import PooledSession

__all__ = ["VerifierPool", "default_shape", "ensure_ray", "get_pool", "release_pools"]

logger = logging.getLogger(__name__)


def default_shape(mode: str, cluster_cpus: float, max_parallel: int = 32) -> tuple[int, int]:
    """(actors, runs per actor) for a cluster with ``cluster_cpus`` CPUs.

    Local and Docker sandboxes burn the actor's node's CPUs, so the pool has one actor per
    two CPUs. A Docker actor runs two at once (a warm container each). A local run is a few
    forked processes, which wait part of their time (process starts, cgroup moves, pipes):
    the local pool has as many slots as the client's usual ``max_parallel``, as the thread
    backend runs, two per actor at least (on a busy 2-CPU node, 2 slots cost 22 to 31 ms a
    run against 16 to 18 ms with 32: BENCHMARKS.md, issue 15). A remote provider (its class
    says ``io_bound``, as Daytona's does) mostly waits on the network, so its pool has one
    light actor per CPU (two at least) and enough threads for the client's ``max_parallel``
    runs to be in flight at once (16 per actor at least): a latency-bound provider with
    fewer slots than ``max_parallel`` runs slower by that ratio.

    >>> default_shape("daytona", 2, max_parallel=200)
    (2, 100)
    >>> default_shape("local", 8), default_shape("local", 2), default_shape("docker", 8)
    ((4, 8), (1, 32), (4, 2))
    """
    cpus = max(1, int(cluster_cpus))
    from deepgym_ray.sandboxes import is_io_bound, resolve_mode

    try:
        mode = resolve_mode(mode)  # 'auto' (the CLI's default) sizes as what it stands for
    except ValueError:
        pass  # an unknown mode: the provider reports it when it is built
    if is_io_bound(mode):
        actors = max(2, cpus)
        return actors, max(16, -(-max(1, max_parallel) // actors))
    actors = max(1, cpus // 2)
    if mode == "local":
        return actors, max(2, -(-max(1, max_parallel) // actors))
    return actors, 2


def scoring_setup(source: Any = None, config: PoolConfig | None = None
                  ) -> tuple[Scorer, PoolConfig, int]:
    """(scorer, pool config, usual map width) of a DeepGym client, a Scorer, or None (the
    default: ``mode='auto'``, resolved here on the driver so every actor gets the same mode)."""
    if source is None:
        from deepgym_ray.sandboxes import resolve_mode

        return Scorer(resolve_mode("auto")), config or PoolConfig(), 32
    if isinstance(source, Scorer):
        return source, config or PoolConfig(), 32
    scorer, settings = getattr(source, "scorer", None), getattr(source, "config", None)
    if not isinstance(scorer, Scorer) or settings is None:
        raise TypeError(f"a pool scores with a DeepGym client or a Scorer, got "
                        f"{type(source).__name__}")
    return scorer, config or settings.pool, settings.max_parallel


class VerifierPool:
    """A shared pool of :class:`~deepgym_ray.pool.actor.VerifierActor` s; see the module docstring.

    ``scorer`` is what scores: a DeepGym client (its scorer and pool settings) or a
    :class:`~deepgym_ray.scoring.Scorer`; each actor holds a copy of the scorer (default:
    ``mode='auto'``). ``config`` overrides the client's ``config.pool``. Creating a pool joins
    or starts Ray, and waits up to ``start_timeout`` for the first actor and ``ready_timeout``
    for the others.
    """

    def __init__(
        self,
        scorer: Any = None,
        *,
        config: PoolConfig | None = None,
        address: str | None = None,
        start_timeout: float = 300.0,
        ready_timeout: float = 60.0,
    ) -> None:
        self._ray = ensure_ray(address)
        # the usual map width: a remote provider's default shape makes room for it
        self.scorer, self.config, self._max_parallel = scoring_setup(scorer, config)
        self.mode = self.scorer.mode
        self.name = self.config.name
        self.namespace = self.config.namespace
        self._start_timeout = start_timeout
        self._ready_timeout = ready_timeout
        self._lock = threading.Lock()
        self.actors: list[Any] = []
        self._ready: set[int] = set()  # actors that answered lately (map calls skip their ping)
        self._token = uuid.uuid4().hex  # given to the actors this pool creates
        self.owned = False  # its actors and Ray are this process's (see the module docstring)
        self._users: weakref.WeakSet[Any] = weakref.WeakSet()  # clients scoring on it
        self._sessions_open: dict[int, int] = {}  # actor index -> episodes open from here
        self._connect()

    # -- actors -------------------------------------------------------------------------------

    def _connect(self) -> None:
        ray = self._ray
        cpus = ray.cluster_resources().get("CPU", 1)
        actors, concurrency = default_shape(self.mode, cpus, self._max_parallel)
        actors = self.config.actors or actors
        concurrency = self.config.actor_concurrency or concurrency
        needed = actors * self.config.num_cpus_per_actor
        if needed > cpus:
            logger.warning(
                "pool %r wants %d actors x %.2f CPUs = %.1f CPUs but the cluster has %.1f; "
                "the actors that do not fit wait, and the pool runs on the others",
                self.name, actors, self.config.num_cpus_per_actor, needed, cpus)
        first = self._get_or_create(0, actors, concurrency)
        try:
            manifest = ray.get(first.manifest.remote(), timeout=self._start_timeout)
        except ray.exceptions.GetTimeoutError:
            raise RuntimeError(
                f"verifier actor {self.actor_name(0)} did not start within "
                f"{self._start_timeout:.0f}s: "
                f"does the cluster have {self.config.num_cpus_per_actor} CPU free for it?"
            ) from None
        # Whoever created the pool first decided its shape, and owns it; everyone adopts it.
        self.size, self.concurrency = manifest["actors"], manifest["concurrency"]
        self.owned = manifest.get("creator") == self._token and started_here()
        if (self.size, self.concurrency) != (actors, concurrency):
            logger.info("pool %r already exists with %d actors x %d; using it as it is",
                        self.name, self.size, self.concurrency)
        self.actors = [first] + [
            self._get_or_create(i, self.size, self.concurrency) for i in range(1, self.size)
        ]
        # Let the others start too, so the first batch spreads over every node; an actor that
        # cannot start yet (no room in the cluster) is left behind, and map() routes around it.
        pending = [actor.ping.remote() for actor in self.actors[1:]]
        ready, late = ray.wait(pending, num_returns=len(pending), timeout=self._ready_timeout)
        ready_set = set(ready)
        self._ready = {0} | {i for i, ref in enumerate(pending, 1) if ref in ready_set}
        if late:
            logger.warning("pool %r: %d of %d actors are not up after %.0fs; working without "
                           "them until they are", self.name, len(late), self.size,
                           self._ready_timeout)

    def actor_name(self, index: int) -> str:
        """The Ray name of actor ``index`` of this pool (in ``self.namespace``)."""
        return f"{self.name}-{self.scorer.key}-{index}"

    def _get_or_create(self, index: int, actors: int, concurrency: int) -> Any:
        from deepgym_ray.pool.actor import VerifierActor

        # get_if_exists settles the race of two drivers creating the same actor at once.
        return VerifierActor.options(
            name=self.actor_name(index),
            namespace=self.namespace,
            get_if_exists=True,
            lifetime="detached",
            max_concurrency=concurrency,
            num_cpus=self.config.num_cpus_per_actor,
            scheduling_strategy="SPREAD",
        ).remote(self.scorer, self.name, index, actors, concurrency, creator=self._token)

    def revive(self, index: int, stale: Any) -> Any:
        """A handle on actor ``index`` after it died for good (a new one if nobody made it)."""
        with self._lock:
            if self.actors[index] is stale:
                logger.warning("verifier actor %s is gone; starting a new one",
                               self.actor_name(index))
                self.actors[index] = self._get_or_create(index, self.size, self.concurrency)
                self._ready.discard(index)
            return self.actors[index]

    def known_ready(self) -> set[int]:
        """Indexes of the actors that answered lately (a hint: one may have died since)."""
        with self._lock:
            return set(self._ready)

    def mark_ready(self, index: int, ready: bool) -> None:
        """Record that actor ``index`` answered (or failed), for the next map calls."""
        with self._lock:
            if ready:
                self._ready.add(index)
            else:
                self._ready.discard(index)

    # -- work ---------------------------------------------------------------------------------

    def map(
        self,
        env: Environment | Sequence[Environment] | Iterable[Environment],
        items: Iterable[Any],
        max_parallel: int = 32,
        *,
        on_result: Callable[[int, RunResult], Any] | None = None,
        chunk_size: int | None = None,
        max_retries: int | None = None,
        code: bool = False,
    ):
        """Score ``items`` and yield one RunResult per item, in input order.

        ``items`` are model outputs (completions, conversations): the code is taken out of each
        here, on the driver, once, and only the code is sent. ``code=True``: they are code
        already, sent as they are.

        ``env`` is one Environment for all items, or one per item (a list or an iterable).
        At most ``max_parallel`` runs of this call are in flight. ``on_result(index, result)``
        is called once per item as soon as its result is final (completion order), for
        progress bars. Returns a :class:`~deepgym_ray.pool.ordered_map.MapRun`; its ``stats`` count
        retries and actor failures.
        """
        from deepgym_ray.pool.ordered_map import MapRun

        check_max_parallel(max_parallel)
        if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        if not isinstance(env, Environment):
            if isinstance(env, (str, bytes)) or not isinstance(env, Iterable):
                raise TypeError("env must be an Environment or one Environment per item, "
                                f"got {type(env).__name__}")
            if isinstance(env, Sequence) and isinstance(items, Sequence) \
                    and len(env) != len(items):
                raise ValueError(f"got {len(env)} environments for {len(items)} items")
        return MapRun(
            self, env, items,
            max_parallel=max_parallel,
            max_retries=self.config.max_retries if max_retries is None else max_retries,
            on_result=on_result,
            chunk_size=chunk_size,
            code=code,
        )

    def session(self, env: Environment, idle_timeout: float | None = None) -> PooledSession:
        """An agent episode of the multi-turn ``env`` held by one actor from its start to
        its end (see :class:`~deepgym_ray.pool.pooled_session.PooledSession`): the ready
        actor this process has given the fewest open sessions. ``idle_timeout``: seconds
        without a call before the actor reaps it (no verdict)."""
        from deepgym_ray.pool.pooled_session import PooledSession
        from deepgym_ray.pool.session_host import SESSION_IDLE_TIMEOUT

        return PooledSession(self, self.session_actor(), env,
                             idle_timeout or SESSION_IDLE_TIMEOUT)

    def session_actor(self, avoid: int | None = None) -> int:
        """The actor for a new session (counted as open on it): the ready one this process
        has given the fewest; ``avoid``, one that just failed to open one, is marked not ready."""
        from deepgym_ray.pool.pooled_session import pick_actor

        with self._lock:
            if avoid is not None:
                self._ready.discard(avoid)
            index = pick_actor(self._sessions_open, self._ready, self.size)
            self._sessions_open[index] = self._sessions_open.get(index, 0) + 1
        return index

    def session_ended(self, index: int) -> None:
        """A session of actor ``index`` has ended (its count of open sessions drops)."""
        with self._lock:
            self._sessions_open[index] = max(0, self._sessions_open.get(index, 0) - 1)

    def stats(self, run_log: bool = False) -> list[dict[str, Any]]:
        """Every live actor's counters (see ``VerifierActor.stats``); dead ones are left out."""
        ray = self._ray
        out = []
        for actor in list(self.actors):
            try:
                out.append(ray.get(actor.stats.remote(run_log), timeout=60))
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                continue
        return out

    def use(self, client: Any) -> None:
        """Note that ``client`` (a DeepGym) scores on this pool, until :meth:`release`."""
        with self._lock:
            self._users.add(client)

    def release(self, client: Any) -> None:
        """``client`` is closed: when it was the last of this process's clients on a pool
        this process owns, stop the pool (see the module docstring and :meth:`shutdown`)."""
        with self._lock:
            self._users.discard(client)
            last = not self._users and bool(self.actors)
        if last and self.owned:
            self.shutdown()

    def shutdown(self) -> None:
        """Stop the pool's actors, for every driver that uses them: each closes its provider
        first (every container or sandbox it made deleted), then it is killed. Returns once
        that is done; raises SandboxError naming the actors that could not delete all theirs
        (an actor already dead has nothing to close: what it left is its provider's sweep's)."""
        from deepgym_ray.pool.stopping import stop_actors

        with self._lock:
            actors, self.actors = self.actors, []
            self._ready = set()
        _POOLS.pop(self._cache_key(), None)
        names = [self.actor_name(i) for i in range(len(actors))]
        problems = stop_actors(self._ray, actors, names)
        if problems:
            raise SandboxError(f"pool {self.name!r} stopped, but not everything its actors "
                               f"made is deleted: {'; '.join(problems)}")

    def _cache_key(self) -> tuple[str, str, str, str, str]:
        return (self.namespace, self.name, self.scorer.key, *_ray_session(self._ray))

    def __repr__(self) -> str:
        return (f"VerifierPool(name={self.name!r}, namespace={self.namespace!r}, "
                f"actors={len(self.actors)}, concurrency={getattr(self, 'concurrency', None)})")


_POOLS: dict[tuple[str, str, str, str, str], VerifierPool] = {}


def _ray_session(ray: Any) -> tuple[str, str]:
    """Which Ray this process is connected to, and as which job. The job id alone repeats
    (every new local instance starts at 01000000): after ``ray.shutdown()`` and a new
    ``ray.init()``, a pool of the old instance, its actors gone, must not be found again."""
    context = ray.get_runtime_context()
    return context.gcs_address, context.get_job_id()
_POOLS_LOCK = threading.Lock()


def release_pools(client: Any) -> None:
    """``client`` (a DeepGym) is closed: release it from every pool of this process it scored
    on (stopping those it was the last user of, when this process started them)."""
    with _POOLS_LOCK:
        pools = [pool for pool in _POOLS.values() if client in pool._users]
    for pool in pools:
        pool.release(client)


def get_pool(scorer: Any = None, config: PoolConfig | None = None) -> VerifierPool:
    """The process's VerifierPool for this scorer (a DeepGym client or a Scorer) and pool name,
    made on first use."""
    ray = ensure_ray()
    found, cfg, _ = scoring_setup(scorer, config)
    key = (cfg.namespace, cfg.name, found.key, *_ray_session(ray))
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None or not pool.actors:
            pool = _POOLS[key] = VerifierPool(scorer, config=cfg)
        return pool
