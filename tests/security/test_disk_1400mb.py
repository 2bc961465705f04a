"""1.4 GB in the work directory, in files under the per-file limit (issue 10, hole 4)."""

from harness import Attack

# posix_fallocate takes real blocks on the host's disk without writing them (fast); the answer
# claims success only when all 1.4 GB were given to it.
DISK = r'''
import os
def answer():
    got = 0
    for i in range(28):
        try:
            fd = os.open(f"@MARK@-fill-{i}", os.O_WRONLY | os.O_CREAT, 0o644)
            os.posix_fallocate(fd, 0, 50 << 20)
            os.close(fd)
            got += 50 << 20
        except OSError:
            break
    return "@CLAIM@" if got >= 1400 << 20 else got
'''

ATTACK = Attack(
    name="disk_1400mb",
    tags=("disk",),
    tries="to put 1.4 GB on the host's disk in 50 MB files (under the per-file limit, as the "
          "only disk limit is per file)",
    solution=DISK,
    timeout=20.0,
    case_timeout=15.0,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
