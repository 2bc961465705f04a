"""kill -9 its parent, the runner, the zygote, pid 1 and everything it can see."""

from harness import Attack

KILL = r'''
import os, signal
def _kill_all():
    me = os.getpid()
    pids = [os.getppid(), 1] + [int(p) for p in os.listdir("/proc") if p.isdigit()]
    for pid in pids:
        if pid != me:
            for sig in (signal.SIGKILL, signal.SIGSTOP):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
_kill_all()
def answer():
    _kill_all()
    return None
'''

ATTACK = Attack(
    name="kill_parent_runner_zygote",
    tags=("runner", "processes"),
    tries="to end its run without a verdict (an outage, not a 0) by killing its parent, the "
          "runner, the zygote and every process it can see",
    solution=KILL,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
