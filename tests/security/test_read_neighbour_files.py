"""Read the files of concurrent runs (the right answers next to it hold the secret)."""

from harness import FIND_IN_TEXT, Attack

NEIGHBOURS = FIND_IN_TEXT + r'''
import glob, os, time
def _search():
    here = os.getcwd()
    patterns = [os.path.join(os.path.dirname(os.path.dirname(here)), "*", "work", "*"),
                os.path.join(os.path.dirname(here), "*"), "/tmp/deepgym-*/*",
                "/tmp/deepgym-*/*/*", "/tmp/deepgym-*/*/work/*"]
    for _ in range(40):  # the neighbours may start a moment later
        for pattern in patterns:
            for path in glob.glob(pattern):
                try:
                    with open(path, "rb") as f:
                        found = _secret_in(f.read(1 << 20))
                except OSError:
                    continue
                if found:
                    return found
        time.sleep(0.02)
    return None
def answer():
    return _search()
'''

ATTACK = Attack(
    name="read_neighbour_files",
    tags=("concurrency", "neighbours", "verifier-data"),
    tries="to read the solution files of concurrent runs (the right answers run beside it in "
          "the batch return the secret) through the shared parent of runs' directories",
    solution=NEIGHBOURS,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
