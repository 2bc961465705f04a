"""Fixtures of the infrastructure fault tests (the helpers are in held.py)."""

from __future__ import annotations

import uuid

import pytest
from gated import make_gate

from deepgym_ray.pool import VerifierPool


@pytest.fixture
def gate(ray_local):
    """A fresh gate (its name, for the providers, and its handle, for the test)."""
    name = f"gate-{uuid.uuid4().hex[:8]}"
    handle = make_gate(name)
    yield name, handle
    ray_local.kill(handle)


@pytest.fixture
def pools():
    """Pools a test makes, shut down afterwards (their actors are detached)."""
    made: list[VerifierPool] = []
    yield made
    for pool in made:
        pool.shutdown()
