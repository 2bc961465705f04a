"""DeepGym: completions in, results out; raises become results without a verdict."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
from ray import cloudpickle

from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig
from deepgym_ray.exceptions import SandboxError
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.local import LocalProvider
from deepgym_ray.suites import load_environment


@pytest.fixture(scope="module")
def env():
    return load_environment("prime_factors")


def test_run_takes_a_conversation_and_fills_env_name(env):
    ref = env.reference_solution
    convo = [{"role": "user", "content": "go"},
             {"role": "assistant", "content": f"Here:\n```python\n{ref}```\n"}]
    result = DeepGym("local").run(env, convo)
    assert result.score == 1.0 and result.env_name == "prime_factors" and result.duration > 0


@pytest.mark.slow
def test_batch_keeps_order_and_never_raises(env):
    broken = Environment(name="broken", verifier_code="def verify(:\n")
    dg = DeepGym("local")
    outputs = [env.reference_solution, "def factorize(n):\n    return []\n"] * 3
    batch = dg.run_batch(env, outputs, max_parallel=3)
    assert [r.score == 1.0 for r in batch.results] == [True, False] * 3
    assert batch.passed == 3 and batch.total == 6
    bad = dg.run_batch(broken, ["x"])
    assert bad.results[0].error_type == "verifier_error" and not bad.results[0].has_verdict


class _FailingProvider(LocalProvider):
    def create(self, env):
        raise SandboxError("no capacity")


def test_provider_failure_raises_in_run_and_is_no_verdict_in_batch(env):
    dg = DeepGym(provider=_FailingProvider)
    with pytest.raises(SandboxError):
        dg.run(env, "x")
    result = dg.run_safe(env, "x")
    assert result.error_type == "sandbox_error" and not result.has_verdict
    assert result.env_name == "prime_factors"


def test_client_pickles_without_its_provider(env):
    dg = DeepGym(config=DeepGymConfig(mode="local", backend="threads", max_parallel=3),
                 provider=LocalProvider)
    dg.run(env, env.reference_solution)
    built = dg.provider
    clone = cloudpickle.loads(cloudpickle.dumps(dg))
    assert clone.config == dg.config and clone.scorer.label == dg.scorer.label
    assert clone.provider is not built  # the clone builds its own, from the factory
    assert clone.run(env, env.reference_solution).score == 1.0
    plain = pickle.loads(pickle.dumps(DeepGym("local")))
    assert plain.config.mode == "local"


def test_eval_defaults_to_reference_solutions():
    result = DeepGym("local").eval(["coin_change", "prime_factors"])
    assert result.env_names == ["coin_change", "prime_factors"] and result.pass_rate == 1.0
    with pytest.raises(ValueError, match="outputs"):
        DeepGym("local").eval(["coin_change"], ["a", "b"])


def test_the_default_backend_scores_in_process_without_a_cluster(ray_temp_dir):
    """backend='auto' (the default) is the CLI's rule: no running cluster, no Ray started
    (a local one cost 11-23 s on the first batch); the choice is said at INFO."""
    code = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.INFO, format='%(name)s: %(message)s')\n"
        "from deepgym_ray import DeepGym, load_environment\n"
        "env = load_environment('coin_change')\n"
        "dg = DeepGym(mode='local')\n"
        "batch = dg.run_batch(env, [env.reference_solution, 'x = 1'])\n"
        "print('scores', [r.score for r in batch.results], dg.backend, 'ray' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_TMPDIR"] = ray_temp_dir  # no `ray start` record to find
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["scores", "[1.0,", "0.0]", "threads", "False"], proc.stdout
    assert "backend auto: this process's threads (no Ray cluster is running" in proc.stderr


def test_the_default_backend_is_the_pool_in_a_process_on_ray(ray_local):
    assert DeepGym("local").backend == "ray"
    assert DeepGym("local", backend="threads").backend == "threads"
