"""Write until the disk (or a limit) says no: the host's disk must stay the host's."""

from harness import Attack

# Capped at 4 GB so a broken sandbox does not fill a shared machine; claims success when more
# than 2 GB landed (no sane per-run disk budget is that large).
FILL = r'''
import os
def answer():
    got = 0
    i = 0
    while got < 4 << 30:
        try:
            fd = os.open(f"@MARK@-{i}", os.O_WRONLY | os.O_CREAT, 0o644)
            os.posix_fallocate(fd, 0, 60 << 20)
            os.close(fd)
            got += 60 << 20
        except OSError:
            break
        i += 1
    return "@CLAIM@" if got > 2 << 30 else got
'''

ATTACK = Attack(
    name="disk_fill",
    tags=("disk",),
    tries="to fill the host's disk through its work directory",
    solution=FILL,
    timeout=20.0,
    case_timeout=15.0,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
