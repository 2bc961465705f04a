"""VerifierPool on a real local Ray: order, backpressure, retries, faults, sharing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid

import pytest
from helpers import TESTS_DIR
from helpers.pool_providers import make_client, script

from deepgym_ray.config import PoolConfig
from deepgym_ray.models import Environment
from deepgym_ray.pool import VerifierPool

ENV = Environment(name="scripted", verifier_code="return 1.0")


@pytest.fixture
def make_pool(ray_local, tmp_path):
    """Pools with a fresh name each, shut down after the test (their actors are detached)."""
    pools = []

    def make(actors=2, concurrency=4, max_retries=2, **client_config):
        config = PoolConfig(name=f"t-{uuid.uuid4().hex[:8]}", actors=actors,
                            actor_concurrency=concurrency, num_cpus_per_actor=0,
                            max_retries=max_retries)
        client = make_client(tmp_path, pool=config, **client_config)
        pool = VerifierPool(client)
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.shutdown()


def max_overlap(intervals):
    """The largest number of (start, end) intervals open at one moment."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    best = current = 0
    for _, delta in events:  # at equal times an end (-1) sorts before a start (+1)
        current += delta
        best = max(best, current)
    return best


@pytest.mark.slow
def test_results_come_back_in_input_order_with_mixed_run_times(make_pool):
    pool = make_pool(actors=2, concurrency=4)
    sleeps = [0.3, 0.0, 0.15, 0.0, 0.05] * 4
    answers = [script(score=i / 100, sleep=s) for i, s in enumerate(sleeps)]
    seen = []
    results = list(pool.map(ENV, answers, max_parallel=8, chunk_size=1,
                            on_result=lambda i, r: seen.append(i)))
    assert [r.score for r in results] == [i / 100 for i in range(len(answers))]
    assert all(r.has_verdict and r.env_name == "scripted" for r in results)
    assert sorted(seen) == list(range(len(answers)))  # one callback per input
    assert seen != sorted(seen)  # completion order differs: the reordering was needed


@pytest.mark.slow
def test_backpressure_in_flight_runs_counted_by_the_actors(make_pool):
    pool = make_pool(actors=2, concurrency=8)
    answers = [script(score=1.0, sleep=0.2) for _ in range(24)]
    results = list(pool.map(ENV, answers, max_parallel=5))
    assert len(results) == 24 and all(r.passed for r in results)
    stats = pool.stats(run_log=True)
    intervals = [iv for s in stats for iv in s["run_log"]]
    assert len(intervals) == 24
    # The actors could run 16 at once; this caller allowed 5, and used them.
    assert max_overlap(intervals) == 5
    assert all(s["max_in_flight"] <= 5 for s in stats)


def test_per_item_environments_and_env_sent_once_per_actor(make_pool):
    pool = make_pool(actors=2, concurrency=2)
    other = Environment(name="other", verifier_code="return 0.0")
    envs = [ENV, other] * 10
    answers = [script(score=0.5) for _ in envs]
    for _ in range(2):  # a second map call reuses the actors' cached environments
        results = list(pool.map(envs, answers, max_parallel=6))
        assert [r.env_name for r in results] == [e.name for e in envs]
    stats = pool.stats()
    assert sum(s["runs"] for s in stats) == 40
    assert all(s["env_fetches"] <= 2 for s in stats)


def test_sandbox_faults_are_retried_on_another_actor(make_pool):
    pool = make_pool(actors=3, concurrency=2)
    answers = [script(score=1.0, fail=f"once:flaky{i}") if i % 3 == 0 else script(score=0.0)
               for i in range(15)]
    run = pool.map(ENV, answers, max_parallel=4)
    results = list(run)
    assert len(results) == 15 and all(r.has_verdict for r in results)
    assert [r.score for r in results] == [1.0 if i % 3 == 0 else 0.0 for i in range(15)]
    assert run.stats.retries == 5 and run.stats.exhausted == 0


