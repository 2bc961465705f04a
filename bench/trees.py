"""This tree against an earlier commit's, measured side by side (for the bench scripts).

The earlier commit is checked out in a temporary git worktree; each measurement runs in a fresh
process whose ``PYTHONPATH`` (and working directory) puts that tree's package first, and prints
its result as JSON on its last line. Callers alternate the trees' order round by round, so both
see the same load.

Example:
    with worktrees("152f9f7") as trees:          # {"before": Path, "after": ROOT}
        result = run_in(trees["before"], MEASURE, "64")
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def worktrees(before: str, after: str | None = None) -> Iterator[dict[str, Path]]:
    """{"before": a worktree of ``before``, "after": one of ``after``, or this tree}."""
    with tempfile.TemporaryDirectory(prefix="deepgym-before-") as tmp:
        made = []
        try:
            for name, rev in (("before", before), ("after", after)):
                if rev is not None:
                    made.append(Path(tmp) / name)
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach",
                                    str(made[-1]), rev], check=True, capture_output=True)
            yield {"before": made[0], "after": made[1] if after else ROOT}
        finally:
            for tree in made:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(tree)], capture_output=True)


def run_in(tree: Path, code: str, *args: str, timeout: float = 1800) -> dict:
    """Run ``code`` (``python -c``) with ``tree``'s package first; the JSON it printed last.
    ``code`` finds the bench folder in ``BENCH_DIR`` and reports ``package`` (where
    deepgym_ray came from), which must be ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "BENCH_DIR": str(ROOT / "bench")}
    env.pop("RAY_ADDRESS", None)
    # cwd: the tree, since `python -c` puts the working directory first on sys.path.
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=str(tree),
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"the run on {tree} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.splitlines()[-1])
    if not result["package"].startswith(str(tree)):
        raise SystemExit(f"measured {result['package']}, not the tree {tree}")
    return result
