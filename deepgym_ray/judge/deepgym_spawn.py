"""Starting and killing a run's solution processes with the provider's isolation (stdlib only).

The runner sets the run's settings with :func:`configure` (how to launch: bubblewrap prefix,
interpreter, uid, limits; where the solution's directory is; the case timeout) and learns when
the policy's answer enters play through ``on_in_play`` (:func:`mark_in_play`).

Killing a solution process is proven complete where bubblewrap holds it in a PID namespace:
bwrap reports the namespace's init on ``--info-fd``, and once that init has exited the kernel
has killed everything in the namespace. A process forked by the provider's warm zygote
(``launch["zygote"]``, see ``deepgym_zyproc``; bwrap when the zygote cannot serve) has no
namespace of its own: killing it kills its session, and :func:`shutdown_all` then sweeps the
run's uid, which proves it only when no process of that uid is left. :func:`shutdown_all` says
whether every kill was proven (the runner then tells the provider, which can skip its sweep by
uid).

Where the provider gives the run cgroups (``launch["cgroups"]``, their ``cgroup.procs`` files),
every solution process is in them before any solution code runs (a zygote child waits for it;
a bwrap or plain one joins them between fork and exec), and the provider, not the runner,
kills the run's processes by them: an empty group is the proof, so the runner skips its sweep.
The run's CPU-accounting group is the exception: each solution process gets a group of its own
below it (``deepgym_cgroup.CpuGroup``), where its requests' CPU is counted, every process it
started included, and which :func:`kill` empties (orphans that left its session too). Without
one, killing a zygote child also kills the run's processes outside every live solution
process's session (a Docker container: an orphan of a timed-out call does not last to the next).

Example (what the runner does):
    configure(launch={"kind": "plain", ...}, solution_dir="/tmp/sol", case_timeout=5.0)
    proc = spawn({"mode": "module"}, solution_dir(), None, (subprocess.PIPE,) * 3)
    clean = shutdown_all()
"""

import json
import marshal
import os
import select
import signal
import subprocess
import sys
import threading
import time

from deepgym_cgroup import CpuGroup
from deepgym_proc import (
    kill_uid,
    parent_of,
    uid_processes,
    wait_exit,
    wait_reaped,
    worker_parts,
    worker_source,
)
from deepgym_wire import SolutionError, tag
from deepgym_zyproc import join_cgroups, zygote_spawn

# The run's settings (set by the runner through configure(); the defaults let a verifier run
# by hand) and what this process learnt during the run.
STATE = {
    "launch": {"kind": "plain", "prefix": [], "python": None, "uid": None, "limits": {}},
    "solution_dir": None,
    "solution_path": None,  # the solution's file as the verifier sees it
    "case_timeout": 10.0,
    "on_in_play": None,
    "in_play": False,
    "worker_source": None,
    "spawning": 0,
    "spawned": 0,
}
_LIVE = set()
_LOCK = threading.Lock()


def configure(**settings):
    """Called by the runner before the verifier starts."""
    STATE.update(settings)


def mark_in_play():
    """Record that the policy's answer is now in play (failures after this are its own)."""
    if STATE["in_play"]:
        return
    STATE["in_play"] = True
    callback = STATE["on_in_play"]
    if callback is not None:
        callback()


def solution_dir():
    """The directory solution processes run in (when not configured, a fresh temporary one,
    removed when this process exits)."""
    path = STATE["solution_dir"]
    if path is None:
        import atexit
        import shutil
        import tempfile

        path = STATE["solution_dir"] = tempfile.mkdtemp(prefix="deepgym-solution-")
        atexit.register(shutil.rmtree, path, True)
    return path


def _worker_source():
    if STATE["worker_source"] is None:
        STATE["worker_source"] = worker_source(os.path.dirname(os.path.abspath(__file__)))
    return STATE["worker_source"]


# Runs the worker's parts compiled here, so each solution process skips compiling them (a few
# ms): each part but the last becomes a module of its name, the last runs as ``__main__``.
_BOOT = ("import marshal,sys\n"
         "*_dg_p,_dg_w=marshal.loads(bytes.fromhex(sys.argv.pop(1)))\n"
         "for _dg_n,_dg_c in _dg_p:\n"
         " _dg_m=sys.modules[_dg_n]=type(sys)(_dg_n);_dg_m.__file__=_dg_n+'.py'\n"
         " exec(_dg_c,_dg_m.__dict__)\n"
         "del _dg_p,_dg_n,_dg_c,_dg_m\n"
         "exec(_dg_w)")
_COMPILED = {}


