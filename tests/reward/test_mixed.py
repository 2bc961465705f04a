"""MixedEnvironment: sampling by weight, and routing each completion by its row's metadata."""

from __future__ import annotations

import collections

import pytest

from deepgym_ray.models import Environment
from deepgym_ray.reward.mixed import MixedEnvironment


def _env(name: str, task: str | None = None) -> Environment:
    return Environment(name=name, task=task or f"Task of {name}.", verifier_code="return 1.0")


@pytest.fixture
def mixed() -> MixedEnvironment:
    return MixedEnvironment(
        environments=[
            (_env("coin_change"), 0.5),
            (_env("two_sum"), 0.2),
            (_env("humaneval/3"), 0.1),
            (_env("humaneval/12"), 0.1),
            (_env("swebench/django__django-11099"), 0.1),
        ]
    )


def _names(envs):
    return [e.name for e in envs]


# -- construction ------------------------------------------------------------------------------


def test_bare_environments_weigh_one():
    mixed = MixedEnvironment([_env("a"), (_env("b"), 3)])
    assert mixed.weights == [1.0, 3.0]
    assert mixed.probabilities == [0.25, 0.75]
    assert _names(mixed.environments) == ["a", "b"]


@pytest.mark.parametrize(
    "pairs, message",
    [
        ([], "at least one"),
        ([(_env("a"), -1)], "weight must be"),
        ([(_env("a"), float("nan"))], "weight must be"),
        ([(_env("a"), "1")], "weight must be"),
        ([(_env("a"), 0), (_env("b"), 0)], "must not all be 0"),
        ([(_env("a"), 1), (_env("A"), 1)], "appears twice"),
    ],
)
def test_bad_mixtures_are_refused(pairs, message):
    with pytest.raises(ValueError, match=message):
        MixedEnvironment(environments=pairs)


def test_a_non_environment_is_a_type_error():
    with pytest.raises(TypeError, match=r"environments\[0\]"):
        MixedEnvironment(environments=[(42, 1.0)])


# -- sampling ----------------------------------------------------------------------------------


def test_sample_rows_carry_prompt_task_and_env_name(mixed):
    rows = mixed.sample_batch(20, seed=1)
    assert len(rows) == 20
    for row in rows:
        env = mixed.get(row["env_name"])
        assert row["prompt"] == row["task"] == env.task


def test_sample_counts_follow_the_weights():
    mixed = MixedEnvironment([(_env("a"), 0.6), (_env("b"), 0.3), (_env("c"), 0.1)])
    n = 20_000
    counts = collections.Counter(r["env_name"] for r in mixed.sample_batch(n, seed=1234))
    for name, p in zip("abc", mixed.probabilities, strict=True):
        # 5 standard deviations of a binomial: a wrong weighting misses by far more.
        sigma = (n * p * (1 - p)) ** 0.5
        assert abs(counts[name] - n * p) < 5 * sigma, (name, counts)


def test_zero_weight_is_never_drawn_but_still_routes():
    mixed = MixedEnvironment([(_env("a"), 1.0), (_env("b"), 0.0)])
    assert {r["env_name"] for r in mixed.sample_batch(500, seed=0)} == {"a"}
    assert _names(mixed.route(["x"], env_name=["b"])) == ["b"]


def test_sampling_is_repeatable_with_a_seed(mixed):
    assert mixed.sample_batch(50, seed=7) == mixed.sample_batch(50, seed=7)
    assert mixed.sample_batch(50, seed=7) != mixed.sample_batch(50, seed=8)


def test_conversational_rows_and_datasets(mixed):
    datasets = pytest.importorskip("datasets")
    rows = mixed.sample_batch(6, seed=0, conversational=True)
    assert rows[0]["prompt"] == [{"role": "user", "content": rows[0]["task"]}]
    ds = datasets.Dataset.from_list(mixed.sample_batch(6, seed=0))
    assert ds.column_names == ["prompt", "task", "env_name"]
    assert len(ds) == 6


@pytest.mark.parametrize("n", [-1, 1.5, True])
def test_bad_sample_size(mixed, n):
    with pytest.raises(ValueError, match="n must be"):
        mixed.sample_batch(n)


# -- routing: every key ------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["env_name", "environment_name"])
def test_route_by_name(mixed, key):
    routed = mixed.route(["a", "b", "c"], **{key: ["two_sum", "Coin_Change", "humaneval/3"]})
    assert _names(routed) == ["two_sum", "coin_change", "humaneval/3"]


@pytest.mark.parametrize("key", ["benchmark", "task_type"])
def test_route_by_benchmark_exact_name_or_single_env_suite(mixed, key):
    routed = mixed.route(["a", "b"], **{key: ["two_sum", "swebench"]})
    assert _names(routed) == ["two_sum", "swebench/django__django-11099"]


