"""The warm solution zygote: forks solution processes, each as its run's own uid (stdlib only).

The host (``deepgym_ray/sandboxes/local/zygote.py``) starts it once per provider, inside the same
bubblewrap confinement as a solution process (base interpreter and stdlib only, no network,
own PID/IPC/UTS namespaces, empty environment), as root keeping only the capabilities to give
each child its own network and IPC namespaces (CAP_SYS_ADMIN, CAP_NET_ADMIN for the loopback)
and to change uid (CAP_SETUID, CAP_SETGID), as
``python -I -S -c <this file> <listen fd> <lifeline fd> <worker source>`` (the worker's
program, ``deepgym_proc.worker_source``). It imports the worker's code once; each solution
process is then a fork instead of a new bwrap and interpreter.

A runner connects to the listening socket (a path only the host's root can reach; it does not
exist in this mount namespace) and sends one SEQPACKET message: the marshalled request
``{"config", "cwd", "env"}`` with the process's stdin, stdout and stderr as SCM_RIGHTS, and
optionally a fourth fd, a "go" pipe. The zygote forks a child and answers ``started`` with the
child's pidfd, then ``exit <code>`` once it has reaped it. With a go pipe the child first waits
for one byte on it: the runner puts it in its run's cgroups meanwhile, so nothing of the
solution runs (or forks) outside them. The child starts a session, takes the three fds as 0-2
and closes every other one (the listening socket included), takes fresh network and IPC
namespaces (no channel to other runs' processes through abstract sockets or SysV IPC), lowers
its limits and drops to the run's uid (which clears every capability; bwrap already set
no_new_privs), enters its run's directory and runs the worker. The zygote's /proc shows a
process only its own uid's processes, so runs cannot see one another. When the host's end of
the lifeline closes (``close()``, or the host died) the zygote exits at once, and with it its
PID namespace and every process still in it: nothing outlives the process that scored it.

Example (what the host runs):
    bwrap ... -- python3 -I -S -c "$(cat deepgym_zygote.py)" 3 4 "<deepgym_proc.worker_source()>"
"""

import ctypes
import fcntl
import marshal
import os
import select
import socket
import struct
import sys
import traceback  # noqa: F401 - the worker imports it on errors: do it once, here

MAX_REQUEST = 1 << 16
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 2, 4, 8, 32
CLONE_NEWIPC, CLONE_NEWNET = 0x08000000, 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
_LIBC = ctypes.CDLL(None, use_errno=True)


def _own_namespaces():
    """Give the calling process its own network (loopback up, like bwrap's) and IPC
    namespaces, so runs share no abstract unix sockets, SysV IPC or message queues."""
    if _LIBC.unshare(CLONE_NEWIPC | CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare failed")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def _hide_other_processes():
    """Remount this namespace's /proc so a process sees only its own uid's processes: runs
    (each its own uid) cannot see one another, nor the zygote."""
    _LIBC.mount(b"proc", b"/proc", b"proc", MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                b"hidepid=invisible")  # best effort: an older kernel keeps the full view


def _probe():
    """Whether a child can get its own namespaces here (else the zygote must not serve)."""
    pid = os.fork()
    if pid == 0:
        try:
            _own_namespaces()
            os._exit(0)
        except BaseException:  # noqa: B036
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


def _child(worker, request, fds):
    """In the forked child: become the solution process (never returns)."""
    try:
        if len(fds) == 4:
            if os.read(fds[3], 1) != b"g":  # the runner could not place it: never run
                os._exit(123)
            os.close(fds[3])
            fds = fds[:3]
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        config = request["config"]
        if config.get("uid") is None:
            os._exit(122)  # never run a solution as the zygote's root
        _own_namespaces()
        worker._confine(config)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request.get("env") or {})
        sys.argv = ["-c"]
        worker.exec_command(config)  # a script or an agent's command: never returns
        worker._serve(config)
        sys.stdout.flush()
        os._exit(0)
    except BaseException:  # noqa: B036 - whatever happens, the child never returns
        os._exit(120)


def _handle(worker, conn, children):
    conn.settimeout(5)  # a stuck runner must not stall the others
    try:
        data, fds, _flags, _addr = socket.recv_fds(conn, MAX_REQUEST, 4)
    except OSError:
        conn.close()
        return None
    try:
        request = marshal.loads(data) if len(fds) in (3, 4) else None
    except (ValueError, EOFError, TypeError):
        request = None
    if not isinstance(request, dict):
        for fd in fds:
            os.close(fd)
        conn.close()
        return None
    pid = os.fork()
    if pid == 0:
        _child(worker, request, fds)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    children[pidfd] = (pid, conn)
    try:
        socket.send_fds(conn, [b"started"], [pidfd])
    except OSError:
        pass  # the runner went away; the child still gets reaped below
    return pidfd


def _reap(pidfd, children):
    pid, conn = children.pop(pidfd)
    os.close(pidfd)
    _, status = os.waitpid(pid, 0)
    try:
        conn.sendall(b"exit %d\n" % os.waitstatus_to_exitcode(status))
    except OSError:
        pass
    conn.close()


# What solutions commonly import (HumanEval's prompts start with ``from typing import ...``):
# imported once here, each solution process skips a few ms of imports. ``random`` re-seeds
# itself in every forked child (``os.register_at_fork``).
PRELOAD = ("bisect", "collections", "fractions", "functools", "heapq", "itertools", "math",
           "random", "re", "string", "typing")


def main():
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:  # an image's trimmed stdlib: the solution imports it, or fails, itself
            pass
    listener = socket.socket(fileno=int(sys.argv[1]))
    lifeline = socket.socket(fileno=int(sys.argv[2]))
    worker = type(sys)("deepgym_worker")
    exec(compile(sys.argv[3], "deepgym_worker.py", "exec"), worker.__dict__)
    sys.modules["deepgym_worker"] = worker
    del sys.argv[1:]
    if not _probe():
        os._exit(3)  # the host sees it gone; runners start their processes with bwrap
    _hide_other_processes()
    children = {}
    poller = select.poll()
    for item in (listener, lifeline):
        poller.register(item, select.POLLIN)
    while True:
        for fd, _event in poller.poll():
            if fd == lifeline.fileno():
                # The host closed its end (or died): exit now. bwrap's init follows, and the
                # kernel kills every process left in this PID namespace, so nothing a run
                # started outlives the process that scored it (a run still in flight sees
                # the zygote gone and has no verdict).
                os._exit(0)
            elif fd == listener.fileno():
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                pidfd = _handle(worker, conn, children)
                if pidfd is not None:
                    poller.register(pidfd, select.POLLIN)
            elif fd in children:
                poller.unregister(fd)
                _reap(fd, children)

if __name__ == "__main__":
    main()
