"""A held batch on a real pool of real local sandboxes, and the checks every infrastructure
fault must pass: exactly one result per input, no false 0, no false pass."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from gated import GatedFactory

from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig, PoolConfig
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.pool import VerifierPool

VERIFIER = """
from deepgym_solution import load_solution


def verify(solution_path, test_cases_path=None):
    try:
        got = load_solution(solution_path).answer()
    except Exception as exc:
        return {"score": 0.0, "details": repr(exc)[:300]}
    return {"score": 1.0 if got == 42 else 0.0, "details": repr(got)[:300]}
"""
ENV = Environment(name="faults", verifier_code=VERIFIER, timeout=30, case_timeout=20)
# Each answer is in its call for a moment, so a fault can land while the solution is in play.
RIGHT = "import time\ndef answer():\n    time.sleep(0.5)\n    return 42\n"
WRONG = "import time\ndef answer():\n    time.sleep(0.5)\n    return 41\n"
SLOTS = 4


@dataclass
class HeldBatch:
    """What a held batch produced."""

    answers: list[str]
    results: list[RunResult] = field(default_factory=list)
    stats: Any = None
    calls: list[int] = field(default_factory=list)
    error: BaseException | None = None


def answers(count: int = 8) -> list[str]:
    return [RIGHT if i % 2 == 0 else WRONG for i in range(count)]


def make_pool(factory: GatedFactory, actors: int = 2, retries: int = 2) -> VerifierPool:
    config = PoolConfig(name=f"faults-{uuid.uuid4().hex[:8]}", actors=actors,
                        actor_concurrency=SLOTS // actors if actors <= SLOTS else 1,
                        num_cpus_per_actor=0, max_retries=retries)
    client = DeepGym(config=DeepGymConfig(mode="local", backend="ray", pool=config),
                     provider=factory)
    return VerifierPool(client)


def run_held(ray, pool: VerifierPool, gate: Any, fault, count: int = 8) -> HeldBatch:
    """Start a batch, wait until ``SLOTS`` runs are held at the gate, call ``fault()``, open
    the gate, and collect every result."""
    held = HeldBatch(answers(count))

    def consume():
        try:
            run = pool.map(ENV, held.answers, max_parallel=SLOTS,
                           on_result=lambda i, r: held.calls.append(i))
            held.results = list(run)
            held.stats = run.stats
        except BaseException as exc:  # reported by the test, not lost in a thread
            held.error = exc

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    ray.get(gate.wait_arrivals.remote(SLOTS), timeout=300)
    fault()
    ray.get(gate.open.remote())
    thread.join(600)
    assert not thread.is_alive(), "the batch never finished"
    assert held.error is None, repr(held.error)
    return held


def check_contract(held: HeldBatch, right_must_pass: bool = True) -> None:
    """Exactly one result per input; a right answer is never a judged 0 (and, where the
    fault could be retried, it passes); a wrong answer never passes."""
    assert len(held.results) == len(held.answers)
    assert sorted(held.calls) == list(range(len(held.answers)))  # one result each, no more
    for i, (answer, result) in enumerate(zip(held.answers, held.results, strict=True)):
        if answer == RIGHT:
            assert not (result.has_verdict and result.score == 0.0), (i, "false 0", result)
            if right_must_pass:
                assert result.has_verdict and result.score == 1.0, (i, result)
        else:
            assert not result.passed and result.score == 0.0, (i, "false pass", result)
