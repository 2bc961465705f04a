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

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
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


# What ray.init says on every start, by the logger that says it. Useful once to someone reading
# logs, noise on a console (where it lands inside the progress bar): passed on to our own logger
# at INFO (-v shows it), not printed by Ray's handler.
_RAY_START_CHATTER = {
    "ray._private.authentication.authentication_token_setup": "Token authentication is",
    "ray._private.worker": ("Started a local Ray instance", "Connected to Ray cluster"),
}


class _ToOurLog(logging.Filter):
    def __init__(self, prefixes: str | tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith(self.prefixes):
            return True
        logger.info("ray: %s", message)
        return False


@contextlib.contextmanager
def _ray_start_chatter_to_our_log() -> Iterator[None]:
    filters = [(logging.getLogger(name), _ToOurLog(prefixes))
               for name, prefixes in _RAY_START_CHATTER.items()]
    for ray_logger, chatter in filters:
        ray_logger.addFilter(chatter)
    try:
        yield
    finally:
        for ray_logger, chatter in filters:
            ray_logger.removeFilter(chatter)


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
            with _ray_start_chatter_to_our_log():
                ray.init(address=target, ignore_reinit_error=True)
        else:
            logger.info("no Ray cluster found: starting a local one on 127.0.0.1")
            options: dict[str, Any] = {
                "include_dashboard": False,
                "_node_ip_address": "127.0.0.1",
                "ignore_reinit_error": True,
            }
            options.update(init_kwargs)
            with _ray_start_chatter_to_our_log():
                ray.init(**options)
    return ray
