"""A solution process forked by the provider's warm zygote, seen from the runner (stdlib only).

:func:`zygote_spawn` connects to the zygote's socket (``deepgym_zygote.py``; the path comes in
the run's launch settings), sends the request and the process's three pipe ends, and returns a
:class:`ZygoteChild` that behaves like the ``Popen`` that ``deepgym_spawn.spawn`` returns
otherwise: ``stdin``/``stdout``/``stderr`` streams, ``pid``, ``poll``, ``wait``, ``kill``. It
returns None when the zygote cannot be used; the caller then starts the process with bwrap.

Example (what deepgym_spawn does):
    proc = zygote_spawn("/tmp/deepgym-run-1-zctl.../ctl", {"mode": "module", "uid": 1 << 20},
                        "/tmp/deepgym-sol-1-z.../run-x/work", {"PATH": "/usr/bin"})
"""

import marshal
import os
import select
import signal
import socket
import time

__all__ = ["ZygoteChild", "zygote_spawn"]

CONNECT_TIMEOUT = 5.0


def _host_pid(pidfd):
    """The pid (in our PID namespace) of the process behind ``pidfd``; None when gone."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", "rb") as f:  # bytes: no codec to import
            for line in f:
                if line.startswith(b"Pid:"):
                    pid = int(line.split()[1])
                    return pid if pid > 0 else None
    except (OSError, ValueError):
        pass
    return None


class ZygoteChild:
    """One solution process started by the zygote (a Popen look-alike, see the module doc)."""

    zygote_child = True

    def __init__(self, conn, pidfd, pid, stdin, stdout, stderr):
        self.conn, self.pidfd, self.pid = conn, pidfd, pid
        self.stdin = os.fdopen(stdin, "wb")
        self.stdout = os.fdopen(stdout, "rb")
        self.stderr = os.fdopen(stderr, "rb")
        self.returncode = None

    def _collect(self, timeout):
        """Read the zygote's ``exit <code>`` report (at most ``timeout`` s of waiting)."""
        if self.returncode is not None:
            return True
        if self.conn is None:
            return False
        if not select.select([self.conn], [], [], max(0.0, timeout))[0]:
            return False
        try:
            line = self.conn.recv(64)
        except OSError:
            line = b""
        if line.startswith(b"exit "):
            try:
                self.returncode = int(line.split()[1])
            except (ValueError, IndexError):
                self.returncode = -signal.SIGKILL
        else:  # the zygote died: its namespace (and this child) went with it
            self.returncode = -signal.SIGKILL
        return True

    def poll(self):
        self._collect(0)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._collect(1.0 if deadline is None else deadline - time.monotonic()):
            if deadline is not None and time.monotonic() >= deadline:
                import subprocess

                raise subprocess.TimeoutExpired("solution", timeout)
            if self.conn is None:
                break
        return self.returncode

    def wait_for(self, timeout):
        """True once it has exited (within ``timeout`` s); used by ``deepgym_proc.wait_exit``."""
        return self._collect(timeout)

    def kill(self):
        """SIGKILL it and its process group (it leads its own session)."""
        if self.pidfd is None:
            return
        alive = not select.select([self.pidfd], [], [], 0)[0]
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except OSError:
            pass
        if alive and self.pid is not None:  # while it lives, its pid is surely its group's
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def close(self):
        """Release the pidfd and the connection (after it has exited)."""
        for name in ("pidfd",):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)
        if self.conn is not None and self.returncode is not None:
            self.conn.close()
            self.conn = None


def join_cgroups(pid, cgroups):
    """Put ``pid`` in each group whose ``cgroup.procs`` file is listed (raises OSError)."""
    for procs in cgroups or ():
        fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, str(pid).encode())
        finally:
            os.close(fd)


def zygote_spawn(path, config, cwd, env, cgroups=None):
    """Ask the zygote at ``path`` for a solution process; None when it cannot give one. With
    ``cgroups`` (their ``cgroup.procs`` files) the child waits until it is in them."""
    request = marshal.dumps({"config": config, "cwd": cwd, "env": env})
    pipes = [os.pipe(), os.pipe(), os.pipe()]  # stdin, stdout, stderr: (read, write) each
    theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
    ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
    go = os.pipe() if cgroups else None
    if go is not None:
        theirs.append(go[0])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pidfd = None
    try:
        conn.settimeout(CONNECT_TIMEOUT)
        conn.connect(path)
        socket.send_fds(conn, [request], theirs)
        data, fds, _flags, _addr = socket.recv_fds(conn, 64, 1)
        if fds:
            pidfd = fds[0]
            os.set_inheritable(pidfd, False)
        if data != b"started" or pidfd is None:
            raise OSError("the zygote did not start the process")
        pid = _host_pid(pidfd)
        conn.settimeout(None)
        if go is not None:
            if pid is None:
                raise OSError("the zygote's child is gone")
            join_cgroups(pid, cgroups)  # it waits on the go pipe meanwhile
            os.write(go[1], b"g")
    except OSError:
        conn.close()
        if pidfd is not None:
            os.close(pidfd)  # a child still waiting exits when its go pipe closes
        for fd in theirs + ours + ([go[1]] if go else []):
            os.close(fd)
        return None
    for fd in theirs + ([go[1]] if go else []):
        os.close(fd)
    return ZygoteChild(conn, pidfd, pid, *ours)
