"""What the guard (deepgym_guard, deepgym_taint) costs a forked judge runner, side by side.

Two copies of the judge's files: as they are, and with the guard left out (``install`` returns a
stub, nothing is watched). Each copy gets a warm parent that has imported the runner and its
modules, as the local fork server and the Docker agent do, and forks one runner per run (a
verifier with a dataclass and 30 calls through ``load_solution``; its solution processes
start plainly). Runs alternate between the two parents one by one, so load from other work
falls on both alike; printed: the runner's own CPU per run (its ``timings``), both medians and
the median of the paired differences.

Usage:
    python bench/guard_cost.py [--runs 400]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

JUDGE = Path(__file__).resolve().parents[1] / "deepgym_ray" / "judge"
VERIFIER = '''
import json, dataclasses
from deepgym_solution import load_solution

@dataclasses.dataclass
class Case:
    given: list
    want: int

def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    cases = [Case([1, 2, 3], 6), Case([4, 5], 9), Case([], 0)] * 10
    ok = sum(sol.total(c.given) == c.want for c in cases)
    return {"score": ok / len(cases), "details": json.dumps({"n": len(cases)})}
'''
SOLUTION = "def total(xs):\n    return sum(xs)\n"
STUB = '''    class _Stub:  # the benchmark's copy without the guard
        produced = None

        def refusal(self):
            return None

        def trusted(self):
            return contextlib.nullcontext()

        def own_code(self, code):
            pass

    return _Stub()
'''


def copies(root: Path) -> dict[str, Path]:
    """The judge's files as they are ("with") and without the guard ("without")."""
    out = {}
    for name in ("with", "without"):
        out[name] = root / name
        shutil.copytree(JUDGE, out[name], ignore=shutil.ignore_patterns("__pycache__"))
    guard, runner = out["without"] / "deepgym_guard.py", out["without"] / "deepgym_runner.py"
    text = guard.read_text()
    anchor = "    guard = Guard(solution, solution_dir, uid, verifier, tests)\n"
    guard.write_text(text.replace(anchor, STUB + anchor))
    watch = "    deepgym_taint.watch(guard.produced, deepgym_proxy, deepgym_proc)\n"
    runner.write_text(runner.read_text().replace(watch, ""))
    return out


def serve(judge: str) -> None:
    """A warm parent: one forked runner per line read; its timings written back."""
    sys.path[:0] = [judge]
    for name in ("ast", "importlib.util", "resource", "traceback", "types", "json",
                 "dataclasses", "deepgym_wire", "deepgym_proc", "deepgym_worker",
                 "deepgym_spawn", "deepgym_remote", "deepgym_proxy", "deepgym_solution",
                 "deepgym_cases", "deepgym_runner"):
        __import__(name)
    sys.modules["deepgym_spawn"].worker_program(sys.executable)
    for _ in sys.stdin:
        print(json.dumps(one()), flush=True)


def one() -> float:
    work, sol = tempfile.mkdtemp(prefix="dg-guard-"), tempfile.mkdtemp(prefix="dg-guard-sol-")
    for name, text in (("verifier.py", VERIFIER), ("solution.py", SOLUTION)):
        Path(work, name).write_text(text)
    token = secrets.token_hex(16)
    config = {"token": token, "verifier": "verifier.py", "solution": "solution.py",
              "timeout": 30, "case_timeout": 5, "shape": "module", "solution_dir": sol,
              "launch": {"kind": "plain", "prefix": [], "python": sys.executable}}
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    os.write(w_in, (json.dumps(config) + "\n").encode())
    os.close(w_in)
    pid = os.fork()
    if pid == 0:
        os.dup2(r_in, 0)
        os.dup2(w_out, 1)
        os.chdir(work)
        os.setsid()
        sys.modules["deepgym_runner"].main()  # ends with os._exit
    os.close(r_in)
    os.close(w_out)
    data = b""
    while chunk := os.read(r_out, 1 << 16):
        data += chunk
    os.close(r_out)
    os.waitpid(pid, 0)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(sol, ignore_errors=True)
    lines = [line.split(" ", 1)[1] for line in data.decode().splitlines()
             if line.startswith(token + " ")]
    final = json.loads(lines[-1])
    assert final.get("score") == 1.0, final
    return final["timings"]["cpu_shut_down"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    root = Path(tempfile.mkdtemp(prefix="dg-guard-bench-"))
    try:
        dirs = copies(root)
        parents = {name: subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", __file__, "--serve", str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for name, path in dirs.items()}

        def run(name: str) -> float:
            parents[name].stdin.write("go\n")
            parents[name].stdin.flush()
            return json.loads(parents[name].stdout.readline())

        for name in parents:  # warm-up
            for _ in range(5):
                run(name)
        cpu: dict[str, list[float]] = {"with": [], "without": []}
        for i in range(args.runs):
            for name in ("with", "without") if i % 2 == 0 else ("without", "with"):
                cpu[name].append(run(name))
        for parent in parents.values():
            parent.stdin.close()
            parent.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for name in ("with", "without"):
        print(f"{name:>7} the guard: runner CPU per run, median "
              f"{statistics.median(cpu[name]) * 1e3:.2f} ms ({len(cpu[name])} runs)")
    diff = [a - b for a, b in zip(cpu["with"], cpu["without"], strict=True)]
    print(f"paired difference: median {statistics.median(diff) * 1e3:.2f} ms, "
          f"mean {statistics.mean(diff) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
