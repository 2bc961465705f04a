"""Connect to the host's unix sockets (Ray's, the zygote's control socket, abstract ones)."""

from harness import Attack

UNIX = r'''
import glob, os, socket
def answer():
    paths = glob.glob("/tmp/ray/session_*/sockets/*") + glob.glob("/tmp/*/ray/session_*/sockets/*")
    paths += glob.glob("/tmp/deepgym-run-*/ctl")
    paths += glob.glob("/run/*.sock") + glob.glob("/var/run/*.sock") + ["/run/docker.sock"]
    names = ["\0" + line.split()[-1][1:] for line in open("/proc/net/unix")
             if line.split()[-1].startswith("@")] if os.path.exists("/proc/net/unix") else []
    for address in paths + names:
        for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
            try:
                with socket.socket(socket.AF_UNIX, kind) as s:
                    s.settimeout(0.5)
                    s.connect(address)
                    return "@CLAIM@"
            except OSError:
                pass
    return None
'''

ATTACK = Attack(
    name="unix_sockets",
    tags=("network", "runner", "concurrency"),
    tries="to connect to any unix socket of the host (Ray's raylet, the zygote's control "
          "socket, docker, abstract sockets of other runs)",
    solution=UNIX,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
