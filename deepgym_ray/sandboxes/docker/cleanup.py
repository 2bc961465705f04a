"""What the container's agent does to a run's users: become one, kill, remove (stdlib only).

Shipped into the container next to the judge files (as ``deepgym_agent_cleanup.py``) and
imported by the agent (``agent.py``) once it has written them. Everything here runs as root
in the container, except what a forked child does after :func:`drop_to`.

Example (what the agent does after a run):
    kill_all({verifier_uid, solution_uid}) and remove(work) and empty("/tmp")
"""

import os
import signal
import time

try:  # in the container, shipped beside this file as a top-level module
    from deepgym_agent_removal import remove_tree
except ImportError:  # on the host
    from deepgym_ray.sandboxes.removal import remove_tree

CAP_DAC_READ_SEARCH, CAP_KILL, PR_SET_KEEPCAPS = 2, 5, 8


def oom_adjust(value):
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(value))
    except OSError:
        pass


def drop_to(uid, keep_kill, keep_read=False):
    """Become ``uid`` for good, keeping CAP_KILL when asked (the runner must kill the
    solution processes it started, which run as another uid), and CAP_DAC_READ_SEARCH with
    ``keep_read`` (a session verifier's runner copies the agent's work directory with it, then
    gives it up)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if keep_kill:
        libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if keep_kill:
        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]

        data = (Data * 2)()
        data[0].effective = data[0].permitted = \
            1 << CAP_KILL | (1 << CAP_DAC_READ_SEARCH if keep_read else 0)
        if libc.capset(ctypes.byref(Header(0x20080522, 0)), data) != 0:
            os._exit(124)
        libc.prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0)
    if os.getuid() == 0 or os.geteuid() == 0:
        os._exit(123)  # never run anything of a run as root


def _uids_of(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            state, uids = "", ()
            for line in f:
                if line.startswith("State:"):
                    state = line.split()[1]
                elif line.startswith("Uid:"):
                    uids = tuple(int(x) for x in line.split()[1:])
            return state, uids
    except (OSError, ValueError):
        return "", ()


def processes_of(uids, zombies=False):
    """Live processes owned by any of ``uids`` (real, effective or saved); with ``zombies``,
    those dead but not yet reaped too."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            state, owners = _uids_of(entry)
            if state and (zombies or state != "Z") and set(owners) & uids:
                found.append(int(entry))
    return found


def _kill_as(uid):
    """SIGKILL every process of ``uid`` at once: ``kill(-1)`` sent as that uid. Unlike a scan
    of /proc and a kill per pid, no fork escapes it (a process that forks while it is being
    killed gets no child), and a re-forking survivor whose new pid wrapped below the scan's
    position is not missed."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def kill_all(uids, wait=5.0):
    """SIGKILL every process of ``uids`` until none is left, not even a zombie (the
    container's init reaps them; until then each holds a pid of the container's limit, which
    the next run would be short of); True when none is."""
    deadline = time.monotonic() + wait
    if os.geteuid() == 0:
        for uid in uids:
            if uid != 0:  # as root, kill(-1) would take everything, the agent too
                _kill_as(uid)
    while True:
        if not processes_of(uids, zombies=True):
            return True
        if time.monotonic() > deadline:
            return False
        for pid in processes_of(uids):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.001)


def remove(path):
    """Remove ``path`` (never following a symlink, whatever its depth); True when it is gone."""
    return remove_tree(path, quiet=True)


def empty(directory):
    ok = True
    try:
        names = os.listdir(directory)
    except OSError:
        return True
    for name in names:
        ok = remove(os.path.join(directory, name)) and ok
    return ok and not os.listdir(directory)


def ipc_objects(uids):
    """(kind, id, owner) of every SysV IPC object owned or created by one of ``uids``."""
    found = []
    for kind, id_name in (("shm", "shmid"), ("sem", "semid"), ("msg", "msqid")):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        names = lines[0].split() if lines else []
        for line in lines[1:]:
            row = dict(zip(names, line.split(), strict=False))
            for key in ("uid", "cuid"):
                if int(row.get(key, -1)) in uids:
                    found.append((kind, int(row[id_name]), int(row[key])))
                    break
    return found


def remove_ipc(uids):
    """Remove every SysV IPC object of the run's uids; True when none is left. Removing one
    takes its owner (or CAP_SYS_ADMIN, which the container does not get): a child becomes
    each owner in turn."""
    objects = ipc_objects(uids)
    for owner in {o for _, _, o in objects}:
        pid = os.fork()
        if pid == 0:
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                drop_to(owner, keep_kill=False)
                calls = {"shm": libc.shmctl, "sem": libc.semctl, "msg": libc.msgctl}
                for kind, ident, who in objects:  # IPC_RMID is 0; semctl ignores the third
                    if who == owner:
                        calls[kind](ident, 0, None)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    return not ipc_objects(uids)


def sweep_owned(uids, keep=()):
    """On a writable root: remove every file the run's uids own, wherever they put it (but in
    the directories ``keep``: a session's work directory, kept for its next step)."""
    ok = True
    skip = ("/proc", "/sys", "/dev", *keep)
    for top, dirs, files in os.walk("/", topdown=True):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in skip]
        for name in dirs + files:
            path = os.path.join(top, name)
            try:
                if os.lstat(path).st_uid in uids:
                    ok = remove(path) and ok
            except OSError:
                continue
    return ok