@pytest.mark.parametrize("key", ["instance_id", "task_id", "problem_id"])
def test_route_by_task_field(mixed, key):
    routed = mixed.route(
        ["a", "b", "c"], **{key: ["HumanEval/12", "django__django-11099", "coin_change"]}
    )
    assert _names(routed) == ["humaneval/12", "swebench/django__django-11099", "coin_change"]


def test_benchmark_suite_narrowed_by_task_field(mixed):
    routed = mixed.route(["a", "b"], benchmark=["humaneval", "humaneval"], task_id=["12", "3"])
    assert _names(routed) == ["humaneval/12", "humaneval/3"]


def test_one_batch_routes_to_many_environments(mixed):
    routed = mixed.route(
        ["a", "b", "c", "d"],
        env_name=["coin_change", None, float("nan"), ""],
        benchmark=[None, "two_sum", None, None],
        instance_id=[None, None, "django__django-11099", None],
        task_id=[None, None, None, "HumanEval/3"],
    )
    assert _names(routed) == [
        "coin_change", "two_sum", "swebench/django__django-11099", "humaneval/3",
    ]


# -- routing: precedence -----------------------------------------------------------------------


def test_env_name_beats_everything(mixed):
    routed = mixed.route(
        ["a"], env_name=["two_sum"], environment_name=["coin_change"],
        benchmark=["humaneval/3"], task_id=["HumanEval/12"],
    )
    assert _names(routed) == ["two_sum"]


def test_environment_name_beats_benchmark_and_task_fields(mixed):
    routed = mixed.route(
        ["a"], environment_name=["coin_change"], benchmark=["two_sum"], task_id=["humaneval/3"]
    )
    assert _names(routed) == ["coin_change"]


def test_benchmark_beats_task_type_and_task_fields(mixed):
    routed = mixed.route(
        ["a"], benchmark=["two_sum"], task_type=["coin_change"], task_id=["humaneval/3"]
    )
    assert _names(routed) == ["two_sum"]


def test_task_type_used_when_benchmark_matches_nothing(mixed):
    routed = mixed.route(["a"], benchmark=["gsm8k"], task_type=["coin_change"])
    assert _names(routed) == ["coin_change"]


def test_instance_id_beats_task_id(mixed):
    routed = mixed.route(["a"], instance_id=["django__django-11099"], task_id=["two_sum"])
    assert _names(routed) == ["swebench/django__django-11099"]


def test_unmatched_benchmark_falls_through_to_task_fields(mixed):
    routed = mixed.route(["a"], task_type=["code"], task_id=["two_sum"])
    assert _names(routed) == ["two_sum"]


# -- routing: no match -------------------------------------------------------------------------


def test_no_metadata_names_the_index(mixed):
    with pytest.raises(ValueError, match=r"completion 1: no environment .* \{'task_id': 'nope'\}"):
        mixed.route(["a", "b"], task_id=["two_sum", "nope"])


def test_a_row_without_any_routing_column(mixed):
    with pytest.raises(ValueError, match=r"completion 0: .*metadata \{\}"):
        mixed.route(["a"], prompt=["hi"])


def test_an_unknown_env_name_is_an_error_not_a_fall_through(mixed):
    with pytest.raises(ValueError, match=r"completion 0: env_name='tow_sum' names no env"):
        mixed.route(["a"], env_name=["tow_sum"], task_id=["two_sum"])


def test_a_suite_without_a_task_field_is_ambiguous(mixed):
    with pytest.raises(ValueError, match=r"completion 0: suite 'humaneval' holds 2"):
        mixed.route(["a"], benchmark=["humaneval"])


def test_a_task_id_matching_two_suites_is_ambiguous():
    mixed = MixedEnvironment([_env("humaneval/3"), _env("mbpp/3")])
    ambiguous = r"matches several environments \['humaneval/3', 'mbpp/3'\]"
    with pytest.raises(ValueError, match=ambiguous):
        mixed.route(["a"], task_id=["3"])
    assert _names(mixed.route(["a"], benchmark=["mbpp"], task_id=["3"])) == ["mbpp/3"]


def test_a_misaligned_column_is_refused(mixed):
    with pytest.raises(ValueError, match=r"'env_name' has 1 values for 2 completions"):
        mixed.route(["a", "b"], env_name=["two_sum"])
    with pytest.raises(ValueError, match=r"'env_name' must be a list"):
        mixed.route(["a"], env_name="two_sum")


def test_non_column_keywords_are_ignored(mixed):
    routed = mixed.route(
        ["a"], env_name=["two_sum"], trainer_state=object(), log_metric=print, prompts=["p"]
    )
    assert _names(routed) == ["two_sum"]
