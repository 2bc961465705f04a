"""TRL and DAPO reward functions: rewards, component=, logging hooks, routing, auto mode."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from helpers.pool_providers import script

from deepgym_ray import sandboxes
from deepgym_ray.config import PoolConfig
from deepgym_ray.integrations.dapo import make_dapo_reward_fn, make_dapo_shaped_reward_fn
from deepgym_ray.integrations.trl import (
    TRLAsyncRewardFunction,
    TRLRewardFunction,
    make_trl_async_reward_fn,
    make_trl_reward_fn,
    reward_of,
)
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.reward.mixed import MixedEnvironment

ENV = Environment(name="scripted", task="Print directives.", verifier_code="return 1.0")
OTHER = Environment(name="other", task="Other task.", verifier_code="return 1.0")


def fenced(text: str) -> str:
    return f"My answer:\n```python\n{text}```\n"


@pytest.fixture
def client(scripted_pool):
    """A DeepGym client on the run's scripted pool, answering with the scripted test provider."""
    return scripted_pool()


class Recorder:
    """Stands in for TRL's log_metric / log_extra callbacks (same signatures)."""

    def __init__(self):
        self.metrics: list[tuple[str, float]] = []
        self.extra: list[tuple[str, list]] = []

    def log_metric(self, name, value):
        self.metrics.append((name, value))

    def log_extra(self, column, values):
        self.extra.append((column, list(values)))


MIXED_BATCH = [
    fenced(script(score=1.0)),
    fenced(script(score=0.5, components="correctness:0.25,style:1.0")),
    fenced(script(fail="always")),
    fenced(script(score=0.0)),
]


# -- the reward of one result ------------------------------------------------------------------


def test_reward_of_follows_the_contract():
    judged = RunResult(score=0.5, reward_components={"correctness": 0.25})
    assert reward_of(judged) == 0.5
    assert reward_of(judged, "correctness") == 0.25
    assert reward_of(judged, "style") == 0.5  # missing component: falls back to the score
    assert reward_of(RunResult(score=0.7), "correctness") == 0.7  # no components at all
    assert reward_of(RunResult(error_type="sandbox_error", score=1.0), "correctness") is None
    model_fault = RunResult(score=0.0, exit_code=1, error_type="solution_error")
    assert reward_of(model_fault) == 0.0  # the model's own failure is a real 0


# -- the TRL reward function -------------------------------------------------------------------


def test_rewards_with_none_where_there_is_no_verdict(client):
    reward_fn = make_trl_reward_fn(ENV, client, max_parallel=3)
    assert isinstance(reward_fn, TRLRewardFunction)
    assert reward_fn(completions=MIXED_BATCH) == [1.0, 0.5, None, 0.0]


def test_component_returns_that_component_or_the_score(client):
    reward_fn = make_trl_reward_fn(ENV, client, component="correctness")
    assert reward_fn(completions=MIXED_BATCH) == [1.0, 0.25, None, 0.0]
    style = make_trl_reward_fn(ENV, client, component="style")
    assert style(completions=MIXED_BATCH) == [1.0, 1.0, None, 0.0]


def test_logs_no_verdict_rate_and_error_types_the_way_trl_passes_them(client):
    reward_fn = make_trl_reward_fn(ENV, client)
    rec = Recorder()
    rewards = reward_fn(
        prompts=["p"] * 4, completions=MIXED_BATCH, completion_ids=[[1]] * 4,
        trainer_state=object(), log_metric=rec.log_metric, log_extra=rec.log_extra,
    )
    assert rewards[2] is None
    assert rec.metrics == [("deepgym/no_verdict_rate", 0.25)]
    [(column, values)] = rec.extra
    assert column == "error_type"
    assert values[0] is None and values[1] is None and values[3] is None
    assert values[2] == "sandbox_error"


