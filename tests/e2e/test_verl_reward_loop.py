"""verl 0.9's own reward loop and advantage code on our reward function and estimator.

verl's RewardLoopManager starts its RewardLoopWorker actors on the local Ray instance; they load
``compute_score`` from ``pkg://deepgym_ray.integrations.verl`` the way a trainer config says,
score a hand-built DataProto of three environments (one of them has a verifier that never
gives a verdict) on the one named pool, and the estimator registered with verl's registry turns
those scores into judged-only GRPO advantages, checked against values computed here by hand.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from helpers.cli import make_outage_env

pytestmark = pytest.mark.e2e

verl = pytest.importorskip("verl")
torch = pytest.importorskip("torch")

from omegaconf import OmegaConf, open_dict  # noqa: E402

from deepgym_ray.suites import load_environment  # noqa: E402

POOL = "verl-e2e"
WRONG = "```python\ndef {name}(*args):\n    raise ValueError('no idea')\n```"


def _config(tmp_path, tokenizer_path, reward_kwargs):
    config = OmegaConf.load(os.path.join(os.path.dirname(verl.__file__),
                                         "trainer/config/_generated_ppo_trainer.yaml"))
    with open_dict(config):
        config.actor_rollout_ref.model.path = str(tokenizer_path)
        config.reward.num_workers = 1
        config.reward.custom_reward_function.path = "pkg://deepgym_ray.integrations.verl"
        config.reward.custom_reward_function.name = "compute_score_async"
        config.reward.custom_reward_function.reward_kwargs = reward_kwargs
    return config


def _data_proto(tokenizer, samples):
    """A DataProto as verl's rollout hands it over: prompts, right-padded responses, masks."""
    from verl import DataProto

    prompt_len = 2
    encoded = [tokenizer(text, add_special_tokens=False)["input_ids"] for text, _ in samples]
    response_len = max(len(ids) for ids in encoded)
    pad = tokenizer.pad_token_id
    prompts = torch.full((len(samples), prompt_len), pad, dtype=torch.long)
    responses = torch.full((len(samples), response_len), pad, dtype=torch.long)
    attention = torch.zeros((len(samples), prompt_len + response_len), dtype=torch.long)
    for i, ids in enumerate(encoded):
        prompts[i, -1] = ids[0]
        attention[i, prompt_len - 1] = 1
        responses[i, :len(ids)] = torch.tensor(ids)
        attention[i, prompt_len:prompt_len + len(ids)] = 1
    non_tensor = {
        "data_source": np.array([env for _, env in samples], dtype=object),
        "reward_model": np.array([{"ground_truth": env} for _, env in samples], dtype=object),
        "extra_info": np.array([{"env_name": env} for _, env in samples], dtype=object),
    }
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "attention_mask": attention,
                 "input_ids": torch.cat([prompts, responses], dim=1)},
        non_tensors=non_tensor)


def _judged_only(scores, groups, judged, eps=1e-6):
    """GRPO by hand: each group's mean and (Bessel) std over its judged samples only."""
    out = []
    for i, score in enumerate(scores):
        if not judged[i]:
            out.append(0.0)
            continue
        mates = [scores[j] for j in range(len(scores)) if groups[j] == groups[i] and judged[j]]
        if len(mates) == 1:
            mean, std = 0.0, 1.0
        else:
            mean = sum(mates) / len(mates)
            std = math.sqrt(sum((m - mean) ** 2 for m in mates) / (len(mates) - 1))
        out.append((score - mean) / (std + eps))
    return out


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory):
    from deepgym_ray.integrations.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), texts=["def coin_change"])


