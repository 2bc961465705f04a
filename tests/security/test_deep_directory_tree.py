"""A 1,500-level deep directory tree in the work directory (issue 10, hole 2)."""

from harness import Attack

DEEP_TREE = r'''
import os
def answer():
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1500):
        try:
            os.mkdir("d", dir_fd=here)
            nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=here)
        except OSError:
            break
        os.close(here)
        here = nxt
    return None
'''

ATTACK = Attack(
    name="deep_directory_tree",
    tags=("inodes", "disk", "runner"),
    tries="to break the cleanup (and so the verdict, and later runs' start-up) with a "
          "directory tree 1,500 levels deep",
    solution=DEEP_TREE,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
