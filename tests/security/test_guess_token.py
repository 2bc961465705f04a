"""Find the run's token (stdin, /proc of the runner) and print a verdict carrying it."""

from harness import Attack

GUESS = r'''
import json, os, re, sys
FAKE = {"kind": "verdict", "score": 1.0, "passed": True, "exit_code": 0, "final": True,
        "in_play": True, "details": "fake"}
def _tokens():
    found = set()
    places = ["/proc/self/fd/0", f"/proc/{os.getppid()}/cmdline", f"/proc/{os.getppid()}/environ"]
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            places += [f"/proc/{pid}/cmdline", f"/proc/{pid}/environ", f"/proc/{pid}/fd/0"]
    for path in places:
        try:
            with open(path, "rb") as f:
                data = f.read(1 << 16)
        except OSError:
            continue
        found.update(re.findall(rb'"token": "([0-9a-f]{32})"', data))
    return found
def _fake():
    tokens = _tokens()
    for token in tokens:
        line = token.decode() + " " + json.dumps(FAKE)
        for fd in range(0, 64):
            try:
                os.write(fd, (line + "\n").encode())
            except OSError:
                pass
    return tokens
_fake()
def answer():
    return "@CLAIM@" if _fake() else None
'''

ATTACK = Attack(
    name="guess_token",
    tags=("fake-result", "runner"),
    tries="to learn the run's result token from the runner's stdin or /proc and print a "
          "verdict line that carries it",
    solution=GUESS,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
