"""A call that double-forks, burns more CPU than its case allows in the orphaned grandchild and
reads the answer back through a pipe: the caller itself only waits (issue 32, point 3). A per-case
limit that counts only the solution process and its reaped children never sees that CPU; one
read from the solution's cgroup counts every process it started, reaped or not."""

from harness import Attack

# The grandchild returns the claim only once its own CPU time is past the case limit (it measures
# it itself), so a 1.0 means CPU beyond the limit was really spent inside one call.
GRANDCHILD_BURN = r'''
import os, time
LIMIT = 1.0          # the environment's case_timeout
BURN = 2.5 * LIMIT   # CPU seconds the grandchild spends: what a brute force would need
def answer():
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        if os.fork() != 0:
            os._exit(0)          # the middle process exits at once: the burner is an orphan
        os.setsid()
        start = time.process_time()
        x = 0
        while time.process_time() - start < BURN:
            for i in range(20000):
                x = (x * 31 + i) % 1000003
        os.write(w, b"%.3f" % (time.process_time() - start))
        os._exit(0)
    os.close(w)
    os.waitpid(child, 0)         # reaps the middle process only
    data = b""
    while True:                  # blocks without computing
        chunk = os.read(r, 64)
        if not chunk:
            break
        data += chunk
    burnt = float(data or b"0")
    return "@CLAIM@" if burnt >= BURN else None
'''

ATTACK = Attack(
    name="cpu_in_orphaned_grandchild",
    tags=("time", "processes"),
    tries="to pass a 1 s CPU limit per case by burning 2.5 s of CPU in an orphaned, double-"
          "forked grandchild and reading its answer back through a pipe",
    solution=GRANDCHILD_BURN,
    # Long enough that no wall-clock bound of the request (a third of the run's time left, ten
    # times the case limit) ends the call before the grandchild is done: only its CPU can.
    timeout=30.0,
    case_timeout=1.0,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