def test_one_column_per_reward_function(client):
    rec = Recorder()
    for fn in (make_trl_reward_fn(ENV, client), make_trl_reward_fn(ENV, client, component="x")):
        fn(completions=MIXED_BATCH[:1], log_metric=rec.log_metric, log_extra=rec.log_extra)
    assert [c for c, _ in rec.extra] == ["error_type", "deepgym_x/error_type"]
    assert [m for m, _ in rec.metrics] == ["deepgym/no_verdict_rate",
                                           "deepgym_x/no_verdict_rate"]


def test_without_trl_callbacks_nothing_is_logged(client):
    # Older TRL passes neither log_metric nor log_extra.
    assert make_trl_reward_fn(ENV, client)(completions=MIXED_BATCH[:2]) == [1.0, 0.5]


def test_conversational_completions(client):
    reward_fn = make_trl_reward_fn(ENV, client)
    completions = [
        [{"role": "assistant", "content": fenced(script(score=0.5))}],
        [{"role": "assistant", "content": None, "tool_calls": [{"name": "run"}]},
         {"role": "tool", "content": "ok"},
         {"role": "assistant", "content": [{"type": "text", "text": fenced(script(score=1.0))}]}],
    ]
    assert reward_fn(completions=completions) == [0.5, 1.0]


