"""Seeing and stopping the verifier pools of a running cluster, as an operator would.

Pools are detached: they outlive the drivers that made them, until someone stops them. Here
they are found by their actors' names (``{pool}-{scorer}-{index}``, see
:mod:`deepgym_ray.pool`) in the cluster's named-actor table; nothing is started, and with no
cluster running there is nothing to see.

Example:
    from deepgym_ray.pool.admin import pool_status, shutdown_pools
    [(p.name, p.provider, p.actors) for p in pool_status()]
    # [('deepgym', 'local', 2)]
    shutdown_pools("deepgym")
    # 2
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from deepgym_ray.pool.connect import ClusterConnectionError, cluster_address, ensure_ray

__all__ = ["PoolStatus", "pool_status", "shutdown_pools"]

logger = logging.getLogger(__name__)

_ACTOR_NAME = re.compile(r"^(?P<pool>.+)-(?P<scorer>[0-9a-f]{8})-(?P<index>\d+)$")
STATS_TIMEOUT = 10.0


@dataclass
class PoolStatus:
    """One pool as the cluster sees it now."""

    name: str
    namespace: str
    scorer: str
    provider: str = "?"
    actors: int = 0
    alive: int = 0
    nodes: dict[str, int] = field(default_factory=dict)  # node id -> actors there
    in_flight: int = 0
    runs: int = 0
    no_verdict: int = 0
    restarts: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _join() -> Any:
    """The ray module, connected to the running cluster; ClusterConnectionError if none."""
    import ray

    if ray.is_initialized():
        return ray
    if cluster_address() is None:
        raise ClusterConnectionError("no Ray cluster is running here (set RAY_ADDRESS, or "
                                     "start one with `ray start --head`); no pool to show")
    return ensure_ray()


def _pool_actors(ray: Any, namespace: str | None) -> dict[tuple[str, str, str], list[dict]]:
    from ray.util import list_named_actors

    found: dict[tuple[str, str, str], list[dict]] = {}
    for entry in list_named_actors(all_namespaces=True):
        match = _ACTOR_NAME.match(entry["name"])
        if match is None or (namespace is not None and entry["namespace"] != namespace):
            continue
        key = (entry["namespace"], match["pool"], match["scorer"])
        found.setdefault(key, []).append(entry)
    return found


def _restarts(ray: Any, handle: Any) -> int:
    try:  # the GCS actor table knows; a private but long-standing API
        from ray._private.state import actors

        return int(actors(handle._actor_id.hex()).get("NumRestarts", 0))
    except Exception as exc:
        logger.debug("restart count of %s: %s", handle, exc)
        return 0


def pool_status(namespace: str | None = None) -> list[PoolStatus]:
    """Every verifier pool of the running cluster (``namespace``: only that one's)."""
    ray = _join()
    out = []
    for (ns, name, scorer), entries in sorted(_pool_actors(ray, namespace).items()):
        status = PoolStatus(name=name, namespace=ns, scorer=scorer, actors=len(entries))
        nodes: Counter[str] = Counter()
        handles = [ray.get_actor(e["name"], namespace=ns) for e in entries]
        refs = [h.stats.remote() for h in handles]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=STATS_TIMEOUT)
        for handle, ref in zip(handles, refs, strict=True):
            status.restarts += _restarts(ray, handle)
            if ref not in ready:
                continue
            try:
                stats = ray.get(ref)
            except Exception:  # dead or restarting: counted as not alive
                continue
            status.alive += 1
            nodes[stats["node_id"][:12]] += 1
            status.in_flight += stats["in_flight"]
            status.runs += stats["runs"]
            status.no_verdict += stats.get("no_verdict", 0)
            status.provider = json.loads(stats["scorer"]).get("mode") or "?"
        status.nodes = dict(nodes)
        out.append(status)
    return out


def shutdown_pools(name: str | None = None, namespace: str | None = None) -> int:
    """Stop the actors of pool ``name`` (every pool when None); returns how many. Each actor
    closes its provider (deleting every sandbox it made) before it is killed; an actor that
    could not delete all of them is named in a warning."""
    from deepgym_ray.pool.stopping import stop_actors

    ray = _join()
    handles, names = [], []
    for (ns, pool, _), entries in _pool_actors(ray, namespace).items():
        if name is not None and pool != name:
            continue
        for entry in entries:
            try:
                handles.append(ray.get_actor(entry["name"], namespace=ns))
                names.append(entry["name"])
            except ValueError:  # gone meanwhile
                continue
    for problem in stop_actors(ray, handles, names):
        logger.warning("pool shutdown: %s", problem)
    return len(handles)
