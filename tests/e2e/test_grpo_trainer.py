"""A real TRL GRPOTrainer, trained on the CPU with a tiny local model, rewarded on the Ray pool.

Two built-in environments behind one MixedEnvironment; the dataset's ``env_name`` column routes
each completion. The sandbox provider is the real local one wrapped so that about half of the
answers hit an HTTP 503 from the "provider" (decided by a hash of the answer's code, so the test
knows which): those completions must get None, and the no-verdict rate must reach TRL's logs.
"""

from __future__ import annotations

import sys
import uuid

import pytest
from helpers.pool_providers import FlakyProvider, provider_fails

pytestmark = pytest.mark.e2e

trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

try:  # Ray workers unpickle the provider factory by value: no import path to this file needed
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
except ImportError:  # pragma: no cover
    pass

ENVS = ("coin_change", "max_subarray_sum")


def test_grpo_trainer_with_mixed_rewards_on_the_pool(ray_local, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from deepgym_ray.client import DeepGym
    from deepgym_ray.completions import completion_to_code
    from deepgym_ray.config import DeepGymConfig, PoolConfig
    from deepgym_ray.integrations.tiny import build_tiny_model
    from deepgym_ray.integrations.trl import make_trl_async_reward_fn, make_trl_reward_fn
    from deepgym_ray.pool import get_pool
    from deepgym_ray.reward.mixed import MixedEnvironment
    from deepgym_ray.suites import load_environment

    mixed = MixedEnvironment(environments=[(load_environment(n), 0.5) for n in ENVS])
    rows = mixed.sample_batch(16, seed=3)
    assert {r["env_name"] for r in rows} == set(ENVS)
    dataset = datasets.Dataset.from_list(rows)

    config = DeepGymConfig(mode="local", backend="ray", pool=PoolConfig(
        name=f"grpo-{uuid.uuid4().hex[:8]}", actors=2, actor_concurrency=2,
        num_cpus_per_actor=0, max_retries=1))
    client = DeepGym(config=config, provider=FlakyProvider)
    reward_fn = make_trl_reward_fn(mixed, client, max_parallel=8)

    # Watch what the reward function sees and returns, without replacing it.
    batches: list[dict] = []
    score = reward_fn.results

    def recording_results(completions, **kwargs):
        results = score(completions, **kwargs)
        batches.append({"completions": list(completions), "env_name": list(kwargs["env_name"]),
                        "results": results})
        return results

    reward_fn.results = recording_results
    returned: list[list] = []
    original_finish = reward_fn._finish

    def recording_finish(results, kwargs):
        rewards = original_finish(results, kwargs)
        returned.append(rewards)
        return rewards

    reward_fn._finish = recording_finish
    # The async variant beside it, on TRL's own event loop (a component these envs lack: the
    # score stands in for it).
    async_fn = make_trl_async_reward_fn(mixed, client, max_parallel=8, component="style")

    model = build_tiny_model(tmp_path / "model", texts=[e.task for e in mixed.environments])
    args = GRPOConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=2,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=24,
        learning_rate=1e-3,
        logging_steps=1,
        use_cpu=True,
        save_strategy="no",
        report_to=[],
        seed=0,
    )
    trainer = GRPOTrainer(model=str(model), reward_funcs=[reward_fn, async_fn], args=args,
                          train_dataset=dataset)
    try:
        trainer.train()
    finally:
        get_pool(client).shutdown()

    # Training completed, and both reward functions reached TRL's metrics.
    assert trainer.state.global_step == 2
    assert len(batches) == len(returned) == 2
    step_logs = [h for h in trainer.state.log_history if "rewards/deepgym/mean" in h]
    assert len(step_logs) == 2 and all("rewards/deepgym_style/mean" in h for h in step_logs)

    none_seen = judged_seen = 0
    for batch, rewards in zip(batches, returned, strict=True):
        assert len(rewards) == len(batch["completions"]) == 8
        for completion, row_env, result, reward in zip(
            batch["completions"], batch["env_name"], batch["results"], rewards, strict=True
        ):
            # Each completion went to the environment its own row named.
            assert result.env_name == row_env
            if provider_fails(completion_to_code(completion).encode("utf-8")):
                assert reward is None, result
                assert result.error_type == "sandbox_error" and "503" in (result.details or "")
                none_seen += 1
            else:
                assert isinstance(reward, float) and result.has_verdict, result
                judged_seen += 1
    assert none_seen and judged_seen, (none_seen, judged_seen)

    # The no-verdict rate of each step reached TRL's logs.
    logged = [h["deepgym/no_verdict_rate"] for h in trainer.state.log_history
              if "deepgym/no_verdict_rate" in h]
    expected = [sum(r is None for r in rewards) / len(rewards) for rewards in returned]
    assert logged == pytest.approx(expected)
    logged_async = [h["deepgym_style/no_verdict_rate"] for h in trainer.state.log_history
                    if "deepgym_style/no_verdict_rate" in h]
    assert logged_async == pytest.approx(expected)
    # And each completion's error type reached TRL's completions table.
    assert list(trainer._logs["extra"]["error_type"]) == [
        r.error_type for r in batches[-1]["results"]
    ]

