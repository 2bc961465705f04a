"""The one shell command that runs a judge run inside a reused Daytona sandbox.

A session command gets no stdin, so the runner's config travels as a file that the command
opens and unlinks before the runner starts (the solution never finds it on disk). Run as root,
the command hands the solution its own directory under a fresh uid; after the runner it makes
sure no process of that uid is left (the runner's marker proves it, else a sweep by uid) and
reports the outcome on its last stderr line, removes the run's files and whatever that uid left
in /tmp, /var/tmp and /dev/shm, and exits with the runner's code. ``timeout -s KILL`` bounds
the runner's whole process group inside the sandbox.

Example:
    >>> "timeout -s KILL 14" in run_command("/root/deepgym/r1", 13, uid=None, env={},
    ...                                     argv=["true"], judge_dir="/root/deepgym/judge")
    True
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

STDIN_FILE = ".deepgym-stdin"
CLEAN_MARKER = ".deepgym-clean"
SWEEP_PREFIX = "deepgym-sweep "
# Temporary places every process of the sandbox can write, whoever runs in it next.
SHARED_TEMP = "/tmp /var/tmp /dev/shm"
# timeout(1) exits with 128+9 when it had to kill the runner at the deadline.
KILLED_AT_DEADLINE = 137

# Up to 20 rounds of kill_uid (each gives killed processes ~0.1 s to go): a loaded machine
# may take a while to reap them, and only "none left" counts as clean.
_SWEEP = ("import sys; sys.path.insert(0, {judge!r}); from deepgym_proc import kill_uid; "
          "clean = any(kill_uid({uid}) for _ in range(20)); "
          "sys.stderr.write('" + SWEEP_PREFIX + "' + ('clean' if clean else 'dirty') + chr(10))")


def solution_dir(run_dir: str) -> str:
    """Where the solution runs: a directory the runner's files are not in."""
    return f"{run_dir}-s/work"


def run_command(run_dir: str, timeout: float, *, uid: int | None, env: Mapping[str, str],
                argv: Sequence[str], judge_dir: str) -> str:
    """The shell command running ``argv`` in ``run_dir`` (absolute), bounded by ``timeout``;
    the judge's files are in ``judge_dir`` (uploaded once per sandbox)."""
    d = shlex.quote(run_dir)
    holder = shlex.quote(f"{run_dir}-s")
    work = shlex.quote(solution_dir(run_dir))
    exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in env.items())
    steps = [f"cd {d} || exit 97", f"chmod 700 {d}",
             f"mkdir -m 711 {holder} && mkdir -m 700 {work} || exit 97"]
    if uid is not None:  # the solution's uid must be able to walk down to its directory
        parent = PurePosixPath(run_dir).parent
        walk = " ".join(shlex.quote(str(p)) for p in (parent, parent.parent))
        steps.append(f"chmod 711 {walk} && chown {uid}:{uid} {work} || exit 97")
    runner = (f"{{ rm -f {STDIN_FILE}; {exports}timeout -s KILL {int(timeout) + 1} "
              f"{shlex.join(argv)}; }} < {STDIN_FILE}")
    steps.append(f"{runner}; rc=$?")
    if uid is None:
        steps.append(f"echo '{SWEEP_PREFIX}unchecked' >&2")
    else:
        sweep = shlex.quote(_SWEEP.format(uid=uid, judge=judge_dir))
        steps.append(f"if [ -f {CLEAN_MARKER} ]; then echo '{SWEEP_PREFIX}clean' >&2; "
                     f"else python3 -I -S -B -c {sweep}; fi")
        # The sandbox is reused: what the run's uid left in the shared temporary places must
        # not reach the next run (a file there could carry an answer or a claim across).
        # Only world-writable directories are walked into (the uid could write nowhere else).
        steps.append(f"find {SHARED_TEMP} -xdev -mindepth 1 \\( -user {uid} -prune -exec "
                     "rm -rf -- {} + \\) -o \\( -type d ! -perm -0002 -prune \\) "
                     ">/dev/null 2>&1 || true")
    steps.append(f"cd / && rm -rf {d} {holder}; exit $rc")
    return "sh -c " + shlex.quote("\n".join(steps))


def sweep_outcome(stderr: bytes) -> str:
    """'clean', 'dirty' or 'unchecked' from the command's stderr ('missing' when absent)."""
    lines = stderr.rstrip(b"\n").splitlines()
    if lines and lines[-1].startswith(SWEEP_PREFIX.encode()):  # only ours comes last
        return lines[-1][len(SWEEP_PREFIX):].decode("ascii", "replace").strip()
    return "missing"


def strip_sweep(stderr: bytes) -> bytes:
    """The runner's stderr without our own report line."""
    lines = stderr.splitlines(keepends=True)
    return b"".join(line for line in lines if not line.startswith(SWEEP_PREFIX.encode()))
