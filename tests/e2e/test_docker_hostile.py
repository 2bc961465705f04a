"""Hostile basics in docker mode, through the Ray pool, in ONE warm container: each attack is a
judged 0, and the next run in the same container (a canary) finds nothing the attack left: no
process, no file, no IPC object, no changed judge file.

The pool has one actor with one slot and keeps one warm container, so the runs of the batch
go one after another through the same container (each result's ``sandbox_id`` names it).
"""

from __future__ import annotations

import hashlib
import socket
import threading
import uuid

import pytest
from helpers.docker_engine import docker_skip_reason, make_docker_client, shutdown_pool
from helpers.judge_probe import SECRET, probe_env

from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.docker import _judge_files

MARK = "DGMARK" + uuid.uuid4().hex[:12]
JUDGE_HASHES = {name: hashlib.sha256(data).hexdigest() for name, data in _judge_files().items()}

CANARY_VERIFIER = f'''
import hashlib, os
from deepgym_solution import load_solution

MARK = {MARK!r}
EXPECTED = {JUDGE_HASHES!r}


def _started(pid):
    with open(f"/proc/{{pid}}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def _problems():
    problems, me = [], _started("self")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{{entry}}/status") as f:
                status = f.read()
            with open(f"/proc/{{entry}}/cmdline", "rb") as f:
                cmd = f.read()
            started = _started(entry)
        except (OSError, ValueError):
            continue
        uid = int(status.split("Uid:")[1].split()[0])
        if uid != 0 and started < me:  # a run's process older than this run
            problems.append(f"pid {{entry}} of uid {{uid}} is left: {{cmd[:60]!r}}")
        if MARK.encode() in cmd:
            problems.append(f"marked process {{entry}}")
    for directory in ("/tmp", "/dev/shm", "/dev/mqueue"):
        try:
            left = os.listdir(directory)
        except OSError:
            continue
        if left:
            problems.append(f"{{directory}} holds {{left[:5]}}")
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{{kind}}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            rows = []
        if rows:
            problems.append(f"{{len(rows)}} SysV {{kind}} objects")
    for name, digest in EXPECTED.items():
        try:
            with open("/deepgym/judge/" + name, "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
        except OSError as exc:
            got = repr(exc)
        if got != digest:
            problems.append(f"judge file {{name}} changed")
    if any(MARK in name for name in os.listdir(".")):
        problems.append(f"work directory holds {{os.listdir('.')}}")
    return problems


def verify(solution_path, test_cases_path=None):
    problems = _problems()
    seen = load_solution(solution_path).look()
    if seen:
        problems.append(f"the solution saw {{seen}}")
    return {{"score": 0.0 if problems else 1.0, "passed": not problems,
            "details": "; ".join(problems)[:3000] or "clean"}}
'''
CANARY_SOLUTION = '''
import os
def look():
    seen = []
    for directory in (".", "/tmp", "/dev/shm"):
        try:
            left = os.listdir(directory)
        except OSError:
            continue
        if left:
            seen.append(f"{directory}: {left[:5]}")
    return seen
'''
CANARY = Environment(name="canary", verifier_code=CANARY_VERIFIER, timeout=30, case_timeout=10)

FIND_SECRET = r'''
import glob, os
def answer():
    paths = ["/deepgym/run/work/verifier.py", "/deepgym/run/work/test_cases.json",
             "/deepgym/run/work/data/secret.txt", "../verifier.py", "/proc/1/environ"]
    paths += glob.glob("/proc/*/environ") + glob.glob("/proc/*/cwd/verifier.py")
    paths += glob.glob("/deepgym/*/*") + glob.glob("/deepgym/*/*/*") + glob.glob("/tmp/*")
    for path in paths:
        try:
            with open(path, errors="ignore") as f:
                text = f.read()
        except OSError:
            continue
        at = text.find("SECRET-")
        if at >= 0:
            return text[at:at + 39]
    return os.environ.get("DG_SECRET")
'''

ATTACKS = {
    "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                 "        pass\n",
    "memory_bomb": "chunks = []\nwhile True:\n    chunks.append(bytearray(1 << 26))\n",
    "leftover_process": f'''
import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{MARK}"],
                 start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)",
                                  "{MARK}"])
    os._exit(0)
def answer():
    return 0
''',
    "leftover_files": f'''
import ctypes, os
from multiprocessing import shared_memory
MARK = "{MARK}"
for directory in (".", "..", "/tmp", "/dev/shm", "/var/tmp", "/deepgym", "/deepgym/sol",
                  "/deepgym/run", "/deepgym/judge", os.path.expanduser("~"), "/"):
    try:
        with open(os.path.join(directory, MARK), "w") as f:
            f.write("left behind")
    except OSError:
        pass
for path in ("/deepgym/judge/deepgym_runner.py", "/deepgym/run/work/verifier.py"):
    try:
        with open(path, "a") as f:
            f.write("# changed")
    except OSError:
        pass
try:
    shared_memory.SharedMemory(name=MARK, create=True, size=4096)
except OSError:
    pass
libc = ctypes.CDLL(None)
libc.shmget(0x5EED, 4096, 0o1000 | 0o666)
def answer():
    return 0
''',
    "read_verifier": FIND_SECRET,
    "kill_everything": r'''
import os, signal
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
def answer():
    return 0
''',
}


def _gateway() -> str | None:
    import docker

    try:
        config = docker.from_env(timeout=10).api.inspect_network("bridge")["IPAM"]["Config"]
        return config[0].get("Gateway")
    except Exception:  # noqa: BLE001 - no bridge network: loopback only
        return None


