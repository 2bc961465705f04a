"""The cost of one call through ``load_solution``: a module function and a method on an
instance, against the same call made in-process, for the judge of this tree ("after") and of
an earlier commit ("before"), side by side.

Each side runs in its own interpreter (both judges have the same module names), against a
solution process started without a sandbox (a sandbox changes the start, not a call), and
alternates with the other over the rounds, so both see the same load. Each call is timed
alone; the median over all calls of all rounds is what is printed, with its ratio to the
median of the same call made in-process in that same interpreter.

Usage:
    python bench/proxy_call.py [--before 942ed32] [--calls 2000] [--rounds 3]

The earlier judge had no handles to instances: its method-call line says so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JUDGE = ROOT / "deepgym_ray" / "judge"

SOLUTION = '''
def add(a, b):
    return a + b


class Counter:
    def __init__(self):
        self.total = 0

    def add(self, a, b):
        self.total += 1
        return a + b
'''

# Runs inside one side's interpreter: argv = judge folder, solution path, calls, rounds.
MEASURE = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from deepgym_solution import load_solution

solution_path, calls = sys.argv[2], int(sys.argv[3])
namespace = {}
exec(open(solution_path).read(), namespace)


def timed(call):
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        call(2, 3)
        out.append(time.perf_counter() - start)
    return out


sol = load_solution(solution_path, timeout=30)
result = {"local_call": timed(namespace["add"]), "proxied_call": timed(sol.add)}
local = namespace["Counter"]()
result["local_method"] = timed(local.add)
try:
    instance = sol.Counter()
    method = instance.add
    method(2, 3)
except Exception as exc:  # the earlier judge: no handles to instances
    result["proxied_method"] = repr(exc)[:120]
else:
    result["proxied_method"] = timed(method)
print(json.dumps(result))
'''


def judge_of(commit: str, into: Path) -> Path:
    """The judge folder of ``commit``, written under ``into``."""
    listing = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", commit,
                              "deepgym_ray/judge/"], capture_output=True, text=True, check=True)
    for name in listing.stdout.split():
        if name.endswith(".py"):
            text = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{name}"],
                                  capture_output=True, text=True, check=True).stdout
            (into / Path(name).name).write_text(text)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="942ed32", help="commit of the earlier judge")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "before").mkdir()
        sides = {"before": judge_of(args.before, tmp_path / "before"), "after": JUDGE}
        solution = tmp_path / "solution.py"
        solution.write_text(SOLUTION)
        samples: dict[str, dict[str, list[float] | str]] = {side: {} for side in sides}
        for _ in range(args.rounds):
            for side, folder in sides.items():
                out = subprocess.run([sys.executable, "-c", MEASURE, str(folder), str(solution),
                                      str(args.calls)], capture_output=True, text=True,
                                     check=True, cwd=tmp)
                for key, value in json.loads(out.stdout).items():
                    if isinstance(value, list):
                        samples[side].setdefault(key, []).extend(value)  # type: ignore[union-attr]
                    else:
                        samples[side][key] = value
    report(samples, args)


def report(samples: dict, args: argparse.Namespace) -> None:
    print(f"{args.rounds} rounds x {args.calls} calls per side; medians per call")
    for side in ("before", "after"):
        data = samples[side]
        for what in ("call", "method"):
            local = statistics.median(data[f"local_{what}"]) * 1e6
            proxied = data[f"proxied_{what}"]
            if isinstance(proxied, str):
                print(f"  {side:6} {what:6}: not possible ({proxied})")
                continue
            median = statistics.median(proxied) * 1e6
            print(f"  {side:6} {what:6}: {median:8.1f} us through the proxy, {local:.2f} us "
                  f"in-process ({median / local:,.0f}x)")
    before, after = samples["before"], samples["after"]
    ratio = statistics.median(after["proxied_call"]) / statistics.median(before["proxied_call"])
    print(f"after/before, one proxied call: {ratio:.2f}")


if __name__ == "__main__":
    main()
