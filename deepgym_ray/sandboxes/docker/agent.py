"""The agent inside every warm container: runs judge runners on request, then cleans up (stdlib).

The host starts it as the container's main process (root, under docker's ``init``) with
``python3 -I -S -B -c BOOT``; BOOT reads this file's source from stdin and runs it. From then on
stdin carries the host's requests and stdout the agent's replies, both as frames (see
:func:`pack`), over the container's attach stream; nothing else in the container can write to
that stream (every process the agent starts gets its own pipes). When the host goes away its
stdin ends, the agent exits, and the container stops with everything in it.

Three users: the agent and its solution zygote are root; each judge runner is forked from the
agent (its judge modules are imported once, like the local runner fork server) and drops to the
*verifier* uid, keeping only CAP_KILL (so it can kill solution processes it started; a session
verifier's runner also CAP_DAC_READ_SEARCH, to copy the agent's work directory whatever modes the
agent left, given up before any verifier code runs: ``deepgym_workcopy``); solution
processes are forked by the zygote and drop to the *solution* uid. The verifier's files live in a
directory only the verifier uid can enter; the judge's own files are root's, readable by the
verifier uid alone. After every run the agent kills every process of both uids, proves none is
left, removes every file the run could have written (its work directories, ``/tmp``,
``/dev/shm``, ``/dev/mqueue``, SysV IPC objects, and on a writable root every file the two uids
own), checks that the judge files are unchanged, and says whether all that held (``clean``).

Its helpers travel with the judge files: ``cleanup.py`` (becoming a uid, killing, removing) and
``zygote.py`` (the solution zygote), imported as ``deepgym_agent_cleanup`` and
``deepgym_agent_zygote`` once ``setup`` has written them.

Requests: ``setup`` (uids, judge files; answered ``ready``), ``run`` (files, the runner's stdin,
environment, time limit, or an ``argv`` to exec instead of the runner, or ``program: step``
for a session's step program, forked as the runner is; ``fresh``: the sandbox's
first run, whose solution directory is new; ``keep_solution``: a session's step, whose solution
directory is kept for its next one; answered by an optional ``in_play`` frame, then
``result``), and ``cancel`` during a run (its caller gave up: the run is
killed as at its deadline, cleaned up and checked as always, and its result says
``cancelled``; a ``cancel`` that comes after its run ended is ignored).
"""

import hashlib
import json
import os
import select
import signal
import socket
import sys
import time

ROOT = "/deepgym"
JUDGE = ROOT + "/judge"  # root:verifier 0750: the judge's files
CTL = ROOT + "/ctl"  # root:verifier 0750: the zygote's socket
RUN = ROOT + "/run"  # root 0711; RUN/work is the verifier's 0700 work directory
SOL = ROOT + "/sol"  # root 0711; SOL/work is the solution's, shared with the verifier's group
cleanup = None  # deepgym_agent_cleanup, imported once install() has written it
WIPE = ("/tmp", "/dev/shm", "/dev/mqueue")
OUTPUT_LIMIT, ERROR_LIMIT = 32 << 20, 1 << 20

# What BOOT is: read a length-prefixed source from stdin and run it as this module.
BOOT = ("import os\n"
        "def r(n):\n"
        " b=b''\n"
        " while len(b)<n:\n"
        "  c=os.read(0,n-len(b))\n"
        "  if not c: os._exit(0)\n"
        "  b+=c\n"
        " return b\n"
        "g={'__name__':'deepgym_agent'}\n"
        "exec(compile(r(int.from_bytes(r(8),'big')),'deepgym_agent.py','exec'),g)\n"
        "g['main']()\n")


# --- frames: a JSON header (with the blobs' sizes) and raw blobs --------------------------

def pack(header, blobs=()):
    """One frame: 4-byte size, JSON header naming the blob sizes, then the blobs."""
    blobs = [bytes(b) for b in blobs]
    head = json.dumps(dict(header, blobs=[len(b) for b in blobs])).encode()
    return len(head).to_bytes(4, "big") + head + b"".join(blobs)


