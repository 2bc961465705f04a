"""Read the verifier, its test data and support files wherever a copy could be."""

from harness import FIND_IN_TEXT, Attack

SEARCH = FIND_IN_TEXT + r'''
import glob, os, time
def _search():
    places = ["../verifier.py", "../test_cases.json", "../data/secret.txt", "verifier.py",
              "test_cases.json", "data/secret.txt", "/proc/self/cwd/../verifier.py",
              f"/proc/{os.getppid()}/cwd/verifier.py", f"/proc/{os.getppid()}/cwd/test_cases.json",
              "/proc/1/cwd/verifier.py"]
    places += glob.glob("/tmp/deepgym-run-*/verifier.py") + glob.glob("/tmp/*/test_cases.json")
    for path in places:
        try:
            with open(path, "rb") as f:
                found = _secret_in(f.read())
        except OSError:
            continue
        if found:
            return found
    start = time.monotonic()
    for root in ("/proc/1/root", "/tmp", "/root", "/work", "/home", "/var/tmp", "/"):
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev", "usr")]
            if time.monotonic() - start > 1.5:
                return None
            for name in files:
                if name.endswith((".py", ".json", ".txt")):
                    try:
                        with open(os.path.join(dirpath, name), "rb") as f:
                            found = _secret_in(f.read(1 << 20))
                    except OSError:
                        continue
                    if found:
                        return found
    return None
def answer():
    return _search()
'''

ATTACK = Attack(
    name="read_verifier_and_tests",
    tags=("verifier-data", "secrets"),
    tries="to read the verifier, its test cases and its support files (which hold the secret) "
          "next to its directory, through /proc, or anywhere on the disk",
    solution=SEARCH,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
