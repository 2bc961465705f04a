"""Giving up on a map stops its running runs on the actors, not only its queued ones.

Real Ray (the session's local instance) and the real local provider: each map holds runs whose
solution would sleep for ten minutes. Once they are running (their solution processes are up:
an event), the map is given up, by closing it or by Ctrl-C in the driver. The actors then kill
those runs as at their deadline: the test waits (generously) until the actors are idle and
asserts that nothing of the runs is left (processes, directories, cgroups), that each actor
counted them stopped, and that the next map on the same pool scores at once.
"""

from __future__ import annotations

import signal
import threading
import uuid

import pytest
from helpers.cancel import (
    QUICK,
    SLEEPER,
    SLEEPING_SOLUTION,
    LoggedFactory,
    RunLog,
    end_runs_of,
    gated,
    run_processes,
    solutions_running,
    wait_until,
)
from helpers.local_sandbox import leftovers

from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig, PoolConfig
from deepgym_ray.pool import VerifierPool

ACTORS, SLOTS = 2, 2  # four runs at once in the pool


@pytest.fixture
def pool(ray_local, tmp_path):
    import os

    if os.geteuid() != 0:
        pytest.skip("the runs' solution uids, which this test watches, need root")
    config = PoolConfig(name=f"cancel-{uuid.uuid4().hex[:8]}", actors=ACTORS,
                        actor_concurrency=SLOTS, num_cpus_per_actor=0, max_retries=0)
    client = DeepGym(config=DeepGymConfig(mode="local", pool=config),
                     provider=LoggedFactory(tmp_path / "runs.jsonl"))
    made = VerifierPool(client)
    assert all(r.passed for r in made.map(QUICK, ["x = 1"] * 4))  # warm: helpers up
    yield made
    made.shutdown()
    end_runs_of(RunLog(tmp_path / "runs.jsonl").uids())


def _idle(pool) -> bool:
    stats = pool.stats()
    return len(stats) == ACTORS and all(s["in_flight"] == 0 and s["leases"] == 0
                                        for s in stats)


def _check_nothing_left(pool, log: RunLog, sleepers: int) -> None:
    """Wait for the actors to be idle and every run's process gone; then check it all."""
    pids = [s["pid"] for s in pool.stats()]
    wait_until(lambda: _idle(pool) and not run_processes(pids)
               and not solutions_running(log.uids()), "the given-up runs stopped")
    stats = pool.stats()
    assert sum(s["stopped"] for s in stats) >= sleepers  # stopped, not finished
    assert sum(s["no_verdict"] for s in stats) == 0  # a stopped run is no outage either
    provider_view = type("Runs", (), {"runs": [
        {"uid": r["uid"], "dirs": r["dirs"], "cgroups": r["cgroups"]} for r in log.runs]})
    assert leftovers(provider_view) == []  # directories and cgroups of every run gone
    # The next map gets every slot at once and scores right.
    again = list(pool.map(QUICK, ["x = 1"] * (ACTORS * SLOTS * 2), max_parallel=ACTORS * SLOTS))
    assert [r.passed for r in again] == [True] * (ACTORS * SLOTS * 2)


def test_closing_a_map_stops_its_running_runs(pool, tmp_path):
    log = RunLog(tmp_path / "runs.jsonl")
    before = len(log.uids())
    gate = tmp_path / "gate"
    sleepers = ACTORS * SLOTS - 1
    # The first input passes once the gate opens; the test opens it when the three others
    # are running. More sleepers wait queued behind them.
    envs = [gated(gate)] + [SLEEPER] * (sleepers + 4)
    run = pool.map(envs, ["x = 1"] + [SLEEPING_SOLUTION] * (sleepers + 4),
                   max_parallel=ACTORS * SLOTS)

    def open_gate_when_running() -> None:
        wait_until(lambda: solutions_running(log.uids()[before:]) >= sleepers,
                   "the sleepers running")
        gate.write_text("open")

    opener = threading.Thread(target=open_gate_when_running, daemon=True)
    opener.start()
    first = next(run)
    assert first.passed
    opener.join(10)
    assert solutions_running(log.uids()[before:]) >= sleepers  # they were running
    run.close()
    _check_nothing_left(pool, log, sleepers)


@pytest.mark.slow
def test_ctrl_c_in_the_driver_stops_the_maps_running_runs(pool, tmp_path):
    log = RunLog(tmp_path / "runs.jsonl")
    before = len(log.uids())
    slots = ACTORS * SLOTS
    main = threading.get_ident()

    def interrupt_when_running() -> None:
        wait_until(lambda: solutions_running(log.uids()[before:]) >= slots, "runs running")
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=interrupt_when_running, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        list(pool.map(SLEEPER, [SLEEPING_SOLUTION] * (slots * 3), max_parallel=slots))
    _check_nothing_left(pool, log, slots)
