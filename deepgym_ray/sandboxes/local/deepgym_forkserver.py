"""A warm, trusted process that forks judge runners, so a run skips interpreter start-up.

The local provider starts one per provider as ``python -I -S -B deepgym_forkserver.py FD``,
where FD is its end of a private ``socketpair`` (no path on the file system, so nothing in a
sandbox can connect to it). The server imports the runner and what runners use once, then
waits for requests: a JSON line (the run's work directory and environment) carrying four file
descriptors (the runner's stdin, stdout and stderr, and a socket for this run's reports).

For each request it forks the *runner*: a new session and process group, the given stdio, the
work directory, the environment, and then the runner's ``main`` (which sets its own resource
limits, as when started by exec). The server reports ``started <pid>`` and, once the runner
has exited and the rest of its process group has been killed, ``exit <code>`` on the run's
socket; one poll loop watches every run's pidfd and socket (a fork per run: an intermediate
monitor process per run cost another 2 to 3 ms of CPU). A ``kill`` message, or the host
closing the socket, kills the runner's group at once. The server itself never runs a
verifier, so every runner starts from the same clean state. When the host closes its end the
server takes no more requests, lets the runs in flight finish, and exits; if it dies, the host
sees every run in flight lose its socket and gives those runs no verdict.

Example (what the provider does; see ``deepgym_ray.sandboxes.local.forkserver``):
    socket.send_fds(control, [b'{"cwd": "/tmp/run", "env": {...}}'], [stdin, out, err, report])
"""

import json
import os
import select
import signal
import socket
import sys

# The judge's files (deepgym_ray/judge): the runners this server forks run from there.
HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "judge")
RUNNER = os.path.join(HERE, "deepgym_runner.py")
JUDGE_MODULES = ("deepgym_wire", "deepgym_proc", "deepgym_worker", "deepgym_spawn",
                 "deepgym_remote", "deepgym_proxy", "deepgym_solution", "deepgym_cases",
                 "deepgym_runner", "deepgym_step")


def _preload():
    """Import what every runner needs (and what verifiers commonly import: ``random`` re-seeds
    itself in every forked child, through ``os.register_at_fork``)."""
    sys.path[:0] = [HERE]
    import ast  # noqa: F401 - shape detection when the host does not say
    import importlib.machinery  # noqa: F401 - the runner's import guard
    import importlib.util  # noqa: F401
    import resource  # noqa: F401 - the runner's limits
    import traceback  # noqa: F401 - failure reports
    import types  # noqa: F401

    for name in ("bisect", "collections", "fractions", "heapq", "itertools", "math", "random",
                 "re", "string", "typing"):
        __import__(name)
    # Every judge module a runner or verifier imports (deepgym_worker runs in solution
    # processes; the runner imports it only for its pipe framing).
    for name in JUDGE_MODULES:
        __import__(name)

    import deepgym_spawn

    python = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    deepgym_spawn.worker_program(python)  # compiled once; every runner inherits it


