"""CPU per judged run: the local provider with its runner fork server against starting the
runner by exec, side by side.

CPU is what a judged run costs a busy machine, and it barely depends on the load of others.
``RUSAGE_CHILDREN`` cannot see it all (processes in a PID namespace, and the fork server's
runners, are never reaped by this process), so this script counts it with a cgroup-v1
``cpuacct`` group of its own when it can create one (root), and says so when it cannot.

Usage:
    python bench/judge_cpu.py [--n 20] [--rounds 2] [--envs humaneval/0,coin_change]

Prints, for each environment, ms of CPU and of wall time per run for both ways and their ratio.
"""

from __future__ import annotations

import argparse
import atexit
import os
import resource
import time
from pathlib import Path

from deepgym_ray.client import DeepGym
from deepgym_ray.sandboxes.local import LocalProvider
from deepgym_ray.suites import load_environment

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def own_cgroup() -> Path | None:
    """A cpuacct group holding this process (and so every process it starts), or None."""
    group = CPUACCT / f"deepgym-bench-{os.getpid()}"
    try:
        group.mkdir()
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return None

    def remove() -> None:
        try:
            (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
            for _ in range(50):  # children still leaving keep it busy for a moment
                try:
                    group.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)
        except OSError:
            pass

    atexit.register(remove)
    return group


def cpu_seconds(group: Path | None) -> float:
    """CPU seconds so far: of the cgroup when there is one, else this process and its reaped
    children (an undercount, see the module docstring)."""
    if group is not None:
        return int((group / "cpuacct.usage").read_text()) / 1e9
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(fork_server: bool, env, n: int, group: Path | None) -> tuple[float, float]:
    provider = LocalProvider(fork_server=fork_server)
    client = DeepGym(provider=provider)
    try:
        client.run(env, env.reference_solution)  # warm: probe, server start, caches
        started, cpu = time.perf_counter(), cpu_seconds(group)
        for _ in range(n):
            result = client.run(env, env.reference_solution)
            if result.score != 1.0:
                raise SystemExit(f"{env.name}: the reference scored {result.score}")
        return (cpu_seconds(group) - cpu) / n * 1000, (time.perf_counter() - started) / n * 1000
    finally:
        provider.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--envs", default="humaneval/0,coin_change")
    args = parser.parse_args()
    group = own_cgroup()
    print("CPU counted by", "a cpuacct cgroup" if group else
          "rusage (undercounts: cannot see PID-namespaced or forked-runner CPU)")
    for name in args.envs.split(","):
        env = load_environment(name)
        best = {True: (1e9, 1e9), False: (1e9, 1e9)}
        for _ in range(args.rounds):  # alternate, so both see the same load
            for fork_server in (False, True):
                cpu, wall = measure(fork_server, env, args.n, group)
                best[fork_server] = (min(best[fork_server][0], cpu),
                                     min(best[fork_server][1], wall))
        (exec_cpu, exec_wall), (fork_cpu, fork_wall) = best[False], best[True]
        print(f"{name}: exec runner {exec_cpu:.1f} ms CPU, {exec_wall:.1f} ms wall per run; "
              f"fork server {fork_cpu:.1f} ms CPU, {fork_wall:.1f} ms wall per run; "
              f"CPU ratio fork/exec {fork_cpu / exec_cpu:.2f}")


if __name__ == "__main__":
    main()
