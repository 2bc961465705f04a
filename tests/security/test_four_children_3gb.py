"""Four children taking 3 GB together under a 1 GB memory limit (issue 10, hole 4)."""

from harness import Attack

# Each child maps and touches 768 MB and reports it on a pipe; the answer claims success only
# when all four held theirs at the same moment (3 GB at once, three times the run's limit):
# each child says so again after the go, so one that the OOM killer took after reporting (to
# make room for the last) does not count.
FOUR_CHILDREN = r'''
import os, select, signal
def _killed(kids):
    for pid in kids:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except OSError:
            continue
        if done and os.WIFSIGNALED(status):
            return True
    return False
def _read_all(fd, want, got, kids):
    # A child the OOM killer took never reports, and the others keep the pipe open: wait for
    # progress, not for an end that never comes. A child killed by a signal ends the wait at
    # once (all four can no longer hold theirs); else 10 s without a report ends it.
    quiet = 0.0
    while len(got) < want and quiet < 10:
        if select.select([fd], [], [], 0.1)[0]:
            chunk = os.read(fd, 4)
            if not chunk:
                break
            got += chunk
            quiet = 0.0
        elif _killed(kids):
            break
        else:
            quiet += 0.1
    return got
def answer():
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    held_r, held_w = os.pipe()
    kids = []
    for _ in range(4):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            try:
                block = bytearray(768 << 20)
                for i in range(0, len(block), 4096):
                    block[i] = 1
                os.write(ready_w, b"1")
                os.read(go_r, 1)
                os.write(held_w, b"2")
            except BaseException:
                pass
            os._exit(0)
        kids.append(pid)
    os.close(ready_w)
    os.close(held_w)
    got = _read_all(ready_r, 4, b"", kids)
    os.write(go_w, b"xxxx")
    got = _read_all(held_r, 8, got, kids)
    for pid in kids:
        try:
            os.waitpid(pid, 0)
        except OSError:
            pass
    return "@CLAIM@" if got == b"11112222" else len(got)
'''

ATTACK = Attack(
    name="four_children_3gb",
    tags=("memory", "processes"),
    tries="to take 3 GB at once with four children under a 1 GB memory limit (the limit is "
          "per process, not per run)",
    solution=FOUR_CHILDREN,
    timeout=45.0,  # generous for a loaded machine: the attack answers once it is done
    case_timeout=40.0,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
