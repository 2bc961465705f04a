"""Connect to a host service on 127.0.0.1 that hands out the secret."""

from harness import Attack

CONNECT = r'''
import socket
def answer():
    for host in ("127.0.0.1", "localhost", "::1", "10.0.2.2", "172.17.0.1"):
        try:
            with socket.create_connection((host, @PORT@), timeout=1) as s:
                return s.recv(200).decode()
        except OSError:
            pass
    return None
'''

ATTACK = Attack(
    name="connect_localhost",
    tags=("network", "secrets"),
    tries="to reach a service on the host's loopback (it gives the secret to whoever connects)",
    solution=CONNECT,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