def test_retries_exhausted_gives_no_verdict_and_no_reward(make_pool):
    pool = make_pool(actors=2, concurrency=2, max_retries=2)
    answers = [script(fail="always"), script(score=1.0)]
    run = pool.map(ENV, answers, max_parallel=2)
    failed, ok = list(run)
    assert not failed.has_verdict and failed.error_type == "sandbox_error"
    assert failed.reward is None and not failed.counts_as_passed
    assert "after 3 attempts" in failed.details and "connection reset" in failed.details
    assert ok.reward == 1.0
    assert run.stats.exhausted == 1 and run.stats.retries == 2


@pytest.mark.slow
def test_actor_killed_by_its_own_provider_mid_batch(make_pool):
    pool = make_pool(actors=2, concurrency=4)
    answers = [script(score=1.0, sleep=0.2) for _ in range(12)]
    answers[3] = script(score=1.0, sleep=0.2, kill="once:boom")
    run = pool.map(ENV, answers, max_parallel=8)
    results = list(run)
    assert len(results) == 12 and all(r.has_verdict and r.passed for r in results)
    assert run.stats.actor_failures >= 1 and run.stats.retries >= 1


@pytest.mark.slow
@pytest.mark.parametrize("no_restart", [False, True])
def test_ray_kill_an_actor_mid_batch(make_pool, ray_local, no_restart):
    pool = make_pool(actors=2, concurrency=4)
    victim = pool.actors[0]
    answers = [script(score=(i % 2) * 1.0, sleep=0.15) for i in range(30)]
    calls = []

    def on_result(index, result):
        calls.append(index)
        if len(calls) == 4:  # both actors are busy with the rest of the batch by now
            ray_local.kill(victim, no_restart=no_restart)

    run = pool.map(ENV, answers, max_parallel=8, on_result=on_result)
    results = list(run)
    assert sorted(calls) == list(range(30))
    assert [r.score for r in results] == [(i % 2) * 1.0 for i in range(30)]
    assert all(r.has_verdict for r in results)
    assert run.stats.actor_failures >= 1 and run.stats.retries >= 1
    # The pool works again afterwards, with the restarted (or new) actor.
    again = pool.map(ENV, [script(score=1.0)] * 6, max_parallel=6)
    assert all(r.passed for r in again)


