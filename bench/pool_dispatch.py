"""Pool dispatch rate with a provider that does nothing, and the driver's memory over a stream.

The provider answers every run at once, the way the judge runner does (a token-tagged final
line), so what is measured is the whole path minus the sandbox: the driver's map loop, Ray,
the actors and the client's judge code. Answers are generated lazily and results are counted,
not kept, so the driver's memory should stay flat however long the stream.

Besides the rate it prints the rate of each tenth of the stream (a cost that grows with N shows
as a falling rate) and the CPU time (user + system) the driver, the actors and Ray's own
processes (GCS, raylet, agents) spent per completion: on a machine shared with other work the
wall rate swings with their load, the CPU a completion costs much less.

Usage:
    python bench/pool_dispatch.py [--n 100000] [--max-parallel 512] [--actors 2]

Targets: at least 10,000 completions/s at 1,000,000 on the 2-core machine; driver RSS flat (the
last sample within a few MB of the first after warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Mapping, Sequence

import ray.cloudpickle

from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig, PoolConfig
from deepgym_ray.models import Environment
from deepgym_ray.pool import VerifierPool
from deepgym_ray.sandboxes.base import CommandResult, Sandbox, SandboxProvider

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # actors need no path to it


class NullProvider(SandboxProvider):
    """Every run passes at once; files are dropped. Only the runner's reply is imitated."""

    name = "null"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def create(self, env: Environment) -> Sandbox:
        return Sandbox(id="null", provider=self.name)

    def put_files(self, sandbox: Sandbox, files: Mapping[str, bytes]) -> None:
        pass

    def run(self, sandbox: Sandbox, command: Sequence[str], *, timeout: float,
            stdin: bytes | None = None, env: Mapping[str, str] | None = None) -> CommandResult:
        if self.delay:
            time.sleep(self.delay)
        token = json.loads(stdin or b"{}")["token"]
        final = {"kind": "verdict", "score": 1.0, "passed": True, "exit_code": 0,
                 "in_play": True, "final": True}
        return CommandResult(exit_code=0, stdout=f"{token} {json.dumps(final)}\n".encode())

    def destroy(self, sandbox: Sandbox) -> None:
        pass


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ray_system_pids() -> list[int]:
    """The pids of this Ray session's own processes (GCS, raylet, agents): their command
    lines name the session."""
    session = ray._private.worker.global_worker.node.session_name.encode()
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if entry.isdigit() and session in f.read():
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def make_pool(actors: int, concurrency: int, delay: float = 0.0) -> VerifierPool:
    pool = PoolConfig(name=f"bench-{uuid.uuid4().hex[:6]}", actors=actors,
                      actor_concurrency=concurrency, num_cpus_per_actor=0)
    client = DeepGym(config=DeepGymConfig(mode="local", pool=pool),
                     provider=lambda: NullProvider(delay))
    return VerifierPool(client)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--max-parallel", type=int, default=512)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()

    env = Environment(name="null", verifier_code="return 1.0")
    pool = make_pool(args.actors, args.concurrency)
    try:
        for _ in pool.map(env, ("print(1)" for _ in range(5000)), args.max_parallel):
            pass  # warm-up: workers, imports, env caches
        actor_pids = [s["pid"] for s in pool.stats()]
        system_pids = ray_system_pids()
        samples, rates = [], []
        every = max(1, args.n // 10)
        passed = 0
        cpu_before = (cpu_seconds(), sum(cpu_seconds(p) for p in actor_pids),
                      sum(cpu_seconds(p) for p in system_pids))
        start = last = time.perf_counter()
        answers = (f"print({i})" for i in range(args.n))
        for i, result in enumerate(pool.map(env, answers, args.max_parallel), 1):
            passed += result.passed
            if i % every == 0:
                samples.append(round(rss_mb(), 1))
                now = time.perf_counter()
                rates.append(round(every / (now - last)))
                last = now
        elapsed = time.perf_counter() - start
        driver_cpu = cpu_seconds() - cpu_before[0]
        actors_cpu = sum(cpu_seconds(p) for p in actor_pids) - cpu_before[1]
        system_cpu = sum(cpu_seconds(p) for p in system_pids) - cpu_before[2]
    finally:
        pool.shutdown()
    rate = args.n / elapsed
    print(f"completions: {args.n} (passed {passed}) in {elapsed:.2f}s -> {rate:.0f}/s "
          f"(target >= 10000/s: {rate / 10000:.2f} of it)")
    print(f"rate per tenth of the stream: {rates}")
    print(f"CPU per completion: driver {driver_cpu / args.n * 1e6:.0f} us, actors "
          f"{actors_cpu / args.n * 1e6:.0f} us, Ray's own processes "
          f"{system_cpu / args.n * 1e6:.0f} us (load average {os.getloadavg()[0]:.1f})")
    print(f"driver RSS MB every {every}: {samples}")
    print(f"driver RSS growth first->last sample: {samples[-1] - samples[0]:+.1f} MB")


if __name__ == "__main__":
    main()