# With every core kept busy by another process (the suite's stress script) the reward loop's
# start (its actors, verl's imports) ran past the suite's default 300 s.
@pytest.mark.timeout(1200)
def test_reward_loop_scores_mixed_environments_on_the_shared_pool(ray_local, tmp_path,
                                                                  tokenizer_path):
    from transformers import AutoTokenizer
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig
    from deepgym_ray.pool import get_pool

    outage = make_outage_env(tmp_path / "outage")
    client_yaml = tmp_path / "client.yaml"
    client_yaml.write_text(f"mode: local\npool:\n  name: {POOL}\n  actors: 2\n")
    coin, knap = load_environment("coin_change"), load_environment("knapsack_01")
    right = {e.name: f"```python\n{e.reference_solution}\n```" for e in (coin, knap)}
    # Three groups of four (the uid), each mixing environments and verdicts.
    samples = [
        (right["coin_change"], "coin_change"), (WRONG.format(name="coin_change"), "coin_change"),
        ("```python\nprint(1)\n```", "outage"), (right["knapsack_01"], "knapsack_01"),
        (WRONG.format(name="knapsack_01"), "knapsack_01"), (right["coin_change"], "coin_change"),
        (right["knapsack_01"], "knapsack_01"), ("```python\nprint(2)\n```", "outage"),
        ("```python\nprint(3)\n```", "outage"), ("```python\nprint(4)\n```", "outage"),
        (right["knapsack_01"], "knapsack_01"), ("```python\nprint(5)\n```", "outage"),
    ]
    expected = [1.0, 0.0, None, 1.0, 0.0, 1.0, 1.0, None, None, None, 1.0, None]
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    data = _data_proto(tokenizer, samples)
    kwargs = {"environments": ["coin_change", "knapsack_01", str(outage)],
              "config": str(client_yaml), "no_verdict_score": float("nan")}
    manager = RewardLoopManager(_config(tmp_path, tokenizer_path, kwargs))
    try:
        out = manager.compute_rm_score(data)
    finally:
        for worker in manager.reward_loop_workers:
            ray_local.kill(worker)

    scores = out.batch["rm_scores"].sum(dim=-1).tolist()
    for got, want in zip(scores, expected, strict=True):
        assert (math.isnan(got) if want is None else got == want), (scores, expected)
    info = out.non_tensor_batch
    assert out.meta_info["reward_extra_keys"] == ["score", "has_verdict", "error_type", "env_name"]
    assert info["has_verdict"].tolist() == [e is not None for e in expected]
    assert info["env_name"].tolist() == [env for _, env in samples]
    assert all(info["error_type"][i] for i, e in enumerate(expected) if e is None)
    assert info["error_type"][0] == ""

    # The worker scored on the one named pool: the driver's pool is the same two actors.
    pool = get_pool(DeepGym(config=DeepGymConfig.from_yaml(client_yaml)))
    try:
        assert len(pool.actors) == 2 and sum(s["runs"] for s in pool.stats()) >= len(samples)
        names = [a["name"] for a in ray_local.util.list_named_actors(all_namespaces=True)
                 if a["name"].startswith(f"{POOL}-")]
        pool_names = [pool.actor_name(0), pool.actor_name(1)]
    finally:
        pool.shutdown()
    assert sorted(names) == pool_names

    # verl's own compute_advantage, with our estimator picked by name from its registry.
    uids = np.array([f"g{i // 4}" for i in range(len(samples))], dtype=object)
    mask = data.batch["attention_mask"][:, data.batch["prompts"].shape[1]:]
    batch = data.union(out)
    batch.batch["token_level_rewards"] = out.batch["rm_scores"]
    batch.batch["response_mask"] = mask
    batch.non_tensor_batch["uid"] = uids
    batch = compute_advantage(batch, adv_estimator="deepgym_grpo_judged")
    judged = [e is not None for e in expected]
    want = _judged_only([e or 0.0 for e in expected], uids.tolist(), judged)
    got = [row[m.bool()] for row, m in zip(batch.batch["advantages"], mask, strict=True)]
    for i, (advantage, value) in enumerate(zip(got, want, strict=True)):
        assert torch.allclose(advantage, torch.full_like(advantage, value), atol=1e-5), i
        if not judged[i]:
            assert torch.count_nonzero(advantage) == 0  # exactly zero

    # The same through the registry with has_verdict read from the batch's extra info and
    # the no-verdict samples scored as a plain 0 (what a default no_verdict_score gives).
    estimator = get_adv_estimator_fn("deepgym_grpo_judged")
    zeros = torch.nan_to_num(out.batch["rm_scores"], nan=0.0)
    advantages, _ = estimator(token_level_rewards=zeros, response_mask=mask, index=uids,
                              non_tensor_batch=batch.non_tensor_batch)
    assert torch.allclose(advantages, batch.batch["advantages"], atol=1e-6)
