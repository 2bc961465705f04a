"""The verl integration without a cluster: the estimator through verl's registry, the reward
function's routing and keys (scored on threads), the parquet helper and mixture files."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

verl = pytest.importorskip("verl")
torch = pytest.importorskip("torch")

from deepgym_ray.config import ConfigError  # noqa: E402
from deepgym_ray.integrations import verl as dverl  # noqa: E402
from deepgym_ray.reward.mixed import MixedEnvironment  # noqa: E402
from deepgym_ray.reward.mixed_config import load_mixed_config  # noqa: E402
from deepgym_ray.suites import load_environment  # noqa: E402


def _hand_grpo(scores, groups, judged, eps=1e-6, scale=True):
    """Judged-only GRPO computed here: per group, mean and Bessel std of judged scores."""
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
        out.append((score - mean) / (std + eps) if scale else score - mean)
    return out


def _batch(scores, length=5):
    """Token-level rewards with each score on a sample's last valid token, and the mask."""
    n = len(scores)
    lengths = [1 + (i % length) for i in range(n)]
    rewards = torch.zeros((n, length))
    mask = torch.zeros((n, length))
    for i, (score, valid) in enumerate(zip(scores, lengths, strict=True)):
        rewards[i, valid - 1] = score
        mask[i, :valid] = 1
    return rewards, mask


SCORES = [1.0, 0.0, 0.5, 0.2, 1.0, 1.0, 0.0, 0.3, 0.7, 0.9, 0.1, 0.4]
JUDGED = [True, True, False, True, False, False, False, False, True, True, True, False]
GROUPS = ["a"] * 4 + ["b"] * 4 + ["c"] * 4  # b: no verdict at all; a, c: some


@pytest.mark.parametrize("scale", [True, False])
def test_estimator_from_verls_registry_gives_judged_only_values(scale):
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    estimator = get_adv_estimator_fn(dverl.ADV_ESTIMATOR)
    rewards, mask = _batch(SCORES)
    advantages, returns = estimator(
        token_level_rewards=rewards, response_mask=mask, index=np.array(GROUPS, dtype=object),
        norm_adv_by_std_in_grpo=scale, has_verdict=JUDGED)
    want = _hand_grpo(SCORES, GROUPS, JUDGED, scale=scale)
    for i, value in enumerate(want):
        row = advantages[i][mask[i].bool()]
        assert torch.allclose(row, torch.full_like(row, value), atol=1e-6), (i, row, value)
        assert torch.count_nonzero(advantages[i][~mask[i].bool()]) == 0
        if not JUDGED[i]:
            assert torch.count_nonzero(advantages[i]) == 0  # exactly zero, every token
    assert returns is advantages or torch.equal(returns, advantages)


def test_judged_only_equals_verls_grpo_without_the_unjudged_samples():
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_adv_estimator_fn

    rewards, mask = _batch(SCORES)
    keep = [i for i, judged in enumerate(JUDGED) if judged]
    ours, _ = get_adv_estimator_fn(dverl.ADV_ESTIMATOR)(
        token_level_rewards=rewards, response_mask=mask, index=GROUPS, has_verdict=JUDGED)
    theirs, _ = compute_grpo_outcome_advantage(
        token_level_rewards=rewards[keep], response_mask=mask[keep],
        index=[GROUPS[i] for i in keep])
    assert torch.allclose(ours[keep], theirs, atol=1e-6)


def _through_verls_trainer(estimator, scores, groups, norm_adv_by_std_in_grpo):
    """Advantages as verl 0.9.1's v1 trainer computes them (trainer_base: its call, its
    arguments): ``compute_advantage_for_multi_trajectories`` on a DataProto, the setting in
    ``algorithm``, one single-turn session per sample (keys ``{uid}_{session}_{turn}``)."""
    from verl.protocol import DataProto
    from verl.trainer.config.algorithm import AlgoConfig
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    rewards, mask = _batch(scores)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask},
        non_tensors={"uid": np.array(groups, dtype=object)})
    algorithm = AlgoConfig(adv_estimator=estimator,
                           norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo)
    keys = [f"{group}_{i}_0" for i, group in enumerate(groups)]
    out = compute_advantage_for_multi_trajectories(
        data, batch_keys=keys, adv_estimator=algorithm.adv_estimator, gamma=algorithm.gamma,
        lam=algorithm.lam, num_repeat=4,
        norm_adv_by_std_in_grpo=algorithm.get("norm_adv_by_std_in_grpo", True),
        config=algorithm)
    return out.batch["advantages"], mask