def unpack(buffer):
    """(header, blobs, rest) from the start of ``buffer``; None while it is incomplete."""
    if len(buffer) < 4:
        return None
    size = int.from_bytes(buffer[:4], "big")
    if len(buffer) < 4 + size:
        return None
    header = json.loads(bytes(buffer[4:4 + size]))
    if not isinstance(header, dict) or not isinstance(header.get("blobs"), list):
        raise ValueError("malformed frame header")
    end = 4 + size + sum(header["blobs"])
    if len(buffer) < end:
        return None
    blobs, at = [], 4 + size
    for length in header["blobs"]:
        blobs.append(bytes(buffer[at:at + length]))
        at += length
    return header, blobs, buffer[end:]


def _read_exact(n):
    data = bytearray()
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _receive():
    """The next request from the host; None when the host has gone."""
    size = _read_exact(4)
    if size is None:
        return None
    head = _read_exact(int.from_bytes(size, "big"))
    header = json.loads(head) if head is not None else None
    if header is None:
        return None
    blobs = []
    for length in header.get("blobs", []):
        blob = _read_exact(length)
        if blob is None:
            return None
        blobs.append(blob)
    return header, blobs


def _send(header, blobs=()):
    view = memoryview(pack(header, blobs))
    while view:
        view = view[os.write(1, view):]


# --- the agent ------------------------------------------------------------------------------

