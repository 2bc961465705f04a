"""The HTTP reward service against calling the pool directly, on the same pool.

Scores N right ``coin_change``/``knapsack_01`` answers three ways, alternating for ``--rounds``
rounds so every way sees the same machine load:

- ``pool map``: one ``VerifierPool.map`` of all N answers from this process (the best case);
- ``pool, 1 per call``: N single-answer maps from ``--clients`` threads (what a service that
  does not batch would do);
- ``serve``: N single-sample OpenRLHF requests over HTTP to ``deepgym-ray serve``'s deployment
  on 127.0.0.1 from ``--clients`` concurrent clients (batched by ``serve.batch``).

Prints requests per second for each (best round) and serve / pool map.

Usage:
    python bench/serve_load.py [--n 1000] [--clients 64] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import tempfile
import time
import traceback
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiohttp
import ray
from ray import serve

from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig
from deepgym_ray.integrations.serve import ServeSettings, start_service
from deepgym_ray.pool import get_pool
from deepgym_ray.suites import load_environment


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _http_load(url: str, bodies: list[dict], clients: int) -> list[float]:
    queue: asyncio.Queue = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(json.dumps(body))
    rewards: list[float] = []

    async def client(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            body = queue.get_nowait()
            async with session.post(f"{url}/get_reward", data=body) as response:
                rewards.extend((await response.json())["rewards"])

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(client(session) for _ in range(clients)))
    return rewards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False)
    envs = [load_environment("coin_change"), load_environment("knapsack_01")]
    picked = [envs[i % 2] for i in range(args.n)]
    answers = [f"```python\n{e.reference_solution}\n```" for e in picked]
    bodies = [{"query": ["Q:" + a], "prompts": ["Q:"], "labels": [e.name]}
              for a, e in zip(answers, picked, strict=True)]

    folder = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    pool_name = f"bench-{uuid.uuid4().hex[:6]}"
    (folder / "client.yaml").write_text(f"mode: local\npool: {{name: {pool_name}}}\n")
    (folder / "mixed.yaml").write_text("environments: [coin_change, knapsack_01]\n"
                                       "config: client.yaml\n")
    client = DeepGym(config=DeepGymConfig.from_yaml(folder / "client.yaml"))
    pool = get_pool(client)
    url = start_service(ServeSettings(mixed=str(folder / "mixed.yaml"), port=_free_port()))

    def pool_map() -> list:
        return [r.reward for r in pool.map(picked, answers, max_parallel=64)]

    def one_per_call() -> list:
        with ThreadPoolExecutor(args.clients) as threads:
            return list(threads.map(
                lambda i: next(iter(pool.map([picked[i]], [answers[i]], 1))).reward,
                range(args.n)))

    ways = {"pool map": pool_map, "pool, 1 per call": one_per_call,
            "serve": lambda: asyncio.run(_http_load(url, bodies, args.clients))}
    rates: dict[str, list[float]] = {name: [] for name in ways}
    try:
        asyncio.run(_http_load(url, bodies[:args.clients], args.clients))  # warm everything
        for _ in range(args.rounds):
            for name, way in ways.items():
                started = time.perf_counter()
                rewards = way()
                rates[name].append(args.n / (time.perf_counter() - started))
                if sorted(rewards) != [1.0] * args.n:
                    raise SystemExit(f"{name}: not every answer scored 1.0")
        with urllib.request.urlopen(f"{url}/stats") as response:
            stats = json.loads(response.read())
    except BaseException:
        traceback.print_exc()  # now: serve.shutdown() below can take minutes
        raise
    finally:
        serve.shutdown()
        pool.shutdown()
        ray.shutdown()
    print(f"answers: {args.n}  clients: {args.clients}  rounds: {args.rounds}  "
          f"cpus: {os.cpu_count()}")
    for name, values in rates.items():
        print(f"{name:>18}: {max(values):7.1f} req/s  rounds: "
              f"{', '.join(f'{v:.1f}' for v in values)}")
    print(f"service batches: {stats['maps']} pool maps for {stats['items']} samples "
          f"(mean {stats['items'] / max(1, stats['maps']):.1f} per map)")
    print(f"serve / pool map: {max(rates['serve']) / max(rates['pool map']):.2f}")


if __name__ == "__main__":
    main()