@pytest.mark.parametrize("scale", [True, False])
def test_all_judged_rows_get_exactly_what_verls_grpo_gives_with_the_same_setting(scale):
    # Every row judged: ours must be verl's grpo, bit for bit, whatever algorithm says.
    theirs, mask = _through_verls_trainer("grpo", SCORES, GROUPS, scale)
    ours, _ = _through_verls_trainer(dverl.ADV_ESTIMATOR, SCORES, GROUPS, scale)
    assert torch.equal(ours, theirs)
    first = theirs[0][mask[0].bool()][0].item()
    want = _hand_grpo(SCORES, GROUPS, [True] * len(SCORES), scale=scale)[0]
    assert first == pytest.approx(want, abs=1e-6)  # the setting reached verl's grpo as well
    # The two-sample group: 0.5 / -0.5 unscaled, 0.707 / -0.707 by the std.
    pair, _ = _through_verls_trainer(dverl.ADV_ESTIMATOR, [1.0, 0.0], ["g", "g"], scale)
    expected = 0.7071 if scale else 0.5
    assert pair[0][0].item() == pytest.approx(expected, abs=1e-3)
    assert pair[1][0].item() == pytest.approx(-expected, abs=1e-3)


@pytest.mark.parametrize("scale", [True, False])
def test_judged_only_rows_follow_the_setting_in_verls_config(scale):
    marked = [s if j else float("nan") for s, j in zip(SCORES, JUDGED, strict=True)]
    ours, mask = _through_verls_trainer(dverl.ADV_ESTIMATOR, marked, GROUPS, scale)
    want = _hand_grpo(SCORES, GROUPS, JUDGED, scale=scale)
    for i, value in enumerate(want):
        row = ours[i][mask[i].bool()]
        assert torch.allclose(row, torch.full_like(row, value), atol=1e-6), (i, row, value)
        if not JUDGED[i]:
            assert torch.count_nonzero(ours[i]) == 0
    # An explicit argument still wins over the config (a caller that passes it means it).
    rewards, mask = _batch(marked)
    from verl.trainer.config.algorithm import AlgoConfig

    explicit, _ = dverl.compute_judged_grpo_advantage(
        rewards, mask, GROUPS, norm_adv_by_std_in_grpo=not scale,
        config=AlgoConfig(norm_adv_by_std_in_grpo=scale))
    flipped = _hand_grpo(SCORES, GROUPS, JUDGED, scale=not scale)
    assert explicit[0][0].item() == pytest.approx(flipped[0], abs=1e-6)


def test_nan_scores_mark_no_verdict_the_same_as_has_verdict():
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    estimator = get_adv_estimator_fn(dverl.ADV_ESTIMATOR)
    marked = [s if j else float("nan") for s, j in zip(SCORES, JUDGED, strict=True)]
    rewards, mask = _batch(marked)
    by_mark, _ = estimator(token_level_rewards=rewards, response_mask=mask, index=GROUPS)
    rewards0, _ = _batch([s if j else 0.0 for s, j in zip(SCORES, JUDGED, strict=True)])
    by_column, _ = estimator(token_level_rewards=rewards0, response_mask=mask, index=GROUPS,
                             non_tensor_batch={"has_verdict": np.array(JUDGED)})
    assert not torch.isnan(by_mark).any()
    assert torch.allclose(by_mark, by_column, atol=1e-6)


def test_estimator_refuses_inconsistent_verdict_information():
    estimator = dverl.compute_judged_grpo_advantage
    rewards, mask = _batch([1.0, float("nan")])
    with pytest.raises(ValueError, match="NaN reward"):
        estimator(rewards, mask, ["a", "a"], has_verdict=[True, True])
    with pytest.raises(ValueError, match="has_verdict has"):
        estimator(rewards, mask, ["a", "a"], has_verdict=[True])


