"""``score_dataset`` at dataset scale: driver memory and rows/s over a large dataset with a
provider that does nothing, and real runs' throughput beside ``DeepGym.eval``'s on the same work.

1. ``--rows`` rows (default 100,000) of a Ray Dataset through ``score_dataset`` with the null
   provider of ``bench/pool_dispatch.py`` (every run passes at once), consumed a batch at a
   time as a writer would: rows/s, and the driver's resident memory sampled as it streams (it
   must stay flat: nothing holds the whole dataset).
2. ``--real`` runs (default 2,000) of ``coin_change`` (right and wrong answers) in the local
   sandbox on one pool of ``--in-flight`` slots, which both keep full: ``score_dataset`` (8
   blocks) and ``DeepGym.eval``,
   alternating for ``--rounds`` rounds; the ratio of their rows/s (target: at least 0.9).

Usage:
    python bench/score_dataset.py [--rows 100000] [--real 2000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

import ray

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pool_dispatch import NullProvider, rss_mb  # noqa: E402

from deepgym_ray.client import DeepGym  # noqa: E402
from deepgym_ray.config import DeepGymConfig, PoolConfig  # noqa: E402
from deepgym_ray.integrations.ray_data import score_dataset  # noqa: E402
from deepgym_ray.models import Environment  # noqa: E402
from deepgym_ray.suites import load_environment  # noqa: E402


def config(name: str, actors: int, concurrency: int) -> DeepGymConfig:
    return DeepGymConfig(mode="local", backend="ray", pool=PoolConfig(
        name=f"{name}-{uuid.uuid4().hex[:6]}", actors=actors, actor_concurrency=concurrency,
        num_cpus_per_actor=0))


def null_stream(rows: int, batch_size: int) -> None:
    env = Environment(name="null", verifier_code="return 1.0")
    ds = ray.data.range(rows).map_batches(
        lambda b: {"completion": ["print(1)"] * len(b["id"]), "id": b["id"]},
        batch_format="numpy")
    scored = score_dataset(ds, env, config=config("bench-null", 2, 64),
                           provider=NullProvider, batch_size=batch_size, max_parallel=256,
                           concurrency=2)
    seen = passed = 0
    samples = []
    started = time.monotonic()
    for batch in scored.iter_batches(batch_size=4096, batch_format="pyarrow"):
        seen += batch.num_rows
        passed += sum(1 for r in batch.column("reward").to_pylist() if r == 1.0)
        samples.append((seen, rss_mb()))
    elapsed = time.monotonic() - started
    assert seen == rows and passed == rows, (seen, passed)
    first = next(mb for n, mb in samples if n >= rows // 10)  # once the stream is under way
    print(f"null provider: {rows:,} rows in {elapsed:.1f}s = {rows / elapsed:,.0f} rows/s; "
          f"driver RSS {samples[0][1]:.1f} MB at the first batch, {first:.1f} MB at 10%, "
          f"{max(mb for _, mb in samples):.1f} MB at most, {samples[-1][1]:.1f} MB at the end")


def real_runs(n: int, rounds: int, in_flight: int) -> None:
    env = load_environment("coin_change")
    wrong = "def coin_change(coins, amount):\n    return 0\n"
    codes = [env.reference_solution if i % 2 == 0 else wrong for i in range(n)]
    completions = [f"```python\n{c}\n```" for c in codes]
    made = config("bench-real", 2, in_flight // 2)
    client = DeepGym(config=made)
    client.eval([env] * 64, completions[:64], max_parallel=in_flight)  # warm pool and sandboxes
    # Eight blocks, as eight Parquet files or row groups would be: blocks are what Ray Data
    # spreads over the stage's actors.
    ds = ray.data.from_items([{"completion": c} for c in completions],
                             override_num_blocks=8).materialize()
    ratios = []
    for round_ in range(1, rounds + 1):
        started = time.monotonic()
        result = client.eval([env] * n, completions, max_parallel=in_flight)
        eval_rate = n / (time.monotonic() - started)
        assert sum(r.passed for r in result.results) == n // 2
        started = time.monotonic()
        rewards = [r for b in score_dataset(ds, env, config=made, batch_size=128,
                                            max_parallel=in_flight, concurrency=2)
                   .iter_batches(batch_size=1024, batch_format="pyarrow")
                   for r in b.column("reward").to_pylist()]
        data_rate = n / (time.monotonic() - started)
        assert len(rewards) == n and rewards.count(1.0) == n // 2
        ratios.append(data_rate / eval_rate)
        print(f"round {round_}: eval {eval_rate:.1f} runs/s, score_dataset {data_rate:.1f} "
              f"runs/s: ratio {ratios[-1]:.2f}")
    print(f"real runs ({n} of coin_change, {in_flight} in flight): score_dataset / eval = "
          f"{', '.join(f'{r:.2f}' for r in ratios)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--real", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--in-flight", type=int, default=16)
    args = parser.parse_args()
    ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        if args.rows:
            null_stream(args.rows, args.batch_size)
        if args.real:
            real_runs(args.real, args.rounds, args.in_flight)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
