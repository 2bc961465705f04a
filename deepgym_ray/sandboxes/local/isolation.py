"""What confines a local solution: the bubblewrap options.

``bwrap_prefix`` works out (once per interpreter) the bwrap options that show a solution only
the base interpreter, its standard library and its own directory, in fresh namespaces, with
the kernel-wide /proc files Docker masks (and /proc/key-users) masked; None where bwrap cannot
make them. (The syscall filter is ``seccomp``. The sweep of a run's uid, for runs whose runner
could not prove that its solution processes are gone, is ``kill_uid`` in
``deepgym_ray/judge/deepgym_proc.py``, which the runner uses in the sandbox too.)

Example:
    prefix = bwrap_prefix("/usr/bin/python3.11", as_root=True)
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path, PurePosixPath

logger = logging.getLogger(__name__)


def _hidden_dirs(roots: Sequence[str]) -> list[str]:
    """Directories under the bound roots the solution must not see: installed packages
    (site-packages, dist-packages) and this package wherever it lives."""
    hidden = []
    for root in roots:
        for lib in ("lib", "lib64", "local/lib"):
            base = Path(root) / lib
            if not base.is_dir():
                continue
            for child in base.glob("python3*"):
                for name in ("site-packages", "dist-packages"):
                    if (child / name).is_dir():
                        hidden.append(str(child / name))
        if (Path(root) / "lib/python3/dist-packages").is_dir():
            hidden.append(str(Path(root) / "lib/python3/dist-packages"))
    package = os.path.realpath(Path(__file__).resolve().parents[2])  # deepgym_ray
    if any(package == r or package.startswith(r.rstrip("/") + "/") for r in roots):
        hidden.append(package)
    return sorted(set(hidden))


def _dirs_for(path: str) -> list[str]:
    """bwrap options making every ancestor of ``path`` a traversable directory: bwrap would
    create them 0700 (so an unprivileged solution could not reach the interpreter)."""
    options: list[str] = []
    parts = PurePosixPath(path).parts[1:-1]
    for i in range(len(parts)):
        options += ["--perms", "0755", "--dir", "/" + "/".join(parts[: i + 1])]
    return options


# What Docker masks in a container's /proc, and /proc/key-users: kernel-wide state that would
# show a run what other runs (other uids) left there: the keys every uid can see, the uids that
# hold keys, timers, kernel memory and symbols. (bwrap already makes /proc/sys, /proc/irq,
# /proc/bus and /proc/sysrq-trigger read-only.)
MASKED_PROC_FILES = ("keys", "key-users", "kcore", "kallsyms", "kmsg", "latency_stats",
                     "timer_list", "timer_stats", "sched_debug", "kpagecgroup", "kpagecount",
                     "kpageflags")
MASKED_PROC_DIRS = ("acpi", "asound", "scsi")


def _proc_masks() -> list[str]:
    """bwrap options that cover the masked /proc entries that exist here: files with
    /dev/null, as Docker does (a device bind: --ro-bind mounts nodev, and the file could not be
    opened), directories with an empty tmpfs."""
    options: list[str] = []
    for name in MASKED_PROC_FILES:
        if os.path.isfile(f"/proc/{name}"):
            options += ["--dev-bind", "/dev/null", f"/proc/{name}"]
    for name in MASKED_PROC_DIRS:
        if os.path.isdir(f"/proc/{name}"):
            options += ["--tmpfs", f"/proc/{name}"]
    return options


@lru_cache(maxsize=4)
def bwrap_prefix(python: str, as_root: bool) -> tuple[str, ...] | None:
    """The bwrap options that confine a solution (without --chdir and the command), or None
    when bwrap cannot make the namespaces here."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    prefix = [bwrap, "--die-with-parent", "--new-session", "--clearenv"]
    if as_root:
        # No user namespace: the worker drops to its own uid in the real one (see worker).
        prefix += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                   "--unshare-cgroup-try", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        # Its own user namespace, in which the solution can make no other: the syscall filter
        # must leave new user namespaces open here (unprivileged bwrap needs one itself).
        prefix += ["--unshare-all", "--unshare-user", "--disable-userns"]
    roots = ["/usr"]
    prefix += ["--ro-bind", "/usr", "/usr"]
    for link in ("/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if os.path.islink(link):
            prefix += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            prefix += ["--ro-bind", link, link]
            roots.append(link)
    base = os.path.realpath(sys.base_prefix)
    if not base.startswith("/usr/"):
        prefix += _dirs_for(base) + ["--ro-bind", base, base]
        roots.append(base)
    if os.path.dirname(python) not in (f"{r}/bin" for r in roots):
        prefix += _dirs_for(python) + ["--ro-bind", python, python]
    for hidden in _hidden_dirs(roots):
        prefix += ["--tmpfs", hidden]
    # Debian's links for commands with several implementations (awk, editor, ...): links
    # into /usr, nothing else of /etc
    if os.path.isdir("/etc/alternatives"):
        prefix += _dirs_for("/etc/alternatives") + ["--ro-bind", "/etc/alternatives",
                                                    "/etc/alternatives"]
    prefix += ["--proc", "/proc", *_proc_masks(), "--dev", "/dev", "--tmpfs", "/tmp"]
    if _works(prefix, python):
        return tuple(prefix)
    if "--disable-userns" in prefix:  # bwrap before 0.8, or no user namespaces to disable
        prefix = [part for part in prefix if part not in ("--unshare-user", "--disable-userns")]
        if _works(prefix, python):
            return tuple(prefix)
    return None


def _works(prefix: list[str], python: str) -> bool:
    """Whether bwrap with ``prefix`` starts ``python`` here."""
    probe = prefix + ["--", python, "-I", "-S", "-c", "pass"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    if done.returncode != 0:
        logger.debug("bwrap probe failed: %s", done.stderr.decode(errors="replace")[-500:])
        return False
    return True


def world_reachable(path: str) -> bool:
    """Whether any user can traverse every directory down to ``path``."""
    current = Path(path).parent
    while True:
        try:
            if not current.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
        if current == current.parent:
            return True
        current = current.parent


def count_own_processes() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count