@pytest.mark.slow
def test_verl_registers_the_estimator_on_import_through_its_plugin_entry_point():
    code = ("import verl\nfrom verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY as R\n"
            f"print({dverl.ADV_ESTIMATOR!r} in R, R[{dverl.ADV_ESTIMATOR!r}].__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert out[-2:] == ["True", "deepgym_ray.integrations.verl"]


# --- the reward function (on threads: no cluster needed for routing and keys) -------------

@pytest.fixture()
def threads_config(tmp_path):
    path = tmp_path / "threads.yaml"
    path.write_text("mode: local\nbackend: threads\n")
    return str(path)


def test_compute_score_routes_by_extra_info_or_data_source_with_fixed_keys(threads_config):
    coin = load_environment("coin_change")
    right = f"```python\n{coin.reference_solution}\n```"
    settings = {"environments": ["coin_change", "knapsack_01"], "config": threads_config,
                "components": ["correctness"]}
    by_info = dverl.compute_score("anything", right, "coin_change",
                                  {"env_name": "coin_change"}, **settings)
    by_source = dverl.compute_score("coin_change", right, None, {}, **settings)
    wrong_env = dverl.compute_score("knapsack_01", right, None, None, **settings)
    for fields in (by_info, by_source, wrong_env):
        assert list(fields) == ["score", "has_verdict", "error_type", "env_name",
                                "reward/correctness"]
    assert by_info["score"] == by_source["score"] == 1.0 and by_info["has_verdict"] is True
    assert by_info["env_name"] == "coin_change" and by_info["error_type"] == ""
    assert wrong_env["env_name"] == "knapsack_01" and wrong_env["score"] < 1.0
    with pytest.raises(ValueError, match="names no environment"):
        dverl.compute_score("coin_change", right, None, {"env_name": "nope"}, **settings)


def test_compute_score_gives_the_no_verdict_score_and_refuses_unknown_settings(
        tmp_path, threads_config):
    folder = tmp_path / "outage"
    folder.mkdir()
    (folder / "task.md").write_text("Anything.")
    (folder / "verifier.py").write_text("import sys\nsys.exit(2)\n")
    (folder / "metadata.json").write_text(json.dumps({"name": "outage"}))
    settings = {"environments": [str(folder)], "config": threads_config}
    fields = dverl.compute_score("outage", "```python\nprint(1)\n```", None, None,
                                 no_verdict_score=-1.0, **settings)
    assert fields["score"] == -1.0 and fields["has_verdict"] is False and fields["error_type"]
    nan = dverl.compute_score("outage", "x = 1", None, None, no_verdict_score=float("nan"),
                              **settings)
    assert math.isnan(nan["score"])
    with pytest.raises(ValueError, match="no_verdct_score"):
        dverl.compute_score("outage", "x = 1", None, None, no_verdct_score=0.0, **settings)


def test_compute_score_async_gives_the_same_fields(threads_config):
    import asyncio

    coin = load_environment("coin_change")
    fields = asyncio.run(dverl.compute_score_async(
        "coin_change", f"```python\n{coin.reference_solution}\n```", None, None,
        environments=["coin_change"], config=threads_config))
    assert fields["score"] == 1.0 and fields["has_verdict"] is True


# --- data ------------------------------------------------------------------------------------

def test_parquet_rows_are_what_verl_reads_and_route_back_to_their_environment(tmp_path):
    import pyarrow.parquet as pq

    mixed = MixedEnvironment([("coin_change", 3.0), ("knapsack_01", 1.0)])
    path = dverl.write_verl_parquet(tmp_path / "data" / "train.parquet", mixed, n=40, seed=1)
    rows = pq.read_table(path).to_pylist()
    assert len(rows) == 40
    assert set(rows[0]) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    for i, row in enumerate(rows):
        env = mixed.get(row["extra_info"]["env_name"])
        assert row["prompt"] == [{"role": "user", "content": env.task}]
        assert row["reward_model"]["ground_truth"] == env.name == row["data_source"]
        assert row["extra_info"]["index"] == i
        routed = mixed.route_row(i, dverl._routing_row(row["data_source"], row["extra_info"]))
        assert routed is env
    drawn = {r["data_source"] for r in rows}
    assert drawn == {"coin_change", "knapsack_01"}
    one_each = dverl.verl_rows([load_environment("coin_change")], n=3)
    assert [r["data_source"] for r in one_each] == ["coin_change"] * 3
    with pytest.raises(ValueError, match="needs n"):
        dverl.verl_rows(mixed)


def test_mixture_file_loads_weights_suites_and_names_its_errors(tmp_path):
    good = tmp_path / "mixed.yaml"
    good.write_text("environments:\n  - coin_change\n  - {name: knapsack_01, weight: 3}\n"
                    "config: local.yaml\n")
    (tmp_path / "local.yaml").write_text("mode: local\npool: {name: mixed-pool}\n")
    cfg = load_mixed_config(good)
    mixed = cfg.build()
    assert [e.name for e in mixed.environments] == ["coin_change", "knapsack_01"]
    assert mixed.weights == [1.0, 3.0]
    assert cfg.client_config(tmp_path).pool.name == "mixed-pool"
    bad = tmp_path / "bad.yaml"
    bad.write_text("environments:\n  - {name: coin_change, weight: -1}\n")
    with pytest.raises(ConfigError, match="bad.yaml.*weight"):
        load_mixed_config(bad)
    (tmp_path / "empty.yaml").write_text("[]\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_mixed_config(tmp_path / "empty.yaml")


def test_example_config_lines_are_keys_of_verls_trainer_config():
    import os
    from pathlib import Path

    import yaml
    from omegaconf import OmegaConf

    example = yaml.safe_load((Path(__file__).parents[2] / "examples/verl_grpo.yaml").read_text())
    base = OmegaConf.to_container(OmegaConf.load(os.path.join(
        os.path.dirname(verl.__file__), "trainer/config/_generated_ppo_trainer.yaml")))
    ours = {("reward", "custom_reward_function", "reward_kwargs")}  # verl reads it if present

    def check(node, ref, path):
        for key, value in node.items():
            if path + (key,) in ours:
                continue
            assert isinstance(ref, dict) and key in ref, f"{'.'.join(path + (key,))} is no key"
            if isinstance(value, dict):
                check(value, ref[key], path + (key,))

    for section in ("data", "algorithm", "actor_rollout_ref", "reward"):
        check(example[section], base[section], (section,))
    assert example["algorithm"]["adv_estimator"] == dverl.ADV_ESTIMATOR
    function = example["reward"]["custom_reward_function"]
    assert callable(getattr(dverl, function["name"]))
    assert function["path"] == "pkg://deepgym_ray.integrations.verl"
    settings = dverl.VerlRewardSettings.model_validate(function["reward_kwargs"])
    assert math.isnan(settings.no_verdict_score)