class Agent:
    def __init__(self, setup):
        self.verifier_uid, self.solution_uid = int(setup["uids"][0]), int(setup["uids"][1])
        self.uids = {self.verifier_uid, self.solution_uid}
        self.writable_root = not setup.get("read_only", True)
        self.zygote_pid = None
        self.hashes = {}

    def install(self, files):
        """The judge's files and directories; the judge modules imported once; the zygote."""
        v = self.verifier_uid
        os.chmod(ROOT, 0o711)
        for path, mode in ((JUDGE, 0o750), (CTL, 0o750), (RUN, 0o711), (SOL, 0o711)):
            os.makedirs(path, exist_ok=True)
            os.chown(path, 0, v if mode == 0o750 else 0)
            os.chmod(path, mode)
        for name, content in files.items():
            path = os.path.join(JUDGE, name)
            with open(path, "wb") as f:
                f.write(content)
            os.chown(path, 0, v)
            os.chmod(path, 0o640)
            self.hashes[path] = hashlib.sha256(content).hexdigest()
        sys.path[:0] = [JUDGE]
        global cleanup
        import deepgym_agent_cleanup as cleanup
        for name in ("ast", "importlib.util", "resource", "traceback", "types", "ctypes",
                     "deepgym_wire", "deepgym_proc", "deepgym_cgroup", "deepgym_clock",
                     "deepgym_worker", "deepgym_zyproc", "deepgym_spawn", "deepgym_proxy",
                     "deepgym_solution", "deepgym_cases", "deepgym_runner", "deepgym_step"):
            __import__(name)
        sys.modules["deepgym_spawn"].worker_program(sys.executable)
        self.start_zygote()

    def start_zygote(self):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        path = os.path.join(CTL, "zygote.sock")
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        listener.bind(path)
        os.chown(path, 0, self.verifier_uid)
        os.chmod(path, 0o660)
        listener.listen(16)
        pid = os.fork()
        if pid == 0:
            try:
                import deepgym_agent_zygote

                deepgym_agent_zygote.serve_zygote(listener)
            finally:
                os._exit(0)
        listener.close()
        self.zygote_pid = pid

    def zygote_alive(self):
        try:
            done, _ = os.waitpid(self.zygote_pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return done == 0

    def run(self, request, blobs):
        started = time.monotonic()
        names = request.get("files", [])
        work, sol = os.path.join(RUN, "work"), os.path.join(SOL, "work")
        keep = bool(request.get("keep_solution"))  # a session's: its next step goes on there
        self.prepare(work, sol, dict(zip(names, blobs[1:], strict=True)),
                     fresh=request.get("fresh", True))
        stdin = blobs[0]
        config = _config(stdin)
        token = None if config.get("token") is None else str(config["token"])
        # A session verifier's runner first copies the agent's work directory, which it must
        # read whatever modes the agent left (then gives the right up).
        pid, fds = self.fork_run(request, work, stdin, keep_read=bool(config.get("work_copy")))
        out = self.collect(pid, fds, stdin, float(request["timeout"]), token)
        exit_code, timed_out, cancelled, stdout, stderr, in_play = out
        unclean = self.cleanup(work, sol, keep)
        alive = self.zygote_alive()
        if not alive:  # a new one for the next run; this run is reported as not judged
            self.start_zygote()
        _send({"kind": "result", "exit_code": exit_code, "timed_out": timed_out,
               "cancelled": cancelled, "duration": time.monotonic() - started, "clean": not unclean,
               "unclean": unclean, "in_play": in_play,
               "zygote_alive": alive}, [stdout, stderr])

    def prepare(self, work, sol, files, fresh=True):
        v, s = self.verifier_uid, self.solution_uid
        if fresh:  # a session before may have kept its work directory: never seen by this one
            cleanup.remove(sol)
        os.mkdir(work, 0o700)
        os.chown(work, v, v)
        for name, content in files.items():
            path = os.path.join(work, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o640)
            with os.fdopen(fd, "wb") as f:
                f.write(content)
        for top, dirs, names in os.walk(work):
            for name in dirs + names:
                os.chown(os.path.join(top, name), v, v)
        # The solution's directory: the solution owns it, the verifier's group may write in
        # it (the runner copies a script there for run_solution). A session's later steps
        # find it as its last step left it.
        if not fresh and os.path.isdir(sol) and not os.path.islink(sol):
            return
        cleanup.remove(sol)
        os.mkdir(sol, 0o770)
        os.chown(sol, s, v)
        os.chmod(sol, 0o770)

    def fork_run(self, request, work, stdin, keep_read=False):
        pipes = [os.pipe(), os.pipe(), os.pipe()]
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                cleanup.oom_adjust(500)
                for target, fd in enumerate((pipes[0][0], pipes[1][1], pipes[2][1])):
                    os.dup2(fd, target)
                os.closerange(3, 1 << 16)
                os.chdir(work)
                os.environ.clear()
                os.environ.update(request.get("env") or {})
                cleanup.drop_to(self.verifier_uid, keep_kill=True, keep_read=keep_read)
                argv = request.get("argv")
                if argv:
                    os.execvp(argv[0], argv)
                # The runner, or a session's step: forked, not exec'd, so it keeps CAP_KILL
                # for the solution processes it starts (an exec would drop it).
                module = "deepgym_step" if request.get("program") == "step" \
                    else "deepgym_runner"
                sys.argv = [os.path.join(JUDGE, module + ".py")]
                sys.modules[module].main()
            except BaseException:  # noqa: B036 - the child never returns to the agent
                pass
            os._exit(125)
        for fd in (pipes[0][0], pipes[1][1], pipes[2][1]):
            os.close(fd)
        return pid, (pipes[0][1], pipes[1][0], pipes[2][0])

    def collect(self, pid, fds, stdin, timeout, token):
        """Feed the runner, read its output, wait for it (killing it at the deadline)."""
        w_in, r_out, r_err = fds
        os.set_blocking(w_in, False)
        pidfd = os.pidfd_open(pid)
        out, err = bytearray(), bytearray()
        pending = memoryview(stdin)
        if not pending:
            os.close(w_in)
            w_in = None
        marker = (token + ' {"event": "in_play"').encode() if token else None
        in_play, exited, timed_out, cancelled = False, False, False, False
        deadline = time.monotonic() + timeout
        readers = {r_out: (out, OUTPUT_LIMIT), r_err: (err, ERROR_LIMIT)}
        while readers or not exited:
            writers = [w_in] if pending else []
            waiting = list(readers) + ([] if exited else [pidfd]) + [0]
            left = deadline - time.monotonic()
            if left <= 0 and not exited and not timed_out:
                timed_out = True
                _killpg(pid)
                deadline = time.monotonic() + 5  # for the output to drain
                left = 5
            elif left <= 0:
                break
            ready, writable, _ = select.select(waiting, writers, [], left)
            if 0 in ready:
                request = _receive()
                if request is None or request[0].get("op") != "cancel":
                    # The host has gone (or broke the protocol): stop everything.
                    _killpg(pid)
                    cleanup.kill_all(self.uids)
                    os._exit(0)
                if not exited and not cancelled:  # given up: as at the deadline
                    cancelled = True
                    _killpg(pid)
                    deadline = time.monotonic() + 5  # for the output to drain
            if writable:
                try:
                    pending = pending[os.write(w_in, pending):]
                except OSError:
                    pending = memoryview(b"")
                if not pending:
                    os.close(w_in)
                    w_in = None
            for fd in ready:
                if fd in readers:
                    chunk = os.read(fd, 1 << 16)
                    buffer, limit = readers[fd]
                    if not chunk:
                        os.close(fd)
                        del readers[fd]
                        continue
                    tail = bytes(buffer[-len(marker):]) if marker and fd == r_out else b""
                    buffer += chunk[:max(0, limit - len(buffer))]
                    if marker and not in_play and fd == r_out and marker in tail + chunk:
                        in_play = True
                        _send({"kind": "in_play", "line": marker.decode() + "}"})
                elif fd == pidfd:
                    exited = True
                    _killpg(pid)  # whatever else its group still runs
                    # What is left to read comes at once, unless something outside the group
                    # holds the pipes (the sweep after the run ends it): do not wait for it.
                    deadline = min(deadline, time.monotonic() + 2)
        if w_in is not None:
            os.close(w_in)
        for fd in readers:
            os.close(fd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        code = None if timed_out or cancelled else os.waitstatus_to_exitcode(status)
        return code, timed_out, cancelled, bytes(out), bytes(err), in_play

    def cleanup(self, work, sol, keep=False):
        """Remove everything the run left (but ``sol`` when ``keep``: a session's work
        directory); the list of what could not be (empty: clean)."""
        problems = []
        if not cleanup.kill_all(self.uids):
            problems.append("processes survived SIGKILL")
        for path in (work,) if keep else (work, sol):
            if not cleanup.remove(path) or os.path.exists(path):
                problems.append(f"cannot remove {path}")
        for directory in WIPE:
            if not cleanup.empty(directory):
                problems.append(f"cannot empty {directory}")
        if not cleanup.remove_ipc(self.uids):
            problems.append("SysV IPC objects left")
        if self.writable_root and not cleanup.sweep_owned(self.uids, (SOL,) if keep else ()):
            problems.append("files of the run's uids left")
        if cleanup.processes_of(self.uids):
            problems.append("processes of the run's uids left")
        if not self.judge_intact():
            problems.append("the judge's files changed")
        return problems

    def judge_intact(self):
        for path, digest in self.hashes.items():
            try:
                with open(path, "rb") as f:
                    if hashlib.sha256(f.read()).hexdigest() != digest:
                        return False
                st = os.lstat(path)
            except OSError:
                return False
            if st.st_uid != 0 or st.st_mode & 0o7777 != 0o640:
                return False
        return True


def _config(stdin):
    """The runner's config (its stdin's first line), or {}."""
    try:
        config = json.loads(stdin.split(b"\n", 1)[0])
    except ValueError:
        return {}
    return config if isinstance(config, dict) else {}




def _killpg(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    request = _receive()
    if request is None or request[0].get("op") != "setup":
        os._exit(2)
    header, blobs = request
    agent = Agent(header)
    agent.install(dict(zip(header["files"], blobs, strict=True)))
    _send({"kind": "ready", "python": sys.executable, "version": sys.version.split()[0]})
    while True:
        request = _receive()
        if request is None:
            break
        if request[0].get("op") == "run":
            agent.run(*request)
        elif request[0].get("op") == "cancel":
            pass  # for a run that ended before it arrived
        else:
            _send({"kind": "error", "details": f"unknown op {request[0].get('op')!r}"})
    cleanup.kill_all(agent.uids)
    os._exit(0)
