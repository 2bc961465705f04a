"""What runs inside a remote sandbox for each judge run: confine it, run it, clean up (stdlib).

Shipped once per sandbox next to the judge files (as ``deepgym_remote_run.py``, with the local
provider's ``cgroups`` module as ``deepgym_remote_cgroups.py`` and ``cgroup_v2``) and started
by the run's command as ``python3 -I -S -B <judge>/deepgym_remote_run.py <run dir>`` (where the
sandbox's user is not root, ``sudo -n <its python> -I -S -B ...``: see ``privilege``): nothing
of the run is on a command line, which every process in the sandbox can read in /proc. The
run's spec (its files, the runner's argv, stdin and environment, the environment's secrets
included, the deadline, the solution's uid and its bounds, the user's PATH under sudo) is the
file ``<run dir>/.deepgym-run``, read and removed, and the run's files written into the
root-only run directory, before anything of the run starts. As root it makes the run's
directory and the judge's root's and writable by root alone (the toolbox of a sandbox whose
user is not root uploaded them as that user, see :func:`take_ownership`), then:

1. confines the run, as far as the sandbox allows (found out by the sandbox's first run and
   then required of every later one, so a sandbox never silently serves a run less confined):
   - ``namespaces``: its own mount, IPC and network namespaces. The network one takes away
     the loopback on which the sandbox's own toolbox daemon listens (it runs commands as the
     sandbox's user for anyone who connects); the IPC one takes SysV objects with it.
   - ``work_area``: one tmpfs of ``disk_mb`` and ``max_files`` holding the solution's directory
     and the run's private /tmp, /var/tmp and /dev/shm: everything the solution can write, all
     together, freed at once when the run's mount namespace goes.
   - ``cgroups``: per-run groups (memory and tasks of all solution processes together, and a
     freezer that proves them gone; cgroup v1's, or one group of v2's: ``cgroup_v2``), put in
     the runner's launch settings (``cgroups``), so every solution process is in them before
     any of its code runs (``deepgym_spawn``).
   - ``syscall_filter``: the local sandbox's seccomp filter (no kernel keyrings, io_uring,
     ptrace, BPF, perf events, module calls or new user namespaces), compiled by the host for
     its own architecture (``spec["seccomp"]``) and installed in the runner, so the verifier
     and every solution process are under it.
2. runs the runner (its stdout is the command's), killing its process group at the deadline;
3. kills every solution process (by cgroup; else the runner's proof; else a sweep by uid),
   removes the run's files and, where /tmp was not private, what the uid left in the shared
   temporary places, and checks both;
4. marks the end of the run's stdout (``END`` + the run's secret), reports on its last stderr
   line (``REPORT`` + JSON: ``clean``, ``timed_out``, ``held``, ``missing``) and exits with
   the runner's code. With ``--one-stream`` after the run directory (for a provider that
   reads one output stream per command, Modal's), the stderr's tail and the report follow
   the end mark on stdout instead (see ``deepgym_remote_stream``).

An agent's session (``keep_work`` in the spec) runs many times in one run directory: its work
area is mounted in the sandbox's own mount namespace by the session's first run and kept by
every run after it (its processes are killed at each run's end all the same), so the agent's
work lasts from one step to the next; the provider deletes the sandbox when the session ends.
"""

import ctypes
import fcntl
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# The judge's files, side by side with this one:
from deepgym_proc import kill_uid, wait_exit  # noqa: E402

SPEC_FILE = ".deepgym-run"
PROBE_FILE = ".deepgym-confinement.json"  # in the judge dir: what the first run found
CLEAN_MARKER = ".deepgym-clean"
REPORT = "deepgym-run "
END = "deepgym-end "  # then the run's secret: its stdout ends here
CGROUP_PREFIX = "deepgym-remote-"  # never the local provider's, whose sweepers go by pid
SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm")
CONFINEMENTS = ("namespaces", "work_area", "cgroups", "syscall_filter")
KILLED_AT_DEADLINE = 137
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET = 0x20000, 0x8000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
MNT_DETACH = 2
_LIBC = ctypes.CDLL(None, use_errno=True)


def _call(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype, flags, data=None):
    _call(_LIBC.mount(source.encode() if source else None, target.encode(),
                      fstype.encode() if fstype else None, flags,
                      data.encode() if data else None), f"mount {target}")