def test_trl_names_the_reward_after_the_function():
    trainer_utils = pytest.importorskip("trl.trainer.utils")
    fn = make_trl_reward_fn(ENV, client=object())
    assert trainer_utils.get_callable_name(fn) == "deepgym"
    named = make_trl_reward_fn(ENV, client=object(), component="correctness")
    assert trainer_utils.get_callable_name(named) == "deepgym_correctness"
    assert trainer_utils.get_callable_name(make_trl_reward_fn(ENV, object(), name="r")) == "r"
    assert not trainer_utils.is_async_callable(fn)
    assert trainer_utils.is_async_callable(make_trl_async_reward_fn(ENV, client=object()))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"env": "coin_change"}, TypeError, "env must be an Environment or a MixedEnvironment"),
        ({"max_parallel": 0}, ValueError, "max_parallel must be an int >= 1"),
        ({"component": ""}, ValueError, "component must be"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    args = {"env": ENV, "client": object(), **kwargs}
    with pytest.raises(error, match=message):
        make_trl_reward_fn(**args)


# -- mixed environments ------------------------------------------------------------------------


def test_mixed_routes_by_the_dataset_columns(client):
    mixed = MixedEnvironment(environments=[(ENV, 0.5), (OTHER, 0.5)])
    reward_fn = make_trl_reward_fn(mixed, client)
    completions = [fenced(script(score=1.0)), fenced(script(score=0.5)),
                   fenced(script(score=0.0))]
    results = reward_fn.results(
        completions, env_name=["other", None, "scripted"], task_id=[None, "other", None],
        trainer_state=object(), log_metric=print,
    )
    assert [r.env_name for r in results] == ["other", "other", "scripted"]
    assert [r.reward for r in results] == [1.0, 0.5, 0.0]


def test_mixed_without_a_match_names_the_completion(client):
    reward_fn = make_trl_reward_fn(MixedEnvironment([ENV, OTHER]), client)
    with pytest.raises(ValueError, match=r"completion 1: env_name='nope'"):
        reward_fn(completions=["a", "b"], env_name=["scripted", "nope"])


# -- async -------------------------------------------------------------------------------------


def test_async_reward_function(client):
    reward_fn = make_trl_async_reward_fn(ENV, client, component="correctness")
    assert isinstance(reward_fn, TRLAsyncRewardFunction)
    rec = Recorder()

    async def main():
        return await reward_fn(completions=MIXED_BATCH, log_metric=rec.log_metric)

    assert asyncio.run(main()) == [1.0, 0.25, None, 0.0]
    assert rec.metrics == [("deepgym_correctness/no_verdict_rate", 0.25)]


# -- DAPO --------------------------------------------------------------------------------------


def test_dapo_reward_fn_is_the_trl_reward_fn(client):
    dapo = make_dapo_reward_fn(ENV, client)
    assert isinstance(dapo, TRLRewardFunction) and dapo.component is None
    assert dapo(completions=MIXED_BATCH) == make_trl_reward_fn(ENV, client)(
        completions=MIXED_BATCH) == [1.0, 0.5, None, 0.0]


def test_dapo_shaped_reward_fn_takes_a_component(client):
    shaped = make_dapo_shaped_reward_fn(ENV, component="correctness", client=client)
    assert shaped.__name__ == "deepgym_correctness"
    assert shaped(completions=MIXED_BATCH) == [1.0, 0.25, None, 0.0]
    with pytest.raises(TypeError):
        make_dapo_shaped_reward_fn(ENV, client=client)  # component is required
    with pytest.raises(ValueError, match="component must be a name"):
        make_dapo_shaped_reward_fn(ENV, component="", client=client)


# -- a real environment with reward components, in real local sandboxes ------------------------


def test_component_from_a_real_verifier(ray_local):
    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig
    from deepgym_ray.pool import get_pool
    from deepgym_ray.suites import load_environment

    env = load_environment("roman_numerals")
    config = DeepGymConfig(mode="local", backend="ray", pool=PoolConfig(
        name=f"trl-real-{uuid.uuid4().hex[:8]}", actors=1, actor_concurrency=2,
        num_cpus_per_actor=0))
    client = DeepGym(config=config)
    half_right = env.reference_solution + "\n\ndef from_roman(numeral):\n    return 0\n"
    try:
        to_roman = make_trl_reward_fn(env, client, component="to_roman")
        from_roman = make_dapo_shaped_reward_fn(env, component="from_roman", client=client)
        score = make_trl_reward_fn(env, client)
        completions = [fenced(env.reference_solution), fenced(half_right)]
        assert to_roman(completions=completions) == [1.0, 1.0]
        assert from_roman(completions=completions) == [1.0, 0.0]
        overall = score(completions=completions)
        assert overall[0] == 1.0 and 0.0 < overall[1] < 1.0
    finally:
        get_pool(client).shutdown()


# -- auto mode ---------------------------------------------------------------------------------


@pytest.fixture
def fresh_auto(monkeypatch):
    """Auto mode as a new process sees it (the missing-SDK warning not given yet)."""
    monkeypatch.setattr(sandboxes, "_warned_missing_sdk", set())
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    return monkeypatch


def test_auto_without_a_key_is_local_and_quiet(fresh_auto, caplog):
    fresh_auto.delenv("DAYTONA_API_KEY", raising=False)
    with caplog.at_level(logging.WARNING):
        reward_fn = make_trl_reward_fn(ENV)
    assert reward_fn.client.config.mode == "local"
    assert reward_fn.client.config.backend == "ray"
    # One default client per process: sibling functions share it (and their batches).
    assert make_trl_reward_fn(ENV, component="x").client is reward_fn.client
    assert not [r for r in caplog.records if "DAYTONA" in r.getMessage()]


def test_auto_with_a_key_but_no_sdk_runs_locally_with_one_warning(fresh_auto, caplog):
    import sys

    fresh_auto.setenv("DAYTONA_API_KEY", "test-key")
    fresh_auto.setitem(sys.modules, "daytona", None)  # the SDK is not installed
    env = Environment(name="add", verifier_code=(
        "from deepgym_solution import load_solution\n"
        "return 1.0 if load_solution(solution_path).add(2, 3) == 5 else 0.0\n"))
    with caplog.at_level(logging.WARNING):
        reward_fn = make_trl_reward_fn(env)
        make_trl_async_reward_fn(env)
        make_dapo_reward_fn(env)
        # It really runs, in a local sandbox.
        result = reward_fn.client.run_safe(env, "def add(a, b):\n    return a + b\n")
    warnings = [r for r in caplog.records if "DAYTONA_API_KEY" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert reward_fn.client.config.mode == "local"
    assert result.reward == 1.0 and reward_fn.client.provider.name == "local"


def test_auto_with_a_key_and_the_sdk_picks_daytona(fresh_auto, daytona_server, caplog):
    # The real SDK against the local Daytona server (the client checks the key at creation).
    fresh_auto.setenv("DAYTONA_API_KEY", daytona_server.api_key)
    fresh_auto.setenv("DAYTONA_API_URL", daytona_server.url)
    with caplog.at_level(logging.WARNING):
        reward_fn = make_trl_reward_fn(ENV)
    assert reward_fn.client.config.mode == "daytona"
    assert reward_fn.client.provider.name == "daytona"
    assert not [r for r in caplog.records if "DAYTONA" in r.getMessage()]


def test_an_explicit_client_is_used_as_given(client):
    assert make_trl_reward_fn(ENV, client).client is client


# -- sibling functions (one per component) share one scoring of a batch ------------------------


def _runs(client) -> int:
    from deepgym_ray.pool import get_pool

    return sum(s["runs"] for s in get_pool(client).stats())


def test_sibling_functions_run_the_sandboxes_once_per_batch(client):
    correctness = make_trl_reward_fn(ENV, client, component="correctness")
    style = make_trl_reward_fn(ENV, client, component="style")
    batch = [fenced(script(score=0.5, components="correctness:0.25,style:1.0")),
             fenced(script(score=1.0))]
    start = _runs(client)
    assert correctness(completions=batch) == [0.25, 1.0]
    one_scoring = _runs(client) - start
    assert one_scoring == 2
    assert style(completions=batch) == [1.0, 1.0]
    assert _runs(client) - start == one_scoring  # reused: no sandbox ran
    assert style.results(batch)[0].reward_components == {"correctness": 0.25, "style": 1.0}
    # The same function on the same batch again (TRL's next step) scores again...
    assert _runs(client) - start == 2 * one_scoring
    # ...and a function never takes a batch it scored itself twice over.
    assert style(completions=batch) == [1.0, 1.0]
    assert _runs(client) - start == 3 * one_scoring
    # Each function's own no-verdict tally counts the batches it returned.
    assert correctness._scorer.masked_rate.total == 2
    assert style._scorer.masked_rate.total == 6


def test_sharing_goes_by_content_not_by_the_list_object(client):
    first = make_trl_reward_fn(ENV, client)
    second = make_trl_reward_fn(ENV, client, component="x")
    batch = [fenced(script(score=1.0))]
    assert first(completions=batch) == [1.0]
    batch[0] = fenced(script(score=0.25))  # a caller reusing its list
    assert second(completions=batch) == [0.25]


def test_sharing_needs_the_same_client_and_routing(client, tmp_path):
    mixed = MixedEnvironment([ENV, OTHER])
    a = make_trl_reward_fn(mixed, client)
    b = make_trl_reward_fn(mixed, client, component="x")
    batch = [fenced(script(score=1.0))]
    assert [r.env_name for r in a.results(batch, env_name=["scripted"])] == ["scripted"]
    start = _runs(client)
    # Same completions, another environment: scored anew, against the right environment.
    assert [r.env_name for r in b.results(batch, env_name=["other"])] == ["other"]
    assert _runs(client) - start == 1


def test_async_siblings_gathered_together_share(client):
    correctness = make_trl_async_reward_fn(ENV, client, component="correctness")
    style = make_trl_async_reward_fn(ENV, client, component="style")
    batch = [fenced(script(score=0.5, components="correctness:0.25,style:1.0", sleep=0.3))] * 3

    async def main():
        return await asyncio.gather(correctness(completions=batch), style(completions=batch))

    start = _runs(client)
    assert asyncio.run(main()) == [[0.25] * 3, [1.0] * 3]
    assert _runs(client) - start == 3
