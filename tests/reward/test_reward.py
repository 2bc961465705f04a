"""RewardFunction, AsyncRewardFunction, MaskedRate and judged-only GRPO advantages."""

from __future__ import annotations

import asyncio
import logging

import pytest
from helpers.pool_providers import make_client, script

from deepgym_ray.models import Environment, RunResult
from deepgym_ray.reward import AsyncRewardFunction, MaskedRate, RewardFunction, grpo_advantages

ENV = Environment(name="scripted", verifier_code="return 1.0")
OTHER = Environment(name="other", verifier_code="return 0.0")


def fenced(text: str) -> str:
    return f"Here is my answer:\n```python\n{text}```\nDone."


@pytest.fixture
def pool_client(scripted_pool):
    """A client scoring on the run's scripted pool."""
    return scripted_pool()


# -- MaskedRate ---------------------------------------------------------------------------------

def test_masked_rate_warns_at_6_of_100_not_at_5(caplog):
    rate = MaskedRate(window=100, threshold=5)
    with caplog.at_level(logging.WARNING, logger="deepgym_ray.masked_rate"):
        rate.update([1.0] * 90 + [None] * 5 + [1.0] * 5)
        assert rate.window_masked == 5 and rate.warnings == 0 and not caplog.records
        rate.update([None])  # a judged sample leaves the window: 6 of the last 100
        assert rate.window_masked == 6 and rate.warnings == 1
    assert len(caplog.records) == 1 and "6 of the last 100" in caplog.records[0].getMessage()
    counts = rate.counts()
    assert counts["total"] == 101 and counts["masked"] == 6 and counts["window_masked"] == 6
    assert counts["rate"] == pytest.approx(0.06)


def test_masked_rate_counts_results_and_rewards_and_rearms():
    rate = MaskedRate(window=10, threshold=1)
    rate.update([RunResult(error_type="sandbox_error"), RunResult(score=0.0, exit_code=1,
                                                                  error_type="solution_error")])
    assert (rate.total, rate.masked) == (2, 1)  # a model fault is a verdict
    rate.update([None])  # 2 of the last 3
    assert rate.warnings == 1
    rate.update([None] * 7)  # still over: no new warning until a whole window has passed
    assert rate.warnings == 1
    rate.update([1.0] * 10)  # back under the threshold...
    assert rate.window_masked == 0
    before = rate.warnings
    rate.update([None] * 2)  # ...then over again: warns again
    assert rate.warnings == before + 1
    with pytest.raises(ValueError, match="window"):
        MaskedRate(window=0)


# -- GRPO advantages ----------------------------------------------------------------------------

def test_grpo_advantages_use_judged_samples_only():
    adv = grpo_advantages([1.0, 0.0, None, 1.0], group_size=None)
    mean, std = 2 / 3, (2 / 9) ** 0.5
    assert adv[2] is None
    assert adv[0] == pytest.approx((1 - mean) / std) and adv[1] == pytest.approx(-mean / std)
    # Groups are separate; a group with nothing judged gets None throughout.
    grouped = grpo_advantages([1.0, 0.0, None, None, 0.5, 0.5], group_size=2)
    assert grouped[:2] == [pytest.approx(1.0), pytest.approx(-1.0)]
    assert grouped[2:4] == [None, None] and grouped[4:] == [0.0, 0.0]
    results = [RunResult(score=1.0, passed=True), RunResult(error_type="sandbox_error",
                                                            passed=True, score=1.0)]
    assert grpo_advantages(results) == [0.0, None]  # an unjudged "pass" is never counted
    assert grpo_advantages([0.2, 0.8], scale=False) == [pytest.approx(-0.3),
                                                         pytest.approx(0.3)]
    with pytest.raises(ValueError, match="groups of 2"):
        grpo_advantages([1.0, 0.0, 1.0], group_size=2)


# -- RewardFunction on the pool -----------------------------------------------------------------

def test_reward_function_scores_through_the_pool(pool_client):
    reward_fn = RewardFunction(ENV, client=pool_client, max_parallel=4)
    completions = [
        fenced(script(score=1.0)),
        fenced(script(score=0.25, sleep=0.1)),
        [{"role": "assistant", "content": fenced(script(fail="always"))}],
        script(score=0.0),  # no fence: the whole answer is the code
    ]
    assert reward_fn(completions) == [1.0, 0.25, None, 0.0]
    assert reward_fn.masked_rate.total == 4 and reward_fn.masked_rate.masked == 1
    assert reward_fn.__name__ == "deepgym_scripted"
    shaped = reward_fn.shaped_rewards([fenced(script(score=0.5, components="fmt:1.0,ok:0.5")),
                                       fenced(script(score=0.5)), fenced(script(fail="always"))])
    assert shaped == [{"fmt": 1.0, "ok": 0.5}, {"score": 0.5}, None]
    per_test = reward_fn.per_test_rewards([fenced(script(score=0.5, cases="1,0")),
                                           fenced(script(fail="always"))])
    assert per_test == [{"test_0": 1.0, "test_1": 0.0, "overall": 0.5}, None]


class Router:
    """The routing interface a MixedEnvironment provides."""

    def route(self, completions, task=None, **kwargs):
        return [ENV if t == "a" else OTHER for t in task]


def test_reward_function_routes_each_completion(pool_client):
    reward_fn = RewardFunction(Router(), client=pool_client)
    results = reward_fn.results([fenced(script(score=1.0))] * 4, task=["a", "b", "b", "a"],
                                prompts=["p"] * 4)
    assert [r.env_name for r in results] == ["scripted", "other", "other", "scripted"]


def test_reward_function_names_bad_input(pool_client):
    reward_fn = RewardFunction(ENV, client=pool_client)
    # A conversation with no answer gets its own result without a verdict, naming it; the
    # rest of the batch is scored as usual.
    fine, unanswered = reward_fn.results([fenced(script(score=1.0)),
                                          [{"role": "user", "content": "hi"}]])
    assert fine.reward == 1.0
    assert not unanswered.has_verdict and unanswered.env_name == "scripted"
    assert "completion 1 has no assistant turn" in unanswered.details
    with pytest.raises(TypeError, match="completions must be a list"):
        reward_fn("just one string")
    with pytest.raises(TypeError, match="route"):
        RewardFunction("scripted")


def test_reward_function_on_the_thread_backend(tmp_path):
    client = make_client(tmp_path, backend="threads")
    reward_fn = RewardFunction(ENV, client=client, max_parallel=2)
    assert reward_fn([fenced(script(score=1.0)), fenced(script(fail="always"))]) == [1.0, None]


def test_async_reward_function_does_not_block_the_loop(pool_client):
    reward_fn = AsyncRewardFunction(ENV, client=pool_client, max_parallel=4)

    async def main():
        ticks = 0
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        rewards = await reward_fn([fenced(script(score=0.5, sleep=0.3))] * 4)
        done.set()
        await task
        return rewards, ticks

    rewards, ticks = asyncio.run(main())
    assert rewards == [0.5] * 4
    assert ticks > 5  # the loop kept running while the batch was scored
    assert reward_fn.masked_rate.total == 4
