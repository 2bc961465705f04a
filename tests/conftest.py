"""Shared fixtures. One local Ray instance serves the whole test run (a start costs seconds)."""

from __future__ import annotations

import os

import pytest

# Nothing is ever fetched from a hub, and Ray stays on the loopback interface.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_NODE_IP_ADDRESS", "127.0.0.1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray instance on 127.0.0.1 with no dashboard, shut down after the run."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        yield ray
        return
    ray.init(
        address="local",  # never join a cluster someone else started on this machine
        num_cpus=4,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        namespace="deepgym_ray_tests",
        log_to_driver=False,
        runtime_env={"env_vars": {"RAY_NODE_IP_ADDRESS": "127.0.0.1"}},
    )
    try:
        yield ray
    finally:
        ray.shutdown()
