"""Children that ignore every catchable signal and keep running."""

from harness import Attack

IGNORE = r'''
import os, signal, sys
def _child():
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1,
                signal.SIGPIPE, signal.SIGALRM):
        signal.signal(sig, signal.SIG_IGN)
    os.execv(sys.executable, [sys.executable, "-S", "-c",
             "import signal, time\nfor s in (1, 2, 3, 13, 14, 15):\n"
             "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.1)\n",
             "@MARK@"])
for _ in range(4):
    try:
        if os.fork() == 0:
            _child()
    except OSError:
        pass
def answer():
    return None
'''

ATTACK = Attack(
    name="signal_ignoring_children",
    tags=("processes", "outliving"),
    tries="to outlive its run with children that ignore SIGTERM, SIGHUP, SIGINT and friends",
    solution=IGNORE,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
