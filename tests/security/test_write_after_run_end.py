"""A forked child keeps a handle on the work directory and writes there after the run ended."""

from harness import Attack

LATE_WRITER = r'''
import os, time
def _plant():
    try:
        here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        if os.fork() != 0:
            return
    except OSError:
        return
    try:
        os.setsid()
    except OSError:
        pass
    blob = b"x" * (1 << 20)
    for i in range(600):
        try:
            fd = os.open(f"@MARK@-late-{i}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=here)
            os.write(fd, blob)
            os.close(fd)
        except OSError:
            pass
        time.sleep(0.05)
    os._exit(0)
_plant()
def answer():
    return None
'''

ATTACK = Attack(
    name="write_after_run_end",
    tags=("outliving", "disk"),
    tries="to keep writing to the host's disk through a handle on its work directory after "
          "its run has returned",
    solution=LATE_WRITER,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