def _loopback_up():
    """Bring up the new network namespace's loopback (as bubblewrap does): a solution may talk
    to itself over 127.0.0.1, never to anything outside the run."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", 0x1 | 0x8 | 0x40))  # SIOCSIFFLAGS


def enter_namespaces():
    """Give this process (and all it starts) its own mount, IPC and network namespaces."""
    _call(_LIBC.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the sandbox
    try:
        _loopback_up()
    except OSError:
        pass  # no loopback at all: still no way out


def mount_work_area(holder, disk_mb, max_files):
    """The tmpfs on ``holder`` that holds everything a run can write."""
    for place in SHARED_TEMP:  # a private /tmp would hide the run's own files
        if any(os.path.realpath(p).startswith(place + "/") for p in (holder, HERE)):
            raise OSError(f"the sandbox's home is under {place}")
    _mount("deepgym", holder, "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={int(disk_mb)}m,nr_inodes={int(max_files)},mode=0711")
    os.chmod(holder, 0o711)


def is_mounted(path):
    """Whether something is mounted on ``path`` in this mount namespace."""
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return any(line.split()[4] == path for line in f)


def make_work_area(holder, disk_mb, max_files, mounted=False):
    """The run's tmpfs on ``holder`` (``mounted``: a session's, there already): ``work`` (the
    solution's) and ``tmp`` (bound over the shared temporary places, so they are the run's
    own and count against the same bound)."""
    if not mounted:
        mount_work_area(holder, disk_mb, max_files)
    tmp = os.path.join(holder, "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.chmod(tmp, 0o1777)
    for place in SHARED_TEMP:
        if os.path.isdir(place) and not os.path.islink(place):
            _mount(tmp, place, None, MS_BIND)


def make_cgroups(name, memory_mb, pids):
    """The run's cgroups: cgroup v1's freezer, memory and pids where the sandbox has them,
    else one group of its cgroup v2 hierarchy (``deepgym_remote_cgroup_v2``); OSError,
    saying why, where it gives neither."""
    import deepgym_remote_cgroups as cgroups

    memory = int(memory_mb) << 20
    found = cgroups.RunCgroups.probe(prefix=CGROUP_PREFIX)
    if all(found.has(c) for c in ("freezer", "memory", "pids")):
        return found.create(name, memory_bytes=memory, pids=int(pids))
    import deepgym_remote_cgroup_v2 as v2

    try:
        return v2.create(name, memory_bytes=memory, pids=int(pids), prefix=CGROUP_PREFIX)
    except OSError as exc:
        raise OSError(f"no cgroup v1 freezer, memory and pids here ({found.missing}); "
                      f"cgroup v2: {exc}") from None


def _probe_path():
    return os.path.join(HERE, PROBE_FILE)


def confinement_found():
    """What the sandbox's first run found possible here (None before that run)."""
    try:
        with open(_probe_path(), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _remember(held):
    fd = os.open(_probe_path(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(held, f)


def confine(spec, run_dir, holder, work):
    """Apply what this sandbox allows; returns (held, missing, cgroup). Raises OSError when
    something the sandbox's first run had fails now (the run is then not judged)."""
    uid, known = spec["uid"], confinement_found()
    held, missing, group = dict.fromkeys(CONFINEMENTS, False), {}, None

    def attempt(name, step):
        if os.geteuid() != 0 or uid is None:
            missing[name] = "not root"
        elif known is not None and not known.get(name):
            missing[name] = known.get("why", {}).get(name, "not possible in this sandbox")
        elif name == "work_area" and not held["namespaces"]:
            missing[name] = "no mount namespace of its own"
        else:
            try:
                result = step()
            except OSError as exc:
                if known is not None:  # it held for the first run: never weaker without a word
                    raise OSError(f"{name} failed where it held before: {exc}") from exc
                missing[name] = str(exc)
                return None
            held[name] = True
            return result
        return None

    keep = bool(spec.get("keep_work"))
    if keep and os.geteuid() == 0 and uid is not None and not is_mounted(holder) \
            and (known is None or known.get("work_area")):
        # A session's: in the sandbox's own namespace, before the run's, so that it stays.
        try:
            mount_work_area(holder, spec["disk_mb"], spec["max_files"])
        except OSError as exc:
            if known is not None:
                raise OSError(f"work_area failed where it held before: {exc}") from exc
    attempt("namespaces", enter_namespaces)
    attempt("work_area", lambda: make_work_area(holder, spec["disk_mb"], spec["max_files"],
                                                mounted=keep and is_mounted(holder)))
    os.makedirs(work, mode=0o700, exist_ok=True)
    if uid is not None:
        os.chown(work, uid, uid)
    group = attempt("cgroups", lambda: make_cgroups(os.path.basename(run_dir),
                                                    spec["memory_mb"], spec["pids"]))
    installer = attempt("syscall_filter", lambda: syscall_filter(spec.get("seccomp")))
    if known is None and os.geteuid() == 0 and uid is not None:
        _remember(dict(held, why=missing))
    return held, missing, group, installer


def syscall_filter(wanted):
    """What installs the host's compiled syscall filter (the local sandbox's, see
    ``deepgym_ray/sandboxes/local/seccomp.py``) in the runner, which all of the run's
    processes inherit; OSError where it cannot be had here."""
    if not wanted:
        raise OSError("the host could not build it (libseccomp's binding missing there)")
    if wanted.get("machine") != os.uname().machine:
        raise OSError(f"compiled for {wanted.get('machine')}, this is {os.uname().machine}")
    from deepgym_remote_seccomp import Installer

    try:
        return Installer(bytes.fromhex(wanted["bpf"]))
    except (KeyError, ValueError) as exc:
        raise OSError(f"not a compiled filter: {exc}") from exc


def run_runner(spec, run_dir, launch_cgroups, installer=None):
    """Run the runner to its end or the deadline, under the syscall filter ``installer``
    installs where there is one; returns (its returncode, timed out)."""
    config = json.loads(spec["stdin"]) if spec.get("stdin") else {}
    if launch_cgroups:
        config.setdefault("launch", {})["cgroups"] = launch_cgroups
    # Under sudo, PATH is sudo's own: the spec gives the sandbox user's back.
    path = spec.get("path") or os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin"
    env = {"PATH": path, "LANG": "C.UTF-8", "HOME": run_dir, "TMPDIR": run_dir,
           **spec.get("env", {})}
    proc = subprocess.Popen(spec["argv"], cwd=run_dir, env=env, stdin=subprocess.PIPE,
                            start_new_session=True, close_fds=True, preexec_fn=installer)
    try:  # the out-of-memory killer must never pick this program (started before: not its children)
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("-1000")
    except OSError:
        pass
    try:
        proc.stdin.write((json.dumps(config) + "\n").encode())
        proc.stdin.close()
    except OSError:
        pass  # it died at once; its exit code says so
    timed_out = not wait_exit(proc, float(spec["timeout"]) + 1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # at the deadline, and whatever it left in its group
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    return proc.returncode, timed_out


def _temp_leftovers(uid, remove):
    """Files of ``uid`` in the shared temporary places (removed first when ``remove``); only
    world-writable directories are walked into (the uid could write nowhere else)."""
    action = ["-exec", "rm", "-rf", "--", "{}", "+"] if remove else ["-print"]
    argv = ["find", *SHARED_TEMP, "-xdev", "-mindepth", "1", "(", "-user", str(uid), "-prune",
            *action, ")", "-o", "(", "-type", "d", "!", "-perm", "-0002", "-prune", ")"]
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    return done.stdout.strip()


def clean_up(spec, run_dir, holder, held, group):
    """Kill what the run started and remove what it left (a session's work area stays);
    True when both are proven."""
    uid = spec["uid"]
    if uid is None:
        clean = False  # nothing to tell the run's processes from the sandbox's own
    elif group is not None:
        clean = group.kill_all() and group.remove()
    else:
        clean = os.path.isfile(os.path.join(run_dir, CLEAN_MARKER)) or any(
            kill_uid(uid) for _ in range(20))
    if uid is not None and not held["work_area"]:
        clean = not _temp_leftovers(uid, remove=True) and not _temp_leftovers(uid, False) \
            and clean
    keep = bool(spec.get("keep_work"))
    if held["work_area"]:
        for point in (*SHARED_TEMP, *(() if keep else (holder,))):
            _LIBC.umount2(point.encode(), MNT_DETACH)
    gone = [run_dir] if keep else [run_dir, holder]
    subprocess.run(["rm", "-rf", "--one-file-system", "--", *gone], check=False)
    return clean and not any(os.path.lexists(path) for path in gone)


def write_files(run_dir, files):
    """The run's files (relative path -> latin-1 text of their bytes) in ``run_dir``."""
    for name, text in files.items():
        parts = name.split("/")
        if name.startswith("/") or ".." in parts or "" in parts:
            raise ValueError(f"not a path inside the run's directory: {name!r}")
        path = os.path.join(run_dir, *parts)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "wb") as f:
            f.write(text.encode("latin-1"))


def take_ownership(run_dir):
    """As root: the run's directory and the judge's are root's, and only root may write in
    them. Where the sandbox's user is not root (runs are root through sudo), its toolbox
    uploaded them as that user, with its umask's modes: a judge file the solution's uid could
    write would be code that later runs execute as root."""
    os.chown(run_dir, 0, 0)
    for path in [HERE] + [os.path.join(HERE, name) for name in os.listdir(HERE)]:
        found = os.lstat(path)
        if stat.S_ISLNK(found.st_mode):
            raise OSError(f"{path} is a symbolic link")
        if (found.st_uid, found.st_gid) != (0, 0):
            os.chown(path, 0, 0, follow_symlinks=False)
        if found.st_mode & 0o022:
            os.chmod(path, stat.S_IMODE(found.st_mode) & ~0o022)


def compile_judge():
    """As root, once per upload of the judge: bytecode for its modules in its root-only
    directory, so that every process of every later run (this program, the runner, the
    solution's) loads it instead of compiling the source again (``-B`` stops writing it, not
    reading it). Python checks each file's bytecode against its source when it imports it."""
    tag = sys.implementation.cache_tag
    stale = []
    for name in os.listdir(HERE):
        if not name.endswith(".py"):
            continue
        source = os.path.join(HERE, name)
        cached = os.path.join(HERE, "__pycache__", f"{name[:-3]}.{tag}.pyc")
        try:
            if os.stat(cached).st_mtime >= os.stat(source).st_mtime:
                continue
        except OSError:
            pass
        stale.append((source, cached))
    if stale and tag:
        import py_compile

        old = os.umask(0o022)  # readable by the solution's uid, writable by root alone
        try:
            for source, cached in stale:
                py_compile.compile(source, cfile=cached, doraise=False, quiet=2)
        finally:
            os.umask(old)


def main():
    run_dir = os.path.abspath(sys.argv[1])
    one_stream = None
    if sys.argv[2:] == ["--one-stream"]:
        from deepgym_remote_stream import StderrTail

        one_stream = StderrTail()
    holder, work = run_dir + "-s", os.path.join(run_dir + "-s", "work")
    spec_path = os.path.join(run_dir, SPEC_FILE)
    os.chmod(run_dir, 0o700)  # before the spec is read: it holds the run's secrets
    if os.geteuid() == 0:
        take_ownership(run_dir)
        compile_judge()
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    os.unlink(spec_path)
    write_files(run_dir, spec.pop("files", {}))
    os.makedirs(holder, 0o711, exist_ok=True)  # a session's later runs find it
    if spec["uid"] is not None:  # the solution's uid must be able to walk down to its directory
        parent = os.path.dirname(run_dir)
        for path in (parent, os.path.dirname(parent)):
            os.chmod(path, 0o711)
    report = {"clean": False, "timed_out": False, "exit_code": None}
    held, group = dict.fromkeys(CONFINEMENTS, False), None
    try:
        held, missing, group, installer = confine(spec, run_dir, holder, work)
        report.update(held=held, missing=missing)
        code, report["timed_out"] = run_runner(spec, run_dir, group and group.procs_files(),
                                               installer)
        report["exit_code"] = code
    except OSError as exc:
        report["error"] = f"cannot confine the run: {exc}"
    report["clean"] = clean_up(spec, run_dir, holder, held, group)
    if spec.get("end"):  # stdout is complete (see command.output_complete)
        os.write(1, f"\n{END}{spec['end']}\n".encode())
    line = REPORT + json.dumps(report) + "\n"
    if one_stream is not None:  # the stderr's tail, then the report, after the end mark
        one_stream.finish(line)
    else:
        sys.stderr.write(line)
        sys.stderr.flush()
    code = report["exit_code"]
    os._exit(97 if code is None else KILLED_AT_DEADLINE if report["timed_out"]
             else code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