def _run_runner(request, stdin, stdout, stderr):
    """In the forked runner: become a fresh, independent run and hand over to the runner."""
    code = 1
    try:
        os.setsid()
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        os.closerange(3, 1 << 16)  # nothing of the server's survives into the run
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("program") == "step":  # a session's step (deepgym_step), not a run
            sys.argv = [os.path.join(HERE, "deepgym_step.py")]
            import deepgym_step

            deepgym_step.main()
        else:
            sys.argv = [RUNNER]
            import deepgym_runner

            deepgym_runner.main()  # ends with os._exit
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: B036 - anything else is a crash of the runner
        import traceback

        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:  # noqa: B036, S110 - best effort: the exit code still says it
            pass
    os._exit(code)


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Runs:
    """The runners in flight: each one's pidfd and report socket, watched by one poll loop."""

    def __init__(self, poller):
        self.poller = poller
        self.by_pidfd = {}  # pidfd -> (pid, report socket)
        self.by_report = {}  # report socket's fd -> pidfd

    def start(self, request, fds):
        """Fork the runner and report ``started <pid>`` (a failed start closes the socket)."""
        stdin, stdout, stderr, report_fd = fds
        report = socket.socket(fileno=report_fd)
        try:
            pid = os.fork()
        except OSError:
            for fd in (stdin, stdout, stderr):
                os.close(fd)
            report.close()  # the host sees its report socket close: a failed start
            return
        if pid == 0:
            _run_runner(request, stdin, stdout, stderr)  # never returns
        for fd in (stdin, stdout, stderr):
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.by_pidfd[pidfd] = (pid, report)
        self.by_report[report.fileno()] = pidfd
        self.poller.register(pidfd, select.POLLIN)
        self.poller.register(report, select.POLLIN)
        try:
            report.sendall(f"started {pid}\n".encode())
        except OSError:
            _kill_group(pid)

    def on_report(self, fd):
        """A ``kill`` from the host, or the host closed the run's socket: the run ends now."""
        pidfd = self.by_report[fd]
        pid, report = self.by_pidfd[pidfd]
        try:
            data = report.recv(64)
        except OSError:
            data = b""
        if not data:  # nothing more will come from this socket: stop watching it
            self.poller.unregister(fd)
            del self.by_report[fd]
        _kill_group(pid)

    def finish(self, pidfd):
        """The runner exited (a zombie still, so its pid is ours): kill whatever is left in
        its process group, reap it and report ``exit <code>``."""
        pid, report = self.by_pidfd.pop(pidfd)
        self.poller.unregister(pidfd)
        if self.by_report.pop(report.fileno(), None) is not None:
            self.poller.unregister(report)
        _kill_group(pid)
        _, status = os.waitpid(pid, 0)
        os.close(pidfd)
        try:
            report.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:
            pass
        report.close()


def _receive(control, runs):
    """Take one request from the host; False once the host has closed its end (or died)."""
    try:
        message, fds, _flags, _addr = socket.recv_fds(control, 1 << 20, 4)
    except OSError:
        return False
    if not message:
        return False
    try:
        request = json.loads(message) if len(fds) == 4 else None
    except ValueError:
        request = None
    if not isinstance(request, dict):
        for fd in fds:
            os.close(fd)  # the host sees its report socket close: a failed start
        return True
    runs.start(request, fds)
    return True


def serve(control):
    """Answer requests until the host closes ``control``, then let the runs in flight finish
    (each still reports its exit) and exit."""
    poller = select.poll()
    poller.register(control, select.POLLIN)
    runs = _Runs(poller)
    open_ = True
    while open_ or runs.by_pidfd:
        ready = [fd for fd, _event in poller.poll()]
        for fd in ready:
            if fd in runs.by_pidfd:
                runs.finish(fd)
            elif fd in runs.by_report:
                runs.on_report(fd)
        # New requests last: a descriptor closed above may be reused by a new run, and must
        # not be mistaken for the old one by a later event of the same batch.
        if open_ and control.fileno() in ready and not _receive(control, runs):
            poller.unregister(control)
            control.close()
            open_ = False
    os._exit(0)


def _filter_syscalls(fd):
    """Install the host's compiled seccomp filter (``seccomp.py``) in this server: every
    runner it forks inherits it. It can only fail on a kernel that refused it in the host's
    probe too; then this server exits and the host execs runners (under the filter)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "deepgym_seccomp.py")
    spec = importlib.util.spec_from_file_location("deepgym_seccomp", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.install(module.read_fd(fd))
    except OSError:
        os._exit(4)


def main():
    control = socket.socket(fileno=int(sys.argv[1]))
    try:  # the server waits on pidfds; without them the host starts runners by exec instead
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        os._exit(3)
    _preload()
    if len(sys.argv) > 2:  # the seccomp filter's descriptor
        _filter_syscalls(int(sys.argv[2]))
    import gc

    gc.freeze()  # keep the preloaded objects out of collections: fewer copied pages per fork
    serve(control)


if __name__ == "__main__":
    main()
