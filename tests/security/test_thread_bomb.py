"""Threads without end, each holding its stack."""

from harness import Attack

ATTACK = Attack(
    name="thread_bomb",
    tags=("processes", "memory"),
    tries="to exhaust the host's threads and memory by starting sleeping threads without end",
    solution=r'''
import threading, time
def answer():
    started = 0
    while True:
        try:
            threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
            started += 1
        except Exception:
            if started > 100000:
                return "@CLAIM@"
            time.sleep(0.01)
''',
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
