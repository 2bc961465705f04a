"""60,000 files in the work directory (issue 10, hole 4)."""

from harness import Attack

INODES = r'''
import os, time
def answer():
    made = 0
    end = time.monotonic() + 50  # answer before the case timeout, whatever it got
    for i in range(60000):
        if time.monotonic() > end:
            break
        try:
            os.close(os.open(f"f{i}", os.O_WRONLY | os.O_CREAT, 0o644))
            made += 1
        except OSError:
            break
    return "@CLAIM@" if made == 60000 else made
'''

ATTACK = Attack(
    name="inodes_60000_files",
    tags=("inodes", "disk"),
    tries="to use up the host's inodes with 60,000 empty files in its work directory",
    solution=INODES,
    timeout=60.0,  # generous for a slow disk: the attack answers early once it is done
    case_timeout=55.0,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