def worker_program(python):
    """The ``-c`` arguments that start a worker under ``python``: precompiled code when
    ``python`` is this very interpreter (marshal's format is the interpreter's own)."""
    program = _COMPILED.get(python)
    if program is None:
        if os.path.realpath(python) == os.path.realpath(sys.executable):
            parts = worker_parts(os.path.dirname(os.path.abspath(__file__)))
            codes = [(name, compile(text, name + ".py", "exec")) for name, text in parts]
            codes[-1] = codes[-1][1]  # the worker itself runs in __main__
            program = [_BOOT, marshal.dumps(codes).hex()]
        else:
            program = [_worker_source()]
        _COMPILED[python] = program
    return program


def compile_worker():
    """Compile the solution processes' program now (it is kept): a session's runner does so
    before it moves into the copy of the agent's work, where the guard would take the judge's
    own files, compiled by their plain names, for the agent's."""
    worker_program(STATE["launch"].get("python") or _default_python())


def spawn(config, cwd, extra_env, pipes):
    """Start a solution process with the provider's isolation; returns the Popen."""
    launch = STATE["launch"]
    STATE["spawned"] += 1  # (see _census)
    python = launch.get("python") or _default_python()
    config = dict(config, uid=launch.get("uid"), limits=launch.get("limits") or {})
    inner = [python, "-I", "-S", "-c", *worker_program(python), marshal.dumps(config).hex()]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
    env.update(extra_env or {})
    if launch.get("zygote"):
        with _LOCK:
            if STATE.get("closed"):
                raise tag(SolutionError("the run is over: no new solution process"), "error")
            STATE["sweep_uid"] = True  # even a failed request may have left a child behind
            STATE["spawning"] += 1  # no sweep of orphans (see kill) while it starts
        try:
            cgroups, group = CpuGroup.split(launch.get("cgroups"), launch.get("cpu_whole"))
            proc = zygote_spawn(launch["zygote"], config, cwd, env, cgroups)
        finally:
            with _LOCK:
                STATE["spawning"] -= 1
        if proc is not None:
            proc.cpu_group = group
            if group is not None and group.whole:
                group.census = _census
            with _LOCK:
                if STATE.get("closed"):  # shutdown_all ran meanwhile: its sweep may have missed it
                    STATE["unclean"] = True
                _LIVE.add(proc)
            return proc
        if group is not None:
            group.remove()
        # The zygote is gone or broken: this process starts with bwrap as before.
    info_r = info_w = None
    if launch.get("kind") == "bwrap":
        # bwrap reports the pid of the namespace's init on --info-fd: once that process has
        # exited, the kernel has killed every process of the namespace (see kill).
        info_r, info_w = os.pipe()
        command = list(launch["prefix"]) + ["--info-fd", str(info_w), "--chdir", cwd]
        for key, value in env.items():
            command += ["--setenv", key, value]
        command += ["--", *inner]
        popen_env, popen_cwd = {}, None
    else:
        command, popen_env, popen_cwd = inner, env, cwd
    with _LOCK:
        if STATE.get("closed"):  # after shutdown_all nothing new may start
            raise tag(SolutionError("the run is over: no new solution process"), "error")
        cgroups, group = CpuGroup.split(launch.get("cgroups"), launch.get("cpu_whole"))
        try:
            proc = subprocess.Popen(
                command, stdin=pipes[0], stdout=pipes[1], stderr=pipes[2], cwd=popen_cwd,
                env=popen_env, close_fds=True, start_new_session=True,
                pass_fds=() if info_w is None else (info_w,),
                preexec_fn=_joiner(cgroups),
            )
        except BaseException:
            if info_r is not None:
                os.close(info_r)
            if group is not None:
                group.remove()
            raise
        finally:
            if info_w is not None:
                os.close(info_w)
        proc._dg_info, proc._dg_init = info_r, None
        proc.cpu_group = group
        _LIVE.add(proc)
    return proc


def _joiner(cgroups):
    """A function that puts the calling (just forked) process in ``cgroups``; None if none."""
    if not cgroups:
        return None
    files = list(cgroups)

    def join():
        join_cgroups(os.getpid(), files)  # an OSError fails the start: never run outside

    return join


def _default_python():
    return getattr(sys, "_base_executable", None) or sys.executable


