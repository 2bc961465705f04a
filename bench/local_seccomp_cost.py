"""What the local sandbox's syscall filter costs, measured side by side.

Two local providers in one process, one with the filter (``seccomp=True``) and one without,
score the same coin_change completions (half right, half wrong) with ``run_batch``, in
alternating rounds so both see the same load; then a process with the filter and one without
time a plain system call (``os.stat``), a fork and a thread start. Prints the rates, the CPU
per run (a cpuacct cgroup of its own when it can make one, as ``bench/judge_cpu.py`` counts
it) and the ratios.

Usage:
    python bench/local_seccomp_cost.py [--n 64] [--rounds 6]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from judge_cpu import cpu_seconds, own_cgroup  # bench/ is on sys.path when run as a script

from deepgym_ray.client import DeepGym
from deepgym_ray.sandboxes.local import LocalProvider
from deepgym_ray.sandboxes.local.deepgym_seccomp import Installer
from deepgym_ray.sandboxes.local.seccomp import sandbox_filter
from deepgym_ray.suites import load_environment

WRONG = "def coin_change(coins, amount):\n    return -1 if amount else 0\n"
CALLS = r'''
import os, threading, time
t = time.process_time()
for _ in range(200000):
    os.stat("/")
stat = (time.process_time() - t) / 200000 * 1e9
t = time.perf_counter()
for _ in range(200):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
fork = (time.perf_counter() - t) / 200 * 1e6
t = time.perf_counter()
for _ in range(200):
    th = threading.Thread(target=int)
    th.start()
    th.join()
print(stat, fork, (time.perf_counter() - t) / 200 * 1e6)
'''


def batches(n: int, rounds: int) -> dict[bool, tuple[list[float], list[float]]]:
    """Rates (runs/s) and CPU per run (s) of each round, with the filter (True) and without."""
    group = own_cgroup()
    env = load_environment("coin_change")
    outputs = [env.reference_solution if i % 2 == 0 else WRONG for i in range(n)]
    clients, found = {}, {True: ([], []), False: ([], [])}
    for on in (True, False):
        provider = LocalProvider(seccomp=on)
        if on and provider.seccomp is None:
            raise SystemExit("no syscall filter here (see the provider's warning)")
        clients[on] = DeepGym(mode="local", provider=lambda p=provider: p, backend="threads")
        clients[on].run(env, env.reference_solution)  # warm: fork server, zygote
    try:
        for r in range(rounds):
            for on in (True, False) if r % 2 == 0 else (False, True):
                started, cpu = time.perf_counter(), cpu_seconds(group)
                batch = clients[on].run_batch(env, outputs, max_parallel=2)
                found[on][0].append(n / (time.perf_counter() - started))
                found[on][1].append((cpu_seconds(group) - cpu) / n)
                if batch.no_verdict:
                    raise SystemExit(f"{batch.no_verdict} runs without a verdict")
    finally:
        for client in clients.values():
            client.close()
    return found


def calls(rounds: int) -> dict[bool, list[tuple[float, ...]]]:
    """(stat ns, fork+wait us, thread us) of each round, with the filter and without."""
    installer = Installer(sandbox_filter(True))
    found = {True: [], False: []}
    for _ in range(rounds):
        for on in (True, False):
            done = subprocess.run([sys.executable, "-I", "-S", "-c", CALLS], check=True,
                                  capture_output=True, text=True,
                                  preexec_fn=installer if on else None)
            found[on].append(tuple(map(float, done.stdout.split())))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    runs = batches(args.n, args.rounds)
    for on, label in ((True, "filter"), (False, "none  ")):
        rates, cpu = runs[on]
        print(f"{label}: best {max(rates):6.1f} runs/s, median {statistics.median(rates):6.1f};"
              f" cpu per run min {min(cpu) * 1000:.1f} ms, median "
              f"{statistics.median(cpu) * 1000:.1f} ms")
    print(f"rate with/without (best): {max(runs[True][0]) / max(runs[False][0]):.3f}; "
          f"(median): {statistics.median(runs[True][0]) / statistics.median(runs[False][0]):.3f}")
    print(f"cpu per run without/with (min): {min(runs[False][1]) / min(runs[True][1]):.3f}")
    timed = calls(args.rounds)
    for on, label in ((True, "filter"), (False, "none  ")):
        stat, fork, thread = (min(column) for column in zip(*timed[on], strict=True))
        print(f"{label}: os.stat {stat:.0f} ns, fork+wait {fork:.0f} us, thread {thread:.0f} us")


if __name__ == "__main__":
    main()
