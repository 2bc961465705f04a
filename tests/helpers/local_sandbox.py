"""Helpers for the local sandbox's attack tests: a provider that remembers its runs, an
environment whose verifier passes only when an attack worked, and the check that the host is
clean afterwards (no process, directory or cgroup of any run left)."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from deepgym_ray.judge.deepgym_proc import uid_processes as _uid_processes
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.local import LocalProvider

# Passes (1.0) only when the solution's ``attack()`` returns True: the attack worked.
ATTACK_VERIFIER = '''
from deepgym_solution import load_solution

def verify(solution_path, test_cases_path=None):
    worked = load_solution(solution_path).attack()
    return {"score": 1.0 if worked is True else 0.0, "passed": worked is True,
            "details": repr(worked)[:300]}
'''


def attack_env(timeout: float = 30, case_timeout: float = 20) -> Environment:
    return Environment(name="attack", verifier_code=ATTACK_VERIFIER, timeout=timeout,
                       case_timeout=case_timeout)


class RecordingProvider(LocalProvider):
    """A LocalProvider that remembers every run's uid, directories and cgroups."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.runs: list[dict] = []

    def create(self, env):
        sandbox = super().create(env)
        box = sandbox.handle
        self.runs.append({"uid": box.uid, "dirs": [box.work_dir, box.solution_dir.parent],
                          "cgroups": list(box.cgroup.groups.values()) if box.cgroup else []})
        return sandbox


def own_cgroups() -> list[str]:
    """Every per-run cgroup this process made that still exists."""
    pattern = f"deepgym-{os.getpid()}-*"
    return (glob.glob(f"/sys/fs/cgroup/*/{pattern}")
            + glob.glob(f"/sys/fs/cgroup/*/**/{pattern}", recursive=True))


def leftovers(provider: RecordingProvider) -> list[str]:
    """What the provider's runs left on the host (empty when it is clean)."""
    found = []
    for run in provider.runs:
        if run["uid"] is not None and _uid_processes(run["uid"]):
            found.append(f"processes of uid {run['uid']}: {_uid_processes(run['uid'])}")
        found += [f"directory {d}" for d in run["dirs"] if Path(d).exists()]
        found += [f"cgroup {g}" for g in run["cgroups"] if Path(g).exists()]
    return found


def deep_tree(root: str | os.PathLike[str], levels: int) -> None:
    """A chain of ``levels`` directories named ``d`` under ``root`` (made if missing), built
    from descriptors: no path in it is ever spelled out, however deep."""
    os.makedirs(root, exist_ok=True)
    fd = os.open(root, os.O_RDONLY)
    for _ in range(levels):
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.close(fd)
