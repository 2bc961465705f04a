"""PID 1 of a User-Mode Linux machine: a sandbox on a cgroup v2 host, and its daemon.

Runs in the machine (stdlib only; see ``machine.py``). The host's file system is the
machine's root, read-only; everything the sandbox writes is the machine's own tmpfs. The
cgroup v2 hierarchy is all the machine has (no v1), with the controllers its command line
names (``controllers=memory,pids``) turned on below its root. Two layouts (``layout=``):

- ``container`` (Daytona's): PID 1 plays the host, and the sandbox is a group of its own,
  ``/sandbox``, which the daemon enters with a cgroup namespace of its own (``/sys/fs/cgroup``
  is then that group, as in a container). The daemon and a neighbour it starts sit there, and
  each command the daemon runs is its child, in its group.
- ``vm`` (E2B's: a microVM whose daemon, envd, starts each command in a group of its own,
  ``/user``, with ``CLONE_INTO_CGROUP``): the daemon sits in the root group and puts each
  command and the neighbour in ``/user`` before they run; a command it cannot put there fails.

The daemon serves commands from the console (one JSON message in, in pieces of one line each,
see ``machine.py``; one JSON line out):

- ``{"op": "exec", "command": ..., "env": {...}, "timeout": s}``: ``bash -c command`` as
  root in the sandbox: ``{"stdout", "stderr"}`` (base64) and ``"code"``;
- ``{"op": "write", "files": [[path, base64], ...]}``: files written as root;
- ``{"op": "halt"}``: power off.
"""

import base64
import ctypes
import json
import os
import signal
import subprocess
import sys
import termios
import tty

LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWCGROUP = 0x20000, 0x2000000
MS_REC, MS_PRIVATE = 16384, 1 << 18
RB_POWER_OFF = 0x4321FEDC
SANDBOX = "/sys/fs/cgroup/sandbox"
USER = "/sys/fs/cgroup/user"
LAYOUT = {}  # "commands": the group the daemon puts each command in (vm), or None


def mount(source, target, fstype, flags=0, data=None):
    if LIBC.mount(source.encode(), target.encode(), fstype.encode(), flags,
                  data.encode() if data else None) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target}")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def machine(controllers):
    """As the host: its file systems, and cgroup v2 with ``controllers`` below its root."""
    mount("proc", "/proc", "proc")
    mount("sysfs", "/sys", "sysfs")
    mount("cgroup2", "/sys/fs/cgroup", "cgroup2")
    os.makedirs("/dev/shm", exist_ok=True)
    for place in ("/root", "/tmp", "/var/tmp", "/run", "/dev/shm"):
        mount("tmpfs", place, "tmpfs", 0, "mode=1777" if place != "/root" else "mode=0700")
    write("/sys/fs/cgroup/cgroup.subtree_control", " ".join(f"+{c}" for c in controllers))


def enter_commands_group():
    """In a forked child (``preexec_fn``): into the group commands run in, if the daemon has
    one (an OSError, as EBUSY, fails the command's start)."""
    if LAYOUT.get("commands"):
        write(f"{LAYOUT['commands']}/cgroup.procs", str(os.getpid()))


def enter_sandbox():
    """This process into the sandbox's group, with a cgroup and mount namespace of its own in
    which ``/sys/fs/cgroup`` is that group."""
    os.mkdir(SANDBOX)
    write(f"{SANDBOX}/cgroup.procs", str(os.getpid()))
    if LIBC.unshare(CLONE_NEWCGROUP | CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    LIBC.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
    LIBC.umount2(b"/sys/fs/cgroup", 2)
    mount("cgroup2", "/sys/fs/cgroup", "cgroup2")


def serve():
    """The daemon: one request per console line, one answer."""
    tty.setraw(0)
    attrs = termios.tcgetattr(1)
    attrs[1] &= ~termios.OPOST  # no newline translation on the way out
    termios.tcsetattr(1, termios.TCSANOW, attrs)
    # A neighbour: a process of the cloud's that lives beside the runs all along.
    neighbour = subprocess.Popen(["sleep", "100000"], start_new_session=True,
                                 preexec_fn=enter_commands_group)
    answer({"ready": True, "neighbour": neighbour.pid})
    buffered, message = b"", b""
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            return
        buffered += chunk
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            message += line[1:]
            if line[:1] == b"c":  # a piece of a longer message: acknowledged, see machine.py
                os.write(1, b"+\n")
                continue
            request, message = json.loads(message), b""
            if request["op"] == "halt":
                return
            try:
                answer(handle(request))
            except Exception as exc:  # the host sees it, the daemon goes on
                answer({"error": f"{type(exc).__name__}: {exc}"})


def handle(request):
    if request["op"] == "write":
        for path, data in request["files"]:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(base64.b64decode(data))
        return {"written": len(request["files"])}
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/root",
           "LANG": "C.UTF-8", **request.get("env", {})}
    proc = subprocess.Popen(["bash", "-c", request["command"]], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd="/root", start_new_session=True,
                            preexec_fn=enter_commands_group)
    try:
        out, err = proc.communicate(timeout=request.get("timeout"))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return {"timed_out": True}
    return {"stdout": base64.b64encode(out).decode(), "stderr": base64.b64encode(err).decode(),
            "code": proc.returncode}


def answer(message):
    os.write(1, json.dumps(message).encode() + b"\n")


def main():
    # the kernel hands init its command line's words after "--" (see machine.py)
    given = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
    try:
        machine([c for c in given.get("controllers", "").split(",") if c])
    except OSError as exc:
        answer({"error": f"the machine could not be set up: {exc}"})
        LIBC.reboot(RB_POWER_OFF)
    daemon = os.fork()
    if daemon == 0:
        try:
            if given.get("layout") == "vm":
                os.mkdir(USER)
                LAYOUT["commands"] = USER
            else:
                enter_sandbox()
            serve()
        except BaseException as exc:
            answer({"error": f"the daemon failed: {type(exc).__name__}: {exc}"})
        os._exit(0)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    while True:  # PID 1 reaps orphans until the daemon ends, then powers off
        try:
            pid, _ = os.wait()
        except ChildProcessError:
            break
        if pid == daemon:
            break
    os.sync()
    LIBC.reboot(RB_POWER_OFF)


if __name__ == "__main__":
    sys.exit(main())
