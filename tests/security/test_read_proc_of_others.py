"""Read /proc of the host, the runner and other runs: command lines, open files, memory."""

from harness import FIND_IN_TEXT, Attack

PROC = FIND_IN_TEXT + r'''
import os
def _search():
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        for name in ("cmdline", "environ", "cwd/verifier.py", "cwd/solution.py",
                     "cwd/test_cases.json", "root/tmp", "fd/0", "fd/3", "fd/4"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as f:
                    found = _secret_in(f.read(1 << 20))
            except OSError:
                continue
            if found:
                return found
        try:  # the memory of anything it may trace
            with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
                for line in maps:
                    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                    if "rw" not in line.split()[1] or hi - lo > 64 << 20:
                        continue
                    mem.seek(lo)
                    found = _secret_in(mem.read(hi - lo))
                    if found:
                        return found
        except (OSError, ValueError, OverflowError):
            pass
    return None
def answer():
    return _search()
'''

ATTACK = Attack(
    name="read_proc_of_others",
    tags=("secrets", "verifier-data", "neighbours", "concurrency"),
    tries="to read the secret from other processes through /proc (command lines, open "
          "files, working directories, memory of the runner and of other runs)",
    solution=PROC,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
