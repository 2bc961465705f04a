"""One run's sandbox on this machine: its directories, uid and cgroups, and how they end.

Ending is certain or loud: every process of the run is killed (by its cgroups where the machine
has them, else by the run's uid unless the runner left ``CLEAN_MARKER`` as proof that nothing of
the solution is left), and a run whose processes cannot be proven gone raises SandboxError, so
nothing is judged on an unproven cleanup. Then its groups and directories are removed.

Example:
    box = RunBox(work_dir, solution_dir, uid=None, timeout=10.0, procs=[])
    end_processes(box, sandbox_id)     # raises SandboxError when a process survives
    discard_box(box, by_cgroup=False)  # its groups and directories
"""

from __future__ import annotations

import logging
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.judge.deepgym_proc import kill_uid
from deepgym_ray.sandboxes.local import janitor
from deepgym_ray.sandboxes.local.cgroups import RunCgroup
from deepgym_ray.sandboxes.local.commands import kill_group
from deepgym_ray.sandboxes.local.workarea import discard

__all__ = ["CLEAN_MARKER", "RunBox", "discard_box", "end_processes"]

logger = logging.getLogger(__name__)

# The runner creates this file in the work directory once it knows that no solution process
# is left (see deepgym_spawn.kill); then end_processes() can skip its sweep of /proc by uid.
CLEAN_MARKER = ".deepgym-clean"


@dataclass
class RunBox:
    """What the provider keeps of one run (a Sandbox's handle)."""

    work_dir: Path
    solution_dir: Path
    uid: int | None
    timeout: float
    procs: list[subprocess.Popen]
    zygote: subprocess.Popen | None = None  # the zygote serving this run, if any
    cgroup: RunCgroup | None = None  # the run's cgroups, where the machine gives them
    mounted: bool = False  # the solution's directory is its own tmpfs
    deferred: dict[str, bytes] = field(default_factory=dict)  # see LocalProvider.put_files


def end_processes(box: RunBox, sandbox_id: str) -> None:
    """Kill every process of the run, and prove it (else SandboxError: no verdict)."""
    for proc in box.procs:
        kill_group(proc)
    if box.cgroup is not None:
        if not box.cgroup.kill_all():
            raise SandboxError("processes of the run survived SIGKILL; the answer was not "
                               "judged", sandbox_id=sandbox_id)
    elif box.uid is not None and not (box.work_dir / CLEAN_MARKER).is_file():
        if not kill_uid(box.uid, rounds=200, wait_for_zombies=False):
            logger.error("processes of uid %s survived cleanup", box.uid)
            raise SandboxError("processes of the run's uid survived its cleanup; the answer "
                               "was not judged", sandbox_id=sandbox_id)


def discard_box(box: RunBox, *, by_cgroup: bool) -> None:
    """Remove the run's groups and directories (its processes are gone by now). Without
    cgroups (``by_cgroup`` False) the janitor stops watching its uid."""
    if box.uid is not None and not by_cgroup:
        janitor.forget_uid(box.uid)
    if box.cgroup is not None and box.cgroup.remove():
        box.cgroup = None
    discard(box.work_dir, box.solution_dir.parent,
            mounted=(box.solution_dir,) if box.mounted else ())
