"""The reward contract page's mixed example, on the fixtures: SWE-style patch tasks (weight
0.6), Terminal-Bench tasks (0.2) and coin_change (0.2) behind one MixedEnvironment, rewarded
through the Ray pool on Docker in a real TRL GRPOTrainer step. Rows carry what their datasets
carry (``instance_id``, ``task_id``, ``env_name``), and each completion reaches its own task."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")
pytest.importorskip("swebench", reason="grading needs the swebench extra (setup.sh installs it)")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_the_contract_pages_mixed_example_in_a_grpo_step(ray_local, tmp_path):
    from helpers.docker_engine import (
        TEST_IMAGE,
        docker_skip_reason,
        make_docker_client,
        shutdown_pool,
    )
    from trl import GRPOConfig, GRPOTrainer

    from deepgym_ray.integrations.tiny import build_tiny_model
    from deepgym_ray.integrations.trl import make_trl_reward_fn
    from deepgym_ray.repo_tasks import ImageRecipe
    from deepgym_ray.reward.mixed import MixedEnvironment
    from deepgym_ray.suites import load_environment

    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    recipe = ImageRecipe.from_folder(FIXTURES / "swe" / "image", BASE_IMAGE=TEST_IMAGE)
    mixed = MixedEnvironment(environments=[  # the page's example, with our fixtures' paths
        (load_environment("swebench_pro", path=FIXTURES / "swe" / "tasks.jsonl",
                          recipe=recipe), 0.6),
        (load_environment("terminal_bench_2", path=FIXTURES / "terminal_bench",
                          BASE_IMAGE=TEST_IMAGE), 0.2),
        (load_environment("coin_change"), 0.2),
    ])
    swe, terminal = mixed.environments[:3], mixed.environments[3:6]
    assert mixed.weights == pytest.approx([0.2] * 3 + [0.2 / 3] * 3 + [0.2])
    swe_env, terminal_env = swe[0], terminal[0]
    rows = [
        {"prompt": swe_env.task, "instance_id": swe_env.patch_task.instance_id,
         "task_id": None, "env_name": None},
        {"prompt": terminal_env.task, "instance_id": None,
         "task_id": terminal_env.name.split("/", 1)[1], "env_name": None},
        {"prompt": "Make change with the fewest coins.", "instance_id": None, "task_id": None,
         "env_name": "coin_change"},
    ]
    expected = {row["prompt"]: name for row, name in
                zip(rows, [swe_env.name, terminal_env.name, "coin_change"], strict=True)}

    client = make_docker_client(actors=2, concurrency=2, max_retries=1)
    reward_fn = make_trl_reward_fn(mixed, client, max_parallel=8)
    seen: list = []
    score = reward_fn.results

    def recording(completions, **kwargs):
        results = score(completions, **kwargs)
        seen.extend(zip(kwargs["prompts"], results, strict=True))
        return results

    reward_fn.results = recording
    model = build_tiny_model(tmp_path / "model", texts=[row["prompt"] for row in rows])
    args = GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=1,
                      per_device_train_batch_size=12, num_generations=4,
                      max_completion_length=16, learning_rate=1e-3, logging_steps=1,
                      use_cpu=True, save_strategy="no", report_to=[], seed=0)
    trainer = GRPOTrainer(model=str(model), reward_funcs=[reward_fn], args=args,
                          train_dataset=datasets.Dataset.from_list(rows))
    try:
        trainer.train()
    finally:
        shutdown_pool(client)
        client.close()

    assert trainer.state.global_step == 1
    assert len(seen) == 12 and {p for p, _ in seen} == set(expected)
    for prompt, result in seen:
        assert result.env_name == expected[prompt], (prompt, result)
        # The tiny model's text is no answer: a judged 0 for each kind of task, never an
        # outage (a None would hide a broken route as a missing reward).
        assert result.has_verdict and result.score == 0.0, result
    assert "rewards/deepgym/mean" in trainer.state.log_history[0]
