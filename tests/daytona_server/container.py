"""A sandbox of the local Daytona server as a container, as far as this machine allows.

As in Daytona's cloud, where each sandbox is a container with its own limits: the sandbox gets
its own PID, mount, IPC and UTS namespaces (and a network one of its own with
``network_block_all``), its declared memory as a memory cgroup (pids capped too; groups of
its own in the freezer, cpu and cpuacct hierarchies hold whatever groups the provider makes
inside, so that stopping the sandbox removes those too), and its
declared disk as one tmpfs holding everything it can write (its home ``/root``, ``/tmp``,
``/var/tmp``, ``/dev/shm``; at most half the sandbox's memory, which its pages count
against). An init (PID 1 of the sandbox) reaps orphans; commands enter its namespaces and
cgroups (``argv``); killing the init ends everything in the sandbox. The server reaches the
sandbox's files through ``/proc/<init>/root``.

``privileged=False`` makes it a default Docker container instead of a privileged one: no
CAP_SYS_ADMIN for its commands and cgroupfs read-only, so nothing inside can mount, make
namespaces or cgroups (what the provider must then report as missing).

``user`` (a :class:`~.users.SandboxUser`) makes the sandbox's user an unprivileged one, as in
Daytona's default images: its commands run as its own uid, its home is ``/home/<name>``, and
its ``/etc`` user files and sudoers (bind-mounted in the sandbox's mount namespace only) give
it the real ``sudo`` as its sudo rule says.

This is fidelity for the tests, never what makes an attack fail: the provider's own per-run
bounds (``deepgym_ray/sandboxes/daytona/in_sandbox.py``) sit well inside these.

Example:
    box = Container("ab12", memory_gib=1, disk_gib=3, network=False).start()
    subprocess.run(box.argv("id -u", "/root"))
    box.stop()
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from .users import SandboxUser

HOME = "/root"
PIDS_MAX = 1024
_CGROUPS = Path("/sys/fs/cgroup")
_CONTROLLERS = ("memory", "pids", "freezer", "cpu", "cpuacct")

# PID 1 of the sandbox: mount its disk, hand out its writable places, report, reap orphans.
_INIT = r'''
import ctypes, fcntl, json, os, signal, socket, struct, sys  # all now: /root is about to be covered
libc = ctypes.CDLL(None, use_errno=True)
spec = json.loads(sys.argv[1])
disk = spec["disk"]
def mount(src, dst, fstype, flags, data=None):
    if libc.mount(src and src.encode(), dst.encode(), fstype and fstype.encode(), flags,
                  data and data.encode()) != 0:
        raise OSError(ctypes.get_errno(), "mount " + dst)
try:
    mount("sandbox-disk", disk, "tmpfs", 6, "size=" + spec["size"] + ",mode=0755")
    for source, target in spec["binds"]:  # before /tmp is covered: the sources are under it
        mount(source, target, None, 4096)
    for name, target, mode in spec["places"]:  # /tmp last: it may hide the disk's path
        os.mkdir(os.path.join(disk, name))
        os.chmod(os.path.join(disk, name), mode)
        for inside, dir_mode, owner in spec["dirs"]:
            if inside.split("/")[0] == name:
                os.mkdir(os.path.join(disk, inside), dir_mode)
                os.chown(os.path.join(disk, inside), owner, owner)
        if os.path.isdir(target):
            mount(os.path.join(disk, name), target, None, 4096)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # its loopback is up
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", 0x1 | 0x8 | 0x40))
    if not spec["privileged"]:  # as a default Docker container: cgroupfs read-only
        for line in open("/proc/self/mountinfo").read().splitlines():
            point = line.split()[4]
            if point == "/sys/fs/cgroup" or point.startswith("/sys/fs/cgroup/"):
                mount(None, point, None, 32 | 4096 | 1)  # MS_REMOUNT | MS_BIND | MS_RDONLY
except OSError as exc:
    print("error", exc, flush=True)
    sys.exit(1)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
print("ready", flush=True)
os.close(1)
while True:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
    signal.sigtimedwait([signal.SIGCHLD], 5)
'''

# What a default Docker container's root lacks (the rest of its capabilities are kept).
_DROPPED = "-sys_admin,-net_admin,-sys_ptrace,-sys_module,-sys_rawio,-sys_boot"


def available() -> str | None:
    """Why sandboxes cannot be containers here, or None when they can."""
    if os.geteuid() != 0:
        return "not root"
    missing = [t for t in ("unshare", "nsenter", "setpriv") if shutil.which(t) is None]
    if missing:
        return f"no {', '.join(missing)}"
    if not (_CGROUPS / "memory" / "cgroup.procs").is_file():
        return "no cgroup v1 memory controller"
    return None


def _own_group(controller: str) -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return _CGROUPS / controller / path.lstrip("/")
    raise OSError(f"not in a {controller} cgroup")


class Container:
    """One sandbox's namespaces, cgroups and init (see the module docstring)."""

    def __init__(self, sid: str, *, memory_gib: float, disk_gib: float, network: bool,
                 privileged: bool = True, disk_dir: Path | None = None,
                 user: SandboxUser | None = None) -> None:
        self.sid, self.network, self.privileged, self.user = sid, network, privileged, user
        self.home = user.home if user is not None else HOME
        self.memory = int(memory_gib * (1 << 30))
        # The disk is RAM here, and its pages count against the sandbox's memory: at most half
        # of it, so a full disk says ENOSPC, as a real one does, instead of running out of memory.
        self.disk = min(int(disk_gib * (1 << 30)), self.memory // 2)
        self.disk_dir = disk_dir
        # Every controller the provider's in-sandbox program uses, so that the groups it makes
        # for its runs are made below the sandbox's (and removed with them), not at the host's.
        self.groups = {c: _own_group(c) / f"daytona-test-{sid}" for c in _CONTROLLERS}
        self.init: subprocess.Popen | None = None
        self.pid = 0  # the sandbox's init (PID 1 inside), as this machine sees it

    def start(self) -> Container:
        for controller, group in self.groups.items():
            group.mkdir(exist_ok=controller == "cpuacct")  # often one group with cpu's
            if controller == "memory":
                (group / "memory.limit_in_bytes").write_text(str(self.memory))
                if (group / "memory.memsw.limit_in_bytes").exists():
                    (group / "memory.memsw.limit_in_bytes").write_text(str(self.memory))
            elif controller == "pids":
                (group / "pids.max").write_text(str(PIDS_MAX))
        self.disk_dir.mkdir(mode=0o700, exist_ok=True)
        spaces = ["--pid", "--fork", "--mount-proc", "--ipc", "--uts"]
        if not self.network:
            spaces.append("--net")
        argv = ["unshare", *spaces, sys.executable, "-I", "-S", "-c", _INIT,
                json.dumps(self._init_spec())]
        self.init = subprocess.Popen(self._joined(argv), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        line = self.init.stdout.readline().decode(errors="replace").strip()
        self.init.stdout.close()
        children = Path(f"/proc/{self.init.pid}/task/{self.init.pid}/children")
        try:
            self.pid = int(children.read_text().split()[0])  # unshare forked the init
        except (OSError, IndexError, ValueError):
            line = line if line != "ready" else "its pid is not known"
        if line != "ready":
            self.stop()
            raise OSError(f"the sandbox's init did not start: {line or 'no answer'}")
        return self

    def _init_spec(self) -> dict:
        """What the init mounts: the disk, its writable places, the user's /etc files."""
        places = [("vartmp", "/var/tmp", 0o1777), ("shm", "/dev/shm", 0o1777),
                  ("tmp", "/tmp", 0o1777)]
        binds, dirs = [], []
        if self.user is None:
            places.insert(0, ("home", HOME, 0o700))
        else:  # /home of the sandbox holds the user's home; root's /root is covered too
            places[:0] = [("root", "/root", 0o700), ("home", "/home", 0o755)]
            dirs.append((f"home/{self.user.name}", 0o750, self.user.uid))
            binds = self.user.etc_binds(self.disk_dir.with_name(f"{self.sid}.etc"))
        return {"disk": str(self.disk_dir), "size": str(self.disk), "places": places,
                "dirs": dirs, "binds": binds, "privileged": self.privileged}

    def _joined(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the sandbox's cgroups (joined before it is executed)."""
        files = [str(group / "cgroup.procs") for group in self.groups.values()]
        script = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 1; shift; '
                  'n=$((n - 1)); done; exec "$@"')
        return ["sh", "-c", script, "sh", str(len(files)), *files, *argv]

    def argv(self, command: str, cwd: str, as_root: bool = False) -> list[str]:
        """What runs ``command`` with bash in ``cwd`` inside the sandbox (as its user, or as
        root when ``as_root``: E2B lets a call name its user)."""
        spaces = ["-m", "-p", "-i", "-u"] + ([] if self.network else ["-n"])
        # The directory is entered inside (nsenter opens its --wd before entering the mount
        # namespace: the host's directory of that name, if any).
        inner = ["env", f"--chdir={cwd}", "bash", "-c", command]
        drop = [] if self.privileged else [f"--bounding-set={_DROPPED}"]
        if self.user is not None and not as_root:  # as its uid (sudo may make it root)
            drop += [f"--reuid={self.user.uid}", f"--regid={self.user.uid}", "--init-groups"]
        if drop:
            inner = ["setpriv", *drop, "--", *inner]
        return self._joined(["nsenter", "-t", str(self.pid), *spaces, "--", *inner])

    def path(self, inside: str) -> Path:
        """A path of the sandbox, as this machine reaches it."""
        return Path(f"/proc/{self.pid}/root{inside}")

    def alive(self) -> bool:
        """Whether the sandbox's init (and with it its disk and namespaces) is still there."""
        return self.init is not None and self.init.poll() is None

    def kill_processes(self) -> None:
        """Kill every process of the sandbox but its init: its files stay (a stopped sandbox)."""
        keep = {str(self.pid), str(self.init.pid if self.init else 0)}
        for _ in range(100):  # until a pass finds none (a fork may race the first)
            found = False
            for group in self.groups.values():
                for each in [group, *(p for p in group.rglob("*") if p.is_dir())]:
                    for pid in (each / "cgroup.procs").read_text().split():
                        if pid not in keep:
                            found = True
                            try:
                                os.kill(int(pid), signal.SIGKILL)
                            except OSError:
                                pass
            if not found:
                return
            time.sleep(0.01)

    def stop(self) -> None:
        """Kill everything in the sandbox (its init first: the kernel takes the rest) and
        remove its cgroups once they are empty."""
        if self.init is not None:
            if self.pid:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.killpg(self.init.pid, signal.SIGKILL)
            except OSError:
                pass
            self.init.wait()
        deadline = time.monotonic() + 10
        for group in self.groups.values():  # with the groups made inside, deepest first
            inner = sorted((p for p in group.rglob("*") if p.is_dir()),
                           key=lambda p: -len(p.parts)) if group.exists() else []
            for each in [*inner, group]:
                while each.exists():
                    for pid in (each / "cgroup.procs").read_text().split():
                        try:
                            os.kill(int(pid), signal.SIGKILL)
                        except OSError:
                            pass
                    try:
                        each.rmdir()
                    except OSError:
                        if time.monotonic() > deadline:
                            break
                        time.sleep(0.01)
        if self.disk_dir is not None:
            shutil.rmtree(self.disk_dir, ignore_errors=True)
            shutil.rmtree(self.disk_dir.with_name(f"{self.sid}.etc"), ignore_errors=True)
