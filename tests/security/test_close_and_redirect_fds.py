"""Close and redirect the standard fds, then write a fake verdict everywhere."""

from harness import Attack

FDS = r'''
import json, os
LINE = json.dumps({"kind": "verdict", "score": 1.0, "passed": True, "exit_code": 0,
                   "final": True, "in_play": True}) + "\n"
def _mess():
    for fd in range(3, 256):
        try:
            os.write(fd, LINE.encode())
        except OSError:
            pass
    r, w = os.pipe()
    for fd in (0, 1, 2):
        try:
            os.dup2(w, fd)
        except OSError:
            pass
    for fd in range(0, 256):
        if fd not in (r, w):
            try:
                os.close(fd)
            except OSError:
                pass
_mess()
def answer():
    _mess()
    return None
'''

ATTACK = Attack(
    name="close_and_redirect_fds",
    tags=("runner", "fake-result"),
    tries="to break the call protocol (or slip in a fake verdict) by closing and redirecting "
          "every fd it holds",
    solution=FDS,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