@pytest.fixture(scope="module")
def listener():
    """TCP listeners (loopback and the docker bridge) that hand the secret to anyone."""
    hosts = ["127.0.0.1"] + [h for h in (_gateway(),) if h]
    servers, state = [], {"connections": 0, "stop": False, "ports": {}}
    for host in hosts:
        server = socket.socket()
        server.bind((host, 0))
        server.listen(16)
        server.settimeout(0.2)
        servers.append(server)
        state["ports"][host] = server.getsockname()[1]

    def serve(server):
        while not state["stop"]:
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            state["connections"] += 1
            conn.sendall(SECRET.encode())
            conn.close()

    threads = [threading.Thread(target=serve, args=(s,), daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    yield state
    state["stop"] = True
    for thread, server in zip(threads, servers, strict=True):
        thread.join(2)
        server.close()


@pytest.fixture(scope="module")
def engine():
    """Skips (with the reason) where there is no engine or no test image."""
    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def outcomes(ray_local, listener, engine):
    attacks = dict(ATTACKS)
    attacks["network"] = "import socket\ndef answer():\n" + "".join(
        f"    try:\n        with socket.create_connection(({h!r}, {p}), timeout=1) as s:\n"
        f"            return s.recv(100).decode()\n    except OSError:\n        pass\n"
        for h, p in listener["ports"].items()) + "    return None\n"
    probe = probe_env(timeout=20, case_timeout=4)
    names = sorted(attacks)
    envs, outputs = [CANARY], [CANARY_SOLUTION]
    for name in names:
        envs += [probe, CANARY]
        outputs += [attacks[name], CANARY_SOLUTION]
    envs.append(probe)
    outputs.append(f"def answer():\n    return {SECRET!r}\n")  # the probe is not vacuous
    client = make_docker_client(actors=1, concurrency=1, warm_containers=1)
    try:
        results = client.eval(envs, outputs, max_parallel=1).results
    finally:
        shutdown_pool(client)
        client.close()
    return {"first_canary": results[0], "honest": results[-1],
            **{name: (results[1 + 2 * i], results[2 + 2 * i]) for i, name in enumerate(names)}}


NAMES = sorted([*ATTACKS, "network"])


def test_a_fresh_container_passes_the_canary(outcomes):
    result = outcomes["first_canary"]
    assert result.has_verdict and result.score == 1.0, result.details


def test_the_probe_pays_an_honest_secret(outcomes):
    assert outcomes["honest"].score == 1.0, outcomes["honest"]


@pytest.mark.parametrize("name", NAMES)
def test_attack_is_a_judged_zero(outcomes, name):
    attack, _ = outcomes[name]
    assert attack.has_verdict and attack.score == 0.0 and not attack.passed, (name, attack)


@pytest.mark.parametrize("name", NAMES)
def test_next_run_in_the_same_container_finds_nothing_left(outcomes, name):
    attack, canary = outcomes[name]
    assert attack.sandbox_id.split("/")[0] == canary.sandbox_id.split("/")[0], \
        (attack.sandbox_id, canary.sandbox_id)
    assert canary.has_verdict and canary.score == 1.0, (name, canary.details)


def test_no_connection_reached_the_host(outcomes, listener):
    assert listener["connections"] == 0


def test_the_canary_sees_leftovers_when_there_are_some(engine):
    """Not vacuous: a verifier that leaves things behind itself and then runs the canary's
    checks finds them (a marked process, a file in /tmp, a SysV segment)."""
    from helpers.docker_engine import make_docker_client as make

    verifier = CANARY_VERIFIER.replace("def verify(solution_path, test_cases_path=None):\n",
                                       "def verify(solution_path, test_cases_path=None):\n"
                                       "    _leave()\n") + '''

def _leave():
    import ctypes, subprocess, sys, time
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", MARK])
    # Popen returns once the child's exec has begun; its command line shows a moment later
    # (the kernel sets it up after closing the exec pipe): wait for it, as a real leftover of
    # an earlier run would long have it. On a machine with every core busy the canary once
    # looked in that moment.
    for _ in range(3000):
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            if MARK.encode() in f.read():
                break
        time.sleep(0.01)
    with open("/tmp/" + MARK, "w") as f:
        f.write("x")
    ctypes.CDLL(None).shmget(0x5EEE, 4096, 0o1000 | 0o666)
'''
    client = make(backend="threads", warm_containers=1)
    try:
        result = client.run(Environment(name="dirty", verifier_code=verifier, timeout=30),
                            CANARY_SOLUTION)
    finally:
        client.close()
    assert result.has_verdict and result.score == 0.0, result
    for seen in ("marked process", f"/tmp holds ['{MARK}']", "SysV shm"):
        assert seen in result.details, result.details


def test_the_containers_memory_limit_kills_the_solution_not_the_container(engine):
    """No per-process limit, a small container: the kernel's OOM killer picks the solution
    (the agent makes it the first choice), the run is a judged 0, and the same container
    then passes the canary."""
    from helpers.docker_engine import make_docker_client as make

    bomb = "chunks = []\nwhile True:\n    chunks.append(b'x' * (1 << 24))\n"
    client = make(backend="threads", warm_containers=1, memory_mb=256,
                  solution_memory_mb=8192)
    try:
        attack = client.run_safe(probe_env(timeout=60, case_timeout=50), bomb)
        canary = client.run_safe(CANARY, CANARY_SOLUTION)
    finally:
        client.close()
    assert attack.has_verdict and attack.score == 0.0, attack
    assert "-9" in (attack.details or ""), attack.details  # killed, not a MemoryError
    assert canary.sandbox_id.split("/")[0] == attack.sandbox_id.split("/")[0]
    assert canary.score == 1.0, canary.details
