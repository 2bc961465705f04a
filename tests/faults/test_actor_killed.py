"""A pool actor killed (ray.kill) while the batch's runs are in flight on it."""

from __future__ import annotations

import pytest
from gated import GatedFactory
from held import check_contract, make_pool, run_held


@pytest.mark.parametrize("no_restart", [False, True])
def test_actor_killed_mid_batch(ray_local, gate, pools, no_restart):
    name, handle = gate
    pool = make_pool(GatedFactory(name))
    pools.append(pool)
    victim = pool.actors[0]
    held = run_held(ray_local, pool, handle,
                    lambda: ray_local.kill(victim, no_restart=no_restart))
    check_contract(held)
    assert held.stats.actor_failures >= 1 and held.stats.retries >= 1
