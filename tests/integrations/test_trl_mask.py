"""mask_unjudged: with several reward functions, a completion deepgym could not judge is left
out of TRL's advantages (TRL 1.16 masks a completion only when every function returns None).

The wrappers' sharing rules are checked on plain functions; then a real GRPOTrainer step (TRL's
own reward and advantage code, a tiny local model) with a real deepgym reward function whose
provider refuses about half of the answers, beside a length reward weighted 0.5.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import threading

import pytest
from helpers.pool_providers import FlakyProvider, provider_fails

from deepgym_ray import mask_unjudged

trl = pytest.importorskip("trl")

BATCH = ["a", "bb", "ccc", "dddd"]


class Judge:
    """A deepgym-like function: None (no verdict) for odd lengths; counts its calls."""

    def __init__(self):
        self.calls = 0
        self.__name__ = "deepgym"

    def __call__(self, completions, **kwargs):
        self.calls += 1
        return [None if len(c) % 2 else 1.0 for c in completions]


class AsyncJudge(Judge):
    async def __call__(self, completions, **kwargs):
        await asyncio.sleep(0)  # let a sibling in while this one scores
        return super().__call__(completions, **kwargs)


def length(completions, **kwargs):
    return [float(len(c)) for c in completions]


async def async_length(completions, **kwargs):
    return [float(len(c)) for c in completions]


def test_others_get_none_where_deepgym_had_none_in_any_order():
    judge = Judge()
    ours, other = mask_unjudged(judge, length)
    # The other function first: it runs deepgym, which then answers from that same scoring.
    assert other(completions=BATCH, prompts=["p"] * 4) == [None, 2.0, None, 4.0]
    assert ours(completions=BATCH, prompts=["p"] * 4) == [None, 1.0, None, 1.0]
    assert judge.calls == 1
    # TRL's next step (a new list, same text): scored again, and again only once.
    step = list(BATCH)
    assert ours(completions=step) == [None, 1.0, None, 1.0]
    assert other(completions=step) == [None, 2.0, None, 4.0]
    assert judge.calls == 2
    # The same wrapper twice on one list is two calls; a caller reusing its list is seen.
    assert ours(completions=step) == [None, 1.0, None, 1.0]
    assert judge.calls == 3
    step[0] = "aa"
    assert other(completions=step) == [2.0, 2.0, None, 4.0]
    assert judge.calls == 4


def test_trl_sees_the_names_and_the_async_kinds():
    from trl.trainer.utils import get_callable_name, is_async_callable

    sync_funcs = mask_unjudged(Judge(), length, async_length)
    assert [get_callable_name(f) for f in sync_funcs] == ["deepgym", "length", "async_length"]
    assert [is_async_callable(f) for f in sync_funcs] == [False, False, True]
    async_funcs = mask_unjudged(AsyncJudge(), length)
    assert [is_async_callable(f) for f in async_funcs] == [True, True]
    assert [get_callable_name(f) for f in async_funcs] == ["deepgym", "length"]


def test_async_wrappers_gathered_in_any_order_share_one_scoring():
    judge = AsyncJudge()
    ours, other, other_async = mask_unjudged(judge, length, async_length)

    async def main(batch):
        return await asyncio.gather(other_async(completions=batch), ours(completions=batch),
                                    other(completions=batch))

    assert asyncio.run(main(BATCH)) == [[None, 2.0, None, 4.0], [None, 1.0, None, 1.0],
                                        [None, 2.0, None, 4.0]]
    assert judge.calls == 1


def test_sync_deepgym_with_async_others_on_another_thread_like_trl():
    # TRL calls the synchronous functions on its own thread, then gathers the async ones on
    # its event loop's thread: the async wrappers take the scoring the sync one made.
    judge = Judge()
    ours, other_async = mask_unjudged(judge, async_length)
    assert ours(completions=BATCH) == [None, 1.0, None, 1.0]
    out = {}
    thread = threading.Thread(target=lambda: out.update(
        r=asyncio.run(other_async(completions=BATCH))))
    thread.start()
    thread.join()
    assert out["r"] == [None, 2.0, None, 4.0] and judge.calls == 1
    # Without the deepgym wrapper called at all, the async wrapper scores (off its loop).
    assert asyncio.run(other_async(completions=["xy", "x"])) == [2.0, None]
    assert judge.calls == 2


def test_a_failed_scoring_reaches_every_waiter_and_is_not_kept():
    class Broken(AsyncJudge):
        async def __call__(self, completions, **kwargs):
            self.calls += 1
            await asyncio.sleep(0)
            raise ConnectionError("pool gone")

    judge = Broken()
    ours, other = mask_unjudged(judge, length)

    async def main():
        return await asyncio.gather(ours(completions=BATCH), other(completions=BATCH),
                                    return_exceptions=True)

    results = asyncio.run(main())
    assert [type(r) for r in results] == [ConnectionError, ConnectionError]
    assert judge.calls == 1
    with pytest.raises(ConnectionError):  # tried again, not the recorded failure
        asyncio.run(other(completions=BATCH))
    assert judge.calls == 2


def test_bad_calls_and_arguments_are_named():
    ours, other = mask_unjudged(Judge(), lambda completions, **kw: [1.0])
    with pytest.raises(TypeError, match="keyword arguments"):
        ours(BATCH)
    with pytest.raises(ValueError, match="returned 1 rewards for 4 completions"):
        other(completions=BATCH)
    with pytest.raises(TypeError, match="not a reward function"):
        mask_unjudged(Judge(), "length")


# --- TRL's own GRPOTrainer -----------------------------------------------------------------

ENVS = ("coin_change", "max_subarray_sum")


def completion_length(completions, **kwargs):
    return [len(c) / 10 for c in completions]


def _hand_advantages(rewards, groups):
    """TRL's sum_then_normalize by hand over the rows that have a reward: group mean and
    (Bessel) std of those, (r - mean) / (std + 1e-4); a lone or missing row gets 0."""
    out = []
    for i, reward in enumerate(rewards):
        mates = [rewards[j] for j in range(len(rewards))
                 if groups[j] == groups[i] and rewards[j] is not None]
        if reward is None or len(mates) < 2:
            out.append(0.0)
            continue
        out.append((reward - statistics.mean(mates)) / (statistics.stdev(mates) + 1e-4))
    return out


@pytest.fixture(scope="module")
def tiny_setup(tmp_path_factory):
    datasets = pytest.importorskip("datasets")
    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig
    from deepgym_ray.integrations.tiny import build_tiny_model
    from deepgym_ray.reward.mixed import MixedEnvironment
    from deepgym_ray.suites import load_environment

    mixed = MixedEnvironment(environments=[(load_environment(n), 0.5) for n in ENVS])
    dataset = datasets.Dataset.from_list(mixed.sample_batch(16, seed=3))
    client = DeepGym(config=DeepGymConfig(mode="local", backend="threads"),
                     provider=FlakyProvider)
    model = build_tiny_model(tmp_path_factory.mktemp("tiny"),
                             texts=[e.task for e in mixed.environments])
    return mixed, dataset, client, model


def _one_step(tmp_path, tiny_setup, reward_funcs):
    from trl import GRPOConfig, GRPOTrainer

    _, dataset, _, model = tiny_setup
    args = GRPOConfig(
        output_dir=str(tmp_path / "run"), max_steps=1, per_device_train_batch_size=8,
        num_generations=4, max_completion_length=24, learning_rate=1e-3, logging_steps=1,
        use_cpu=True, save_strategy="no", report_to=[], seed=0, reward_weights=[1.0, 0.5])
    trainer = GRPOTrainer(model=str(model), reward_funcs=reward_funcs, args=args,
                          train_dataset=dataset)
    trainer.train()
    logs = trainer._logs
    deepgym = [None if math.isnan(r) else r for r in logs["rewards"]["deepgym"]]
    other = [None if math.isnan(r) else r for r in logs["rewards"]["completion_length"]]
    return list(logs["completion"]), deepgym, other, list(logs["advantages"])


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_grpo_trainer_leaves_no_verdict_completions_out(tmp_path, tiny_setup, kind):
    from deepgym_ray.completions import completion_to_code
    from deepgym_ray.integrations.trl import make_trl_async_reward_fn, make_trl_reward_fn

    mixed, _, client, _ = tiny_setup
    make = make_trl_reward_fn if kind == "sync" else make_trl_async_reward_fn
    groups = [i // 4 for i in range(8)]

    # Unwrapped (the issue): a no-verdict completion still gets an advantage from its length.
    plain = [make(mixed, client, max_parallel=8), completion_length]
    completions, deepgym, other, advantages = _one_step(tmp_path / "plain", tiny_setup, plain)
    missing = [i for i, r in enumerate(deepgym) if r is None]
    assert missing and len(missing) < 8, deepgym  # the provider refused some, not all
    assert all(other[i] is not None for i in missing)
    assert any(advantages[i] != 0.0 for i in missing), (deepgym, other, advantages)

    # Wrapped: the length reward is None there too, so TRL gives them exactly 0 and leaves
    # them out of their group's mean and std.
    wrapped = mask_unjudged(make(mixed, client, max_parallel=8), completion_length)
    completions, deepgym, other, advantages = _one_step(tmp_path / "masked", tiny_setup,
                                                        wrapped)
    missing = [i for i, r in enumerate(deepgym) if r is None]
    assert missing and len(missing) < 8, deepgym
    for i, completion in enumerate(completions):
        refused = provider_fails(completion_to_code(completion).encode("utf-8"))
        assert (deepgym[i] is None) == refused, (i, completion)
        assert (other[i] is None) == refused
        if refused:
            assert advantages[i] == 0.0
    combined = [None if d is None else d + 0.5 * o for d, o in zip(deepgym, other, strict=True)]
    assert advantages == pytest.approx(_hand_advantages(combined, groups), abs=1e-4)
