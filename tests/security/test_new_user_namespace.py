"""A new user namespace, where the solution is root with every capability again, used to
mount (issue 32, point 4). Docker's default seccomp profile denies it; the local sandbox's
filter denies ``clone``/``unshare`` with CLONE_NEWUSER (and ``clone3``, whose flags a filter
cannot see)."""

from harness import Attack

NEW_USERNS = r'''
import ctypes, os
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
MS_REC, MS_PRIVATE = 0x4000, 0x40000
def _write(path, text):
    with open(path, "w") as f:
        f.write(text)
def _try():
    """In a child: a user and mount namespace of its own, and a mount only a process with
    CAP_SYS_ADMIN (there) can make."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        return False
    # Every capability in the new namespace, mapped or not (a mapping is best effort).
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"),
                       ("gid_map", f"0 {gid} 1")):
        try:
            _write("/proc/self/" + name, text)
        except OSError:
            pass
    libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
    return libc.mount(b"dg", os.getcwd().encode(), b"tmpfs", 0, b"size=1m") == 0
def answer():
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if _try() else 1)
        except BaseException:
            os._exit(2)
    return "@CLAIM@" if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0 else None
'''

ATTACK = Attack(
    name="new_user_namespace",
    tags=("processes", "runner"),
    tries="to make a user namespace of its own, with every capability there, and mount a "
          "file system over its directory (what a sandbox without a syscall filter allows)",
    solution=NEW_USERNS,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