@pytest.mark.slow
def test_two_driver_processes_get_the_same_actors(ray_local, tmp_path):
    name = f"shared-{uuid.uuid4().hex[:8]}"
    address = ray_local.get_runtime_context().gcs_address
    driver = textwrap.dedent(f"""
        import json
        from helpers.pool_providers import make_client, script
        from deepgym_ray.config import PoolConfig
        from deepgym_ray.models import Environment
        from deepgym_ray.pool import VerifierPool
        pool = VerifierPool(make_client(pool=PoolConfig(name={name!r}, actors=3,
                            actor_concurrency=2, num_cpus_per_actor=0)),
                            address={address!r})
        env = Environment(name="scripted", verifier_code="return 1.0")
        assert [r.score for r in pool.map(env, [script(score=1.0)] * 4)] == [1.0] * 4
        print("ACTORS", json.dumps([a._actor_id.hex() for a in pool.actors]))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]), RAY_ADDRESS=address)
    # Two drivers at once: they race to create the same named actors.
    procs = [subprocess.Popen([sys.executable, "-c", driver], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        line = next(x for x in out.splitlines() if x.startswith("ACTORS "))
        outputs.append(json.loads(line[len("ACTORS "):]))
    here = VerifierPool(make_client(tmp_path, pool=PoolConfig(name=name, actors=1,
                                                               num_cpus_per_actor=0)))
    try:
        assert len(outputs[0]) == 3
        assert outputs[0] == outputs[1] == [a._actor_id.hex() for a in here.actors]
    finally:
        here.shutdown()


def test_bad_input_is_named(make_pool):
    pool = make_pool(actors=1, concurrency=1)
    with pytest.raises(ValueError, match="max_parallel"):
        pool.map(ENV, ["x"], max_parallel=0)
    with pytest.raises(ValueError, match="2 environments for 3 items"):
        pool.map([ENV, ENV], ["a", "b", "c"])
    with pytest.raises(TypeError, match="Environment"):
        pool.map("scripted", ["a"])
    with pytest.raises(TypeError, match="input 1"):
        list(pool.map(iter([ENV, "nope"]), iter(["a", "b"])))
    assert list(pool.map(ENV, [])) == []


def test_a_client_with_other_sandbox_settings_gets_its_own_pool(make_pool, ray_local):
    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig

    pool = make_pool(actors=1, concurrency=1)
    other = DeepGym(config=DeepGymConfig(mode="local", provider_options={"memory_mb": 512},
                                         pool=pool.config.model_copy(update={"actors": 1})))
    joined = VerifierPool(other)
    try:
        assert joined.scorer.key != pool.scorer.key
        assert {a._actor_id for a in joined.actors}.isdisjoint(a._actor_id for a in pool.actors)
        manifest = ray_local.get(joined.actors[0].manifest.remote())
        assert '"memory_mb": 512' in manifest["scorer"]
        again = VerifierPool(DeepGym(config=other.config))  # same settings: the same actors
        assert [a._actor_id for a in again.actors] == [a._actor_id for a in joined.actors]
    finally:
        joined.shutdown()


@pytest.mark.slow
def test_a_pool_that_cannot_start_says_why(ray_local, tmp_path):
    config = PoolConfig(name=f"huge-{uuid.uuid4().hex[:8]}", actors=1, num_cpus_per_actor=512)
    try:
        with pytest.raises(RuntimeError, match="did not start within 2s.*512"):
            VerifierPool(make_client(tmp_path, pool=config), start_timeout=2)
    finally:  # the actor waits for room in the cluster: take it away
        name = f"{config.name}-{make_client(tmp_path, pool=config).scorer.key}-0"
        ray_local.kill(ray_local.get_actor(name, namespace=config.namespace))


def test_a_pool_takes_the_clients_scorer_pool_settings_and_map_width():
    """What a pool is built from: a client's scorer, pool settings and usual map width (a
    remote provider's default shape makes room for it), or a bare Scorer."""
    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig
    from deepgym_ray.pool.verifier_pool import scoring_setup

    client = DeepGym(config=DeepGymConfig(mode="local", max_parallel=200,
                                          pool=PoolConfig(name="wide")))
    scorer, config, width = scoring_setup(client)
    assert scorer is client.scorer and config.name == "wide" and width == 200
    assert scoring_setup(client.scorer)[1:] == (PoolConfig(), 32)
    with pytest.raises(TypeError, match="DeepGym client or a Scorer"):
        scoring_setup("local")


@pytest.mark.slow
def test_a_pool_of_a_ray_instance_shut_down_is_not_found_again(tmp_path):
    # A new local instance repeats the job id (01000000): the process's pool of the old one,
    # whose actors died with it, must not be handed out again (a notebook that restarts Ray).
    script_text = textwrap.dedent("""
        import ray
        from deepgym_ray import DeepGym, load_environment
        env = load_environment("coin_change")
        options = dict(address="local", num_cpus=2, include_dashboard=False,
                       _node_ip_address="127.0.0.1", log_to_driver=False)
        scores = []
        for _ in range(2):
            ray.init(**options)
            client = DeepGym("local", backend="ray")
            scores.append(client.run_batch(env, [env.reference_solution]).results[0].score)
            ray.shutdown()
        print(scores)
    """)
    done = subprocess.run([sys.executable, "-c", script_text], capture_output=True, text=True,
                          timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[1.0, 1.0]", done.stdout[-500:]
