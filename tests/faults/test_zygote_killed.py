"""The solution zygote, or the runner fork server, killed while a run's solution is up."""

from __future__ import annotations

import pytest
from gated import GatedFactory
from held import ENV, RIGHT, check_contract, make_pool, run_held


@pytest.mark.parametrize("fault", ["zygote", "fork_server"])
def test_warm_process_killed_mid_run(ray_local, gate, pools, fault):
    name, handle = gate
    pool = make_pool(GatedFactory(name, fault=fault))
    pools.append(pool)
    held = run_held(ray_local, pool, handle, lambda: None)
    # The run that lost its zygote or fork server was not the answer's doing: retried, it is
    # judged like every other (a right answer passes, a wrong one is a 0).
    check_contract(held)
    # The fault really happened (one run saw it), and the pool still works afterwards.
    assert not ray_local.get(handle.take_ticket.remote())
    again = pool.map(ENV, [RIGHT] * 2, max_parallel=2)
    assert all(r.has_verdict and r.score == 1.0 for r in again)
