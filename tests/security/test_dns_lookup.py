"""Resolve names and talk to resolvers (DNS as a way out)."""

from harness import Attack

DNS = r'''
import socket
QUERY = bytes.fromhex("abcd01000001000000000000") + b"\x07example\x03com\x00\x00\x01\x00\x01"
def answer():
    try:
        if socket.getaddrinfo("example.com", 80):
            return "@CLAIM@"
    except OSError:
        pass
    servers = ["127.0.0.53", "127.0.0.1", "8.8.8.8", "1.1.1.1", "10.0.2.3"]
    try:
        with open("/etc/resolv.conf") as f:
            servers += [l.split()[1] for l in f if l.startswith("nameserver")]
    except OSError:
        pass
    for server in servers:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.settimeout(0.5)
                s.sendto(QUERY, (server, 53))
                if s.recvfrom(512)[0][:2] == QUERY[:2]:
                    return "@CLAIM@"
        except OSError:
            pass
    return None
'''

ATTACK = Attack(
    name="dns_lookup",
    tags=("network",),
    tries="to resolve a name, or get any answer from a DNS server on the loopback, the "
          "host's resolvers or public ones",
    solution=DNS,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
