"""``score_dataset`` on Ray Data's own streaming executor, the session's local Ray instance and
a pool of real local sandboxes: every row gets its verdict (or none, and why), routed by its own
metadata, through Parquet and back."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.cli import make_outage_env

ray = pytest.importorskip("ray")

from deepgym_ray.config import DeepGymConfig, PoolConfig  # noqa: E402
from deepgym_ray.exceptions import ProviderUnavailableError  # noqa: E402
from deepgym_ray.integrations.ray_data import score_dataset  # noqa: E402
from deepgym_ray.reward.mixed import MixedEnvironment  # noqa: E402
from deepgym_ray.suites import load_environment  # noqa: E402

WRONG = "```python\ndef {name}(*args):\n    raise ValueError('no idea')\n```"


@pytest.fixture(scope="module")
def config(ray_local):
    from deepgym_ray.client import DeepGym
    from deepgym_ray.pool import get_pool

    made = DeepGymConfig(mode="local", backend="ray", pool=PoolConfig(
        name=f"ray-data-{uuid.uuid4().hex[:8]}", actors=2, actor_concurrency=4,
        num_cpus_per_actor=0, max_retries=1))
    named_before = {(a["namespace"], a["name"]) for a in ray.util.list_named_actors(True)}
    yield made
    get_pool(DeepGym(config=made)).shutdown()
    # Ray Data leaves its helper actors (stats, autoscaling, locality) in the instance, each
    # idling at about 0.5 CPU-s a minute for the rest of this worker's session; the next
    # dataset makes them again.
    for actor in ray.util.list_named_actors(True):
        if (actor["namespace"], actor["name"]) not in named_before:
            ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]))


def _fenced(code: str) -> str:
    return f"Here it is.\n```python\n{code}\n```"


def test_mixed_rows_get_their_verdicts_through_parquet(config, tmp_path):
    coin, fib = load_environment("coin_change"), load_environment("fibonacci_mod")
    outage = load_environment(str(make_outage_env(tmp_path / "outage")))
    mixed = MixedEnvironment([coin, fib, outage])
    rows = [
        {"id": 0, "env_name": "coin_change", "completion": _fenced(coin.reference_solution)},
        {"id": 1, "env_name": "fibonacci_mod", "completion": _fenced(fib.reference_solution)},
        {"id": 2, "env_name": "coin_change", "completion": WRONG.format(name="coin_change")},
        {"id": 3, "env_name": "outage", "completion": "print(1)"},
        {"id": 4, "env_name": "no_such_env", "completion": _fenced(coin.reference_solution)},
    ] * 3
    rows = [{**row, "id": i} for i, row in enumerate(rows)]
    source = tmp_path / "in"  # three files: three blocks for the stage's actors
    source.mkdir()
    for part in range(3):
        pq.write_table(pa.Table.from_pylist(rows[part::3]), source / f"{part}.parquet")

    scored = score_dataset(ray.data.read_parquet(str(source)), mixed, config=config,
                           details=True, batch_size=4, max_parallel=4)
    out = tmp_path / "out"
    scored.write_parquet(str(out))
    back = {r["id"]: r for r in pq.read_table(out).to_pylist()}

    assert sorted(back) == list(range(len(rows)))  # every row once
    for i, row in back.items():
        kind = i % 5
        assert row["env_name"] == rows[i]["env_name"] and row["completion"] is not None
        if kind in (0, 1):
            assert (row["reward"], row["has_verdict"], row["error_type"]) == (1.0, True, ""), row
        elif kind == 2:
            assert row["reward"] == 0.0 and row["has_verdict"], row
        else:  # an outage, an unknown environment: no verdict, never a 0
            assert row["reward"] is None and not row["has_verdict"] and row["error_type"], row
    assert "no_such_env" in back[4]["details"] and "not routed" in back[4]["details"]
    assert back[3]["error_type"] == "verifier_error", back[3]


def test_conversations_against_one_environment_by_name(config):
    env = load_environment("coin_change")
    answered = [{"role": "user", "content": env.task},
                {"role": "assistant", "content": _fenced(env.reference_solution)}]
    unanswered = [{"role": "user", "content": env.task}]
    ds = ray.data.from_items([{"n": 0, "chat": answered}, {"n": 1, "chat": unanswered}])
    scored = score_dataset(ds, "coin_change", "chat", config=config)
    assert scored.schema().names == ["n", "chat", "reward", "has_verdict", "error_type"]
    right, missing = sorted(scored.take_all(), key=lambda r: r["n"])
    assert (right["reward"], right["has_verdict"], right["error_type"]) == (1.0, True, "")
    # No assistant turn: nothing to run, so no verdict (and not the model's 0).
    assert missing["reward"] is None and not missing["has_verdict"] and missing["error_type"]


def test_bad_settings_are_named_before_anything_runs(config, monkeypatch):
    ds = ray.data.from_items([{"completion": "x", "reward": 1.0}])
    with pytest.raises(ValueError, match="no column 'answer'.*completion"):
        score_dataset(ds, "coin_change", "answer", config=config)
    with pytest.raises(ValueError, match=r"already has column\(s\) \['reward'\]"):
        score_dataset(ds, "coin_change", config=config)
    plain = ray.data.from_items([{"completion": "x"}])
    with pytest.raises(TypeError, match="Environment, its name or a MixedEnvironment"):
        score_dataset(plain, 42, config=config)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        score_dataset(plain, "coin_change", config=config, batch_size=0)
    with pytest.raises(ValueError, match="unknown environment|no_such"):
        score_dataset(plain, "no_such_environment_here", config=config)
    monkeypatch.delenv("DAYTONA_API_KEY", raising=False)
    with pytest.raises(ProviderUnavailableError, match="DAYTONA_API_KEY"):
        score_dataset(plain, "coin_change", config=DeepGymConfig(mode="daytona"))
