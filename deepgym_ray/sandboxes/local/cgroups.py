"""Per-run cgroups (v1) for the local sandbox: aggregate limits, CPU fairness, certain cleanup.

Each run gets one group in each controller this machine lets us use, made under the group this
process already belongs to (so nothing escapes the limits it is under itself), named
``deepgym-<pid>-<run>``:

- ``freezer``: cleanup with no race. Freeze the group (no process of it runs, so none can fork),
  SIGKILL every task listed, thaw, wait until ``cgroup.procs`` is empty, remove the group. A
  process cannot leave a cgroup by forking, ``setsid`` or double-forking, so an empty group
  proves that nothing of the run is left, whatever PID namespace it was in.
- ``memory``: ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` where swap is
  accounted) over all of a run's solution processes together, its tmpfs pages included.
- ``pids``: ``pids.max`` over all of them, threads included.
- ``cpu``: ``cpu.shares`` equal for every run, so a run's CPU share does not grow with the
  number of processes it starts (work-conserving: an idle machine is still all a run's).
- ``cpuacct``: CPU accounting. The runner makes one group per solution process below the run's
  (``deepgym_cgroup.CpuGroup``) and counts a request's CPU there, so every process the solution
  started counts, reaped or not (an orphaned, double-forked grandchild too). Where v1 has no
  ``cpuacct``, a group in the cgroup v2 hierarchy does it (``cpu.stat`` is there with no
  controller enabled). Without either, a case's CPU is the solution process's own and its
  reaped children's only.

The runner puts each solution process in its run's groups before it runs any solution code
(``launch["cgroups"]``; see ``deepgym_spawn``). Where no controller can be used (not root, no
cgroup v1) :func:`probe` says why, and the provider logs which guarantees are missing.

Example:
    groups = RunCgroups.probe()
    run = groups.create("abc", memory_bytes=1 << 30, pids=32)
    run.procs_files()
    # ['/sys/fs/cgroup/freezer/deepgym-12-abc/cgroup.procs', ...]
    run.kill_all() and run.remove()
    # True
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("freezer", "memory", "pids", "cpu", "cpuacct")
PREFIX = "deepgym-"
KILL_WAIT = 10.0


def _log_error(message: str, *args: object) -> None:
    # logging is imported only to say this: the module also runs in every remote run's
    # program (as deepgym_remote_cgroups), where importing it cost more than the rest
    import logging

    logging.getLogger(__name__).error(message, *args)


def _own_path(controller: str) -> str | None:
    """This process's group in ``controller`` (from /proc/self/cgroup; "" for the cgroup v2
    hierarchy), or None."""
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        hierarchy, names, path = line.split(":", 2)
        if controller in names.split(",") or controller == names == "" and hierarchy == "0":
            return path
    return None


def _v2_parent(root: Path) -> Path | None:
    """This process's group in the cgroup v2 hierarchy (all v2, or hybrid's ``unified``)."""
    own = _own_path("")
    for base in (root, root / "unified"):
        if own is not None and (base / "cgroup.controllers").is_file():
            return base / own.lstrip("/")
    return None


def _try_group(parent: Path, prefix: str) -> str | None:
    """Why no group can be made under ``parent`` (None: it can, and was removed again)."""
    test = parent / f"{prefix}{os.getpid()}-probe"
    try:
        test.mkdir(exist_ok=True)
        test.rmdir()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _write(path: Path | str, value: str) -> None:
    # os-level: a buffered text file costs four more system calls, on every run's every group
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode("ascii"))
    finally:
        os.close(fd)


def _read(path: Path | str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = b""
        while chunk := os.read(fd, 1 << 16):
            data += chunk
        return data
    finally:
        os.close(fd)


def _tasks(group: Path) -> list[int]:
    """The members of ``group`` and of the groups below it (the runner's per-process ones)."""
    found = []
    for inner in [group, *_children(group)]:
        try:
            found += [int(pid) for pid in _read(f"{inner}/cgroup.procs").split()]
        except (OSError, ValueError):
            pass
    return found


def _children(group: Path) -> list[Path]:
    try:  # scandir: the entry types come with the listing (a stat of each file would not)
        with os.scandir(group) as entries:
            return [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


class RunCgroup:
    """One run's groups (controller -> directory)."""

    def __init__(self, groups: dict[str, Path]) -> None:
        self.groups = groups

    def procs_files(self) -> list[str]:
        """The files a process's pid is written to, to put it in every group of the run."""
        return [str(group / "cgroup.procs") for group in self.groups.values()]

    def pids(self) -> set[int]:
        """Every process still in any of the run's groups."""
        found: set[int] = set()
        for group in self.groups.values():
            found.update(_tasks(group))
        return found

    def kill_all(self) -> bool:
        """Kill every process of the run; True once none is left (verified by the kernel's
        own list of the groups' members, not by searching /proc)."""
        freezer = self.groups.get("freezer")
        if not self.pids():
            return True
        if freezer is not None:
            self._freeze(freezer)
        deadline = time.monotonic() + KILL_WAIT
        try:
            while True:
                pids = self.pids()
                if not pids:
                    return True
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                if freezer is not None:
                    _write(freezer / "freezer.state", "THAWED")  # a frozen task cannot die
                if time.monotonic() > deadline:
                    _log_error("processes %s of a run survived SIGKILL for %ss",
                                 sorted(pids), KILL_WAIT)
                    return False
                time.sleep(0.001)
        finally:
            if freezer is not None:
                try:
                    _write(freezer / "freezer.state", "THAWED")
                except OSError:
                    pass

    @staticmethod
    def _freeze(freezer: Path) -> None:
        try:
            _write(freezer / "freezer.state", "FROZEN")
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                if _read(freezer / "freezer.state").strip() == b"FROZEN":
                    return
                time.sleep(0.0005)
        except OSError:
            pass  # killing without freezing still converges: the kill loop repeats

    def memory_failures(self) -> int:
        """How often the run hit its memory limit (for diagnosis)."""
        memory = self.groups.get("memory")
        try:
            return int((memory / "memory.failcnt").read_text()) if memory else 0
        except (OSError, ValueError):
            return 0

    def remove(self) -> bool:
        """Remove the run's groups (after :meth:`kill_all`); True when all are gone."""
        ok = True
        for group in self.groups.values():
            for inner in _children(group):  # the runner's per-process groups, if it left any
                try:
                    inner.rmdir()
                except OSError:
                    pass
            try:
                group.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                _log_error("cannot remove the run's cgroup %s: %s", group, exc)
                ok = False
        return ok


class RunCgroups:
    """Where this process can make per-run groups, controller by controller."""

    def __init__(self, parents: dict[str, Path], missing: dict[str, str],
                 prefix: str = PREFIX) -> None:
        self.parents, self.missing, self.prefix = parents, missing, prefix

    @classmethod
    def probe(cls, root: Path = ROOT, prefix: str = PREFIX) -> RunCgroups:
        """Try every controller: a group must be creatable (and removable) under ours.

        ``prefix`` starts the names of the groups made (``<prefix><pid>-<name>``); only groups
        with this provider's default one are swept as stale by :meth:`sweep_stale`."""
        parents: dict[str, Path] = {}
        missing: dict[str, str] = {}
        for controller in CONTROLLERS:
            own = _own_path(controller)
            base = root / controller
            if own is None or not (base / "cgroup.procs").is_file():
                missing[controller] = "not mounted as cgroup v1"
            elif why := _try_group(base / own.lstrip("/"), prefix):
                missing[controller] = why
            else:
                parents[controller] = base / own.lstrip("/")
        v2 = _v2_parent(root) if "cpuacct" in missing else None
        if v2 is not None and (v2 / "cpu.stat").is_file():  # accounting only: no controller
            if why := _try_group(v2, prefix):
                missing["cpuacct"] += f"; cgroup v2: {why}"
            else:
                parents["cpuacct"] = v2
                del missing["cpuacct"]
        return cls(parents, missing, prefix)

    @property
    def available(self) -> bool:
        return bool(self.parents)

    def has(self, controller: str) -> bool:
        return controller in self.parents

    def create(self, name: str, *, memory_bytes: int, pids: int) -> RunCgroup:
        """Make the run's groups with their limits (raises OSError; nothing is left then)."""
        run = RunCgroup({})
        made: set[str] = set()
        try:
            for controller, parent in self.parents.items():
                group = parent / f"{self.prefix}{os.getpid()}-{name}"
                if os.path.realpath(group) in made:  # co-mounted controllers (cpu,cpuacct)
                    continue
                group.mkdir()
                made.add(os.path.realpath(group))
                run.groups[controller] = group
                if controller == "memory":
                    _write(group / "memory.limit_in_bytes", str(memory_bytes))
                    if (group / "memory.memsw.limit_in_bytes").exists():
                        _write(group / "memory.memsw.limit_in_bytes", str(memory_bytes))
                elif controller == "pids":
                    _write(group / "pids.max", str(pids))
                elif controller == "cpu":
                    _write(group / "cpu.shares", "1024")
        except OSError:
            run.remove()
            raise
        return run

    def sweep_stale(self) -> None:
        """Kill and remove groups left by processes that died mid-run (their pid is in the
        name): a run's processes must not outlive even the process that scored it."""
        stale: dict[str, dict[str, Path]] = {}
        for controller, parent in self.parents.items():
            try:
                children = list(parent.iterdir())
            except OSError:
                continue
            for child in children:
                parts = child.name.split("-")
                if (child.name.startswith(PREFIX) and len(parts) >= 3 and parts[1].isdigit()
                        and not Path(f"/proc/{parts[1]}").exists() and child.is_dir()):
                    stale.setdefault(child.name, {})[controller] = child
        for groups in stale.values():
            run = RunCgroup(groups)
            if run.kill_all():
                run.remove()


def missing_guarantees(held: dict[str, bool]) -> list[str]:
    """What is lost, in words, for each per-run guarantee that does not hold (see
    ``LocalProvider.limits``)."""
    words = {
        "cleanup_by_cgroup": "no freezer cgroup: a run's processes are found by uid",
        "run_memory": "no memory cgroup: memory is limited per process only",
        "run_processes": "no pids cgroup: processes are limited per uid only",
        "cpu_fairness": "no cpu cgroup: a run with many busy processes slows its neighbours",
        "cpu_accounting": "no cpuacct cgroup: a case's CPU time counts the solution process "
                          "and its reaped children only, not orphaned descendants",
        "work_area": "no tmpfs work area: disk space is limited per file only, inodes not at "
                     "all, and files land on the host's disk",
    }
    return [text for name, text in words.items() if not held.get(name, False)]