def _watch_init(proc, wait):
    """Open a pidfd on the namespace init of a bwrap-started ``proc`` (at most ``wait`` s for
    bwrap's report). Only while bwrap itself still runs: then its child is surely that init."""
    info = proc._dg_info
    if proc._dg_init is not None or info is None:
        return
    data = b""
    deadline = time.monotonic() + wait
    while b"}" not in data:
        ready, _, _ = select.select([info], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return
        chunk = os.read(info, 4096)
        if not chunk:
            break
        data += chunk
    os.close(info)
    proc._dg_info = None
    try:
        pid = int(json.loads(data.decode("utf-8", "replace"))["child-pid"])
        pidfd = os.pidfd_open(pid)
    except (ValueError, KeyError, TypeError, OSError):
        return
    if proc.poll() is None and parent_of(pid) == proc.pid:
        proc._dg_init = pidfd
    else:
        os.close(pidfd)


def kill(proc):
    """Kill a solution process and everything it started. Records in STATE["unclean"] when
    it cannot be sure that nothing is left (the provider then sweeps by uid)."""
    with _LOCK:  # once per process: a second caller waits for the first to finish
        done = getattr(proc, "_dg_killed", None)
        if done is None:
            proc._dg_killed = threading.Event()
    if done is not None:
        if not done.wait(15):
            STATE["unclean"] = True
        return
    try:
        _kill_once(proc)
        group = getattr(proc, "cpu_group", None)
        if group is not None and not group.whole:
            # Whatever it started, orphans that left its session included, ends with it.
            if not group.kill():
                STATE["unclean"] = True
            group.remove()
        elif getattr(proc, "zygote_child", False):
            _kill_orphans(STATE["launch"].get("uid"))
    finally:
        proc._dg_killed.set()


def _kill_once(proc):
    launch = STATE["launch"]
    if getattr(proc, "zygote_child", False):
        # No PID namespace of its own to prove it empty: kill its session now; shutdown_all
        # sweeps the run's uid (other processes of the run may still be in use until then).
        proc.kill()
        if not wait_exit(proc, 5):
            STATE["unclean"] = True
        STATE["sweep_uid"] = True
        proc.close()
        with _LOCK:
            _LIVE.discard(proc)
        return
    bwrap = launch.get("kind") == "bwrap"
    # bwrap exits by itself only after its init did, and the init only after the kernel
    # emptied the namespace; when we kill bwrap instead, the init's exit is the proof.
    ended = proc.poll() is not None and proc.returncode >= 0
    if bwrap and not ended:
        _watch_init(proc, 1.0)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except OSError:
        pass
    clean = True
    uid = launch.get("uid")
    if uid is not None and not bwrap and os.getuid() == 0 and not launch.get("cgroups"):
        clean = kill_uid(uid)
    if not wait_exit(proc, 5):
        clean = False
    if bwrap and not ended:
        init = proc._dg_init
        if init is None:
            clean = False
        else:
            ready, _, _ = select.select([init], [], [], 5)
            clean = clean and bool(ready)
    for fd in (proc._dg_init, proc._dg_info) if bwrap else ():
        if fd is not None:
            os.close(fd)
    if bwrap:
        proc._dg_init = proc._dg_info = None
    if not clean:
        STATE["unclean"] = True
    with _LOCK:
        _LIVE.discard(proc)


def _census():
    """(solution processes started, live ones): a clock of the whole sandbox charges what ran
    between two requests only while neither changed and one is live (``deepgym_clock``)."""
    return STATE["spawned"], len(_LIVE)


def _session_of(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return int(data[data.rindex(b")") + 2:].split()[3])
    except (OSError, ValueError, IndexError):
        return None


def _kill_orphans(uid, rounds=50):
    """Without a cgroup of its own, kill what a killed zygote child left in another session
    or group than its own (an orphaned, double-forked grandchild): every process of the run's
    ``uid`` outside the sessions of the live solution processes (a zygote child leads its
    own), then wait for their zombies to be reaped (the next call must not find one answering
    a signal). Skipped while one is being started, or when one was started by bwrap (its
    session is inside its namespace): then such orphans last until the run's end."""
    if uid is None:
        return
    with _LOCK:
        if STATE["spawning"] or not all(getattr(p, "zygote_child", False) for p in _LIVE):
            return
        keep = {p.pid for p in _LIVE}
        killed = set()
        for _ in range(rounds):
            found = False
            for pid in uid_processes(uid):
                if _session_of(pid) not in keep:
                    found = True
                    killed.add(pid)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            if not found:
                if not wait_reaped(killed, time.monotonic() + 5.0):
                    STATE["unclean"] = True
                return
            time.sleep(0.002)
        STATE["unclean"] = True


def shutdown_all():
    """Kill every solution process still alive and start no more (the runner calls this
    before reporting); True when every one is known to be gone, with all it started."""
    with _LOCK:
        STATE["closed"] = True
        procs = list(_LIVE)
    for proc in procs:
        kill(proc)
    uid = STATE["launch"].get("uid")
    if STATE["launch"].get("cgroups"):
        return False  # the provider kills by the run's cgroups, and proves it there
    if STATE.get("sweep_uid") and uid is not None:
        # Zygote children: proven gone only by finding no process of the run's uid left (no
        # new one can appear: the run is closed, and only the zygote starts them).
        if os.getuid() != 0 or not kill_uid(uid):
            STATE["unclean"] = True
    return not STATE.get("unclean")
