"""Joining a running Ray cluster, or starting the embedded local one, on first use.

The pool calls :func:`ensure_ray` before it touches Ray, so nothing starts at import time.
With ``RAY_ADDRESS`` set (as ``ray job submit`` does) or a cluster started by ``ray start`` on
this machine, it joins that cluster; otherwise it starts a local instance bound to 127.0.0.1
with no dashboard.

Example:
    >>> from deepgym_ray.cluster import ensure_ray   # doctest: +SKIP
    >>> ensure_ray().is_initialized()                 # doctest: +SKIP
    True
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

__all__ = ["ensure_ray"]

logger = logging.getLogger(__name__)

_init_lock = threading.Lock()


def _existing_cluster(address: str | None) -> str | None:
    """The address of the cluster to join, or None when a local instance should start."""
    if address and address.startswith("ray://"):
        return address  # Ray Client: ray.init handles it, nothing to look up
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # pragma: no cover - a Ray without the helper: let ray.init decide
        return address
    # Looks at RAY_ADDRESS and at the cluster a `ray start` on this machine recorded.
    return canonicalize_bootstrap_address(address)


def ensure_ray(address: str | None = None, **init_kwargs: Any):
    """Connect this process to Ray once and return the ``ray`` module.

    ``address`` overrides ``RAY_ADDRESS``. ``init_kwargs`` go to ``ray.init`` when this call
    starts a local instance (for example ``num_cpus``). Safe to call from many threads.
    """
    import ray

    if ray.is_initialized():
        return ray
    with _init_lock:
        if ray.is_initialized():
            return ray
        target = _existing_cluster(address or os.environ.get("RAY_ADDRESS") or None)
        if target is not None:
            logger.info("joining the Ray cluster at %s", target)
            ray.init(address=target, ignore_reinit_error=True)
        else:
            logger.info("no Ray cluster found: starting a local one on 127.0.0.1")
            options: dict[str, Any] = {
                "include_dashboard": False,
                "_node_ip_address": "127.0.0.1",
                "ignore_reinit_error": True,
            }
            options.update(init_kwargs)
            ray.init(**options)
    return ray
