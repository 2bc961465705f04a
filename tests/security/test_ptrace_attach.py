"""ptrace its parent and every process it can see."""

from harness import Attack

PTRACE = r'''
import ctypes, os
PTRACE_ATTACH, PTRACE_SEIZE, PTRACE_DETACH = 16, 0x4206, 17
def answer():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    me = os.getpid()
    for pid in [os.getppid(), 1] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
        if pid == me:
            continue
        for request in (PTRACE_SEIZE, PTRACE_ATTACH):
            if libc.ptrace(request, pid, None, None) == 0:
                libc.ptrace(PTRACE_DETACH, pid, None, None)
                return "@CLAIM@"
    return None
'''

ATTACK = Attack(
    name="ptrace_attach",
    tags=("runner", "secrets"),
    tries="to ptrace its parent, the runner or any visible process (then it could read the "
          "verifier's memory or rewrite its result)",
    solution=PTRACE,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
