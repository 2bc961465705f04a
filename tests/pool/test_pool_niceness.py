"""A pool's runs go at the node's niceness, not at Ray's worker niceness (15): the runner and
the solution process, forked by the actor's fork server and zygote, both run at the raylet's."""

from __future__ import annotations

import os
import uuid

from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig, PoolConfig
from deepgym_ray.models import Environment
from deepgym_ray.pool import VerifierPool

VERIFIER = '''
import os
from deepgym_solution import load_solution

def verify(solution_path, test_cases_path=None):
    theirs = load_solution(solution_path).niceness()
    return {"score": 1.0, "details": "%d %d" % (os.getpriority(os.PRIO_PROCESS, 0), theirs)}
'''

SOLUTION = "import os\n\ndef niceness():\n    return os.getpriority(os.PRIO_PROCESS, 0)\n"


def test_the_runner_and_the_solution_run_at_the_nodes_niceness(ray_local):
    node = os.getpriority(os.PRIO_PROCESS, 0)  # ray.init here started the raylet as we are
    assert node < 15  # else Ray's worker niceness could not be told apart
    config = DeepGymConfig(mode="local", backend="ray", pool=PoolConfig(
        name=f"nice-{uuid.uuid4().hex[:8]}", actors=1, actor_concurrency=2,
        num_cpus_per_actor=0))
    pool = VerifierPool(DeepGym(config=config))
    try:
        env = Environment(name="niceness", verifier_code=VERIFIER, timeout=30)
        results = list(pool.map(env, [SOLUTION] * 3, max_parallel=2, code=True))
    finally:
        pool.shutdown()
    assert [r.score for r in results] == [1.0] * 3, [r.details for r in results]
    assert {r.details for r in results} == {f"{node} {node}"}
