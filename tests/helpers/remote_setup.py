"""What the remote providers' tests share: an environment, a wrong answer, the provider's
options for a local test server (tests/daytona_server, tests/e2b_server, tests/modal_server),
a pool client on it, and the checks every remote provider passes through the Ray pool.

Example:
    DaytonaProvider(**options(daytona_server, disk_mb=64))
    check_every_builtin(pool_client(mode="e2b", server=e2b_server, name="e2b-tests"))
"""

from __future__ import annotations

from deepgym_ray.sandboxes.remote.command import SPEC_IN_ENVIRONMENT_MAX
from deepgym_ray.suites import load_environment

ENV = load_environment("coin_change")
WRONG = "def coin_change(coins, amount):\n    raise ValueError(\"no idea\")\n"
# A right answer whose run's spec is too large for one environment variable (it goes another way).
LARGE = ENV.reference_solution + "\n# " + "x" * SPEC_IN_ENVIRONMENT_MAX + "\n"
# A hung call is given up at the run's wall-clock bound (three times its time, and 3 s) plus
# two call timeouts: the fault tests run with a shorter time than coin_change's 30 s (its
# reference needs a few hundredths of a second of CPU), so that one costs 19 s, not 103.
FAULT_ENV = type(ENV).model_validate({**ENV.model_dump(), "timeout": 2.0, "case_timeout": 2.0})


def options(server, **extra):
    """The provider's options for ``server``, with ``extra``."""
    return {**server.provider_options(), **extra}


def pool_client(mode: str, server, name: str):
    """A client of ``mode`` on ``server`` with a Ray pool of its own (two light actors, eight
    runs each; call timeouts of 5 s)."""
    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig, PoolConfig

    config = DeepGymConfig(mode=mode, provider_options=options(server, call_timeout=5.0),
                           pool=PoolConfig(name=name, actors=2, actor_concurrency=8,
                                           num_cpus_per_actor=0.1))
    return DeepGym(config=config)


def map_one(client, answer, env=ENV, retries=0):
    """One answer through the client's pool: its result."""
    from deepgym_ray.pool import get_pool

    return list(get_pool(client).map(env, [answer], max_parallel=1, max_retries=retries))[0]


def check_every_builtin(client) -> None:
    """Every built-in environment's reference scores 1.0 and a subtly wrong answer less,
    judged, through the client's pool; a flat wrong answer a judged 0."""
    from deepgym_ray.envs import builtin_names
    from helpers.wrong_solutions import SUBTLY_WRONG

    names = builtin_names()
    envs = [load_environment(n) for n in names]
    right = client.eval(envs, max_parallel=8)
    misses = [(n, r.error_type, r.details)
              for n, r in zip(names, right.results, strict=True) if r.score != 1.0]
    assert [r.score for r in right.results] == [1.0] * len(names), misses
    wrong_envs = [e for e in envs if e.name in SUBTLY_WRONG]
    wrong = client.eval(wrong_envs, [SUBTLY_WRONG[e.name] for e in wrong_envs], max_parallel=8)
    for env, result in zip(wrong_envs, wrong.results, strict=True):
        assert result.has_verdict and not result.passed and result.score < 1.0, (env.name,
                                                                                 result)
    flat = map_one(client, WRONG)
    assert flat.has_verdict and flat.score == 0.0 and flat.reward == 0.0


def check_fault(client, server, call: str, action: str, status: int, expected: str,
                times: int | None = 1, answer: str = ENV.reference_solution) -> None:
    """One injected fault: the run of ``answer`` has no verdict, its details name
    ``expected``; the next run, faults cleared, is judged again (the actor recovers, on a new
    sandbox)."""
    server.faults.add(call, action, status=status, times=times)
    result = map_one(client, answer, env=FAULT_ENV)
    assert not result.has_verdict and result.reward is None and not result.passed, result
    assert result.error_type == "sandbox_error"
    assert expected in (result.details or ""), result.details
    server.faults.clear()
    again = map_one(client, ENV.reference_solution)
    assert again.score == 1.0, again


def check_sprinkled_faults(client, server, rules: list[tuple[str, str, int, int | None,
                                                             float]]) -> None:
    """A batch of 30 with ``rules`` (call, action, status, times, rate) firing in it: every
    input gets exactly its verdict (the failed runs retried elsewhere), and they did fire."""
    from deepgym_ray.pool import get_pool

    for call, action, status, times, rate in rules:
        server.faults.add(call, action, status=status, times=times, rate=rate)
    answers = [ENV.reference_solution if i % 3 else WRONG for i in range(30)]
    results = list(get_pool(client).map(FAULT_ENV, answers, max_parallel=8, max_retries=6))
    assert sum(rule.hits for rule in server.faults.rules) >= len(rules) + 1
    assert len(results) == len(answers)
    assert all(r.has_verdict for r in results), [r.details for r in results if not r.has_verdict]
    assert [r.score for r in results] == [1.0 if i % 3 else 0.0 for i in range(30)]


def result_while_running(provider, server, answer, running, act):
    """Start ``answer`` on ``provider`` (a client on threads); once ``running(server)`` names
    a sandbox of the provider's whose command runs (the server is shared with other tests),
    ``act(sid)``; the run's result."""
    import threading
    import time

    from deepgym_ray.client import DeepGym

    client = DeepGym(provider=provider, backend="threads")
    done: list = []
    runner = threading.Thread(target=lambda: done.append(client.run_safe(ENV, answer)))
    runner.start()
    deadline = time.monotonic() + 60
    while (sid := running(server)) is None:
        assert time.monotonic() < deadline and runner.is_alive(), done
        time.sleep(0.05)
    act(sid)
    runner.join(60)
    client.close()
    return done[0]
