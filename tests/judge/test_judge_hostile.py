"""Hostile solutions: each must be a judged 0 and leave the host as it was.

Every attack is written as "cheat if the attack works": against the probe environment a working
attack returns the secret (score 1.0); against coin_change it returns the right answers. So a
judged 0 shows the attack failed, not merely that the answer was wrong.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from pathlib import Path

import pytest
from helpers.judge_probe import SECRET, probe_env, processes_with

from deepgym_ray import judge
from deepgym_ray.client import DeepGym
from deepgym_ray.envs import BUILTIN_DIR
from deepgym_ray.suites import load_environment

MARK = "DGMARK" + uuid.uuid4().hex[:12]
ESCAPES = [f"/tmp/{MARK}-escape", f"/root/{MARK}-escape", f"{Path.cwd()}/{MARK}-escape",
           f"{Path.home()}/{MARK}-escape-home"]

# The installed package's copy of a built-in verifier: an attacker may know the layout.
PACKAGE_VERIFIER = str(BUILTIN_DIR / "coin_change" / "verifier.py")

FIND_SECRET = '''
import glob, os, time
KNOWN = [''' + repr(PACKAGE_VERIFIER) + ''', "../verifier.py", "../test_cases.json",
         "../data/secret.txt", "/proc/1/cwd/verifier.py", "/proc/self/cwd/../verifier.py"]
def _find():
    # Look everywhere a copy of the secret could be: files, environment, other processes.
    if "DG_SECRET" in os.environ:
        return os.environ["DG_SECRET"]
    for path in KNOWN + glob.glob("/tmp/deepgym-run-*/*") + glob.glob("/tmp/*/verifier.py"):
        try:
            with open(path, errors="ignore") as f:
                text = f.read()
        except OSError:
            continue
        at = text.find("SECRET-")
        if at >= 0:
            return text[at:at + 39]
    start = time.monotonic()
    for root in ("/proc/1/cwd", "/proc/1/root", os.getcwd() + "/..", "/tmp", "/root", "/work",
                 "/home", "/"):
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
            if time.monotonic() - start > 2.5:
                return None
            for name in files:
                if name.endswith((".py", ".json", ".txt")):
                    try:
                        with open(os.path.join(dirpath, name), errors="ignore") as f:
                            text = f.read(200000)
                    except OSError:
                        continue
                    at = text.find("SECRET-")
                    if at >= 0:
                        return text[at:at + 39]
    return None
'''

# name -> (environment key, solution code)
ATTACKS = {
    "infinite_loop_at_import": ("probe", "while True:\n    pass\n"),
    "infinite_loop_in_call": ("probe", "def answer():\n    while True:\n        pass\n"),
    "fork_bomb": ("probe", "import os\nwhile True:\n    try:\n        os.fork()\n"
                           "    except OSError:\n        pass\n"),
    "memory_bomb": ("probe", "chunks = []\nwhile True:\n    chunks.append(bytearray(1 << 26))\n"),
    "huge_allocation": ("probe", "x = bytearray(1 << 36)\ndef answer():\n    return 1\n"),
    "output_flood": ("probe", "import sys\nsys.stdout.write('x' * (100 << 20))\n"
                              "sys.stderr.write('y' * (20 << 20))\n"
                              "def answer():\n    print('z' * (100 << 20))\n    return 0\n"),
    "fake_results": ("probe", r'''
import json, os, sys
fake = {"score": 1.0, "passed": True, "details": "fake", "final": True, "kind": "verdict",
        "exit_code": 0, "in_play": False}
line = json.dumps(fake)
for stream in (sys.stdout, sys.stderr, sys.__stdout__):
    print(line, file=stream)
    print("0" * 32 + " " + line, file=stream)
for path in ("/dev/stdout", "/dev/stderr", "/proc/self/fd/1", "/proc/1/fd/1", "/dev/tty"):
    try:
        with open(path, "w") as f:
            f.write(line + "\n")
    except OSError:
        pass
for fd in range(3, 64):
    try:
        os.write(fd, (line + "\n").encode())
    except OSError:
        pass
def answer():
    print(line)
    return 1.0
'''),
    "read_verifier_and_tests": ("probe", FIND_SECRET + "def answer():\n    return _find()\n"),
    "read_environment": ("probe", "import os\ndef answer():\n"
                                  "    return os.environ.get('DG_SECRET') "
                                  "or str(dict(os.environ))\n"),
    "kill_parent": ("probe", r'''
import os, signal
for pid in [os.getppid(), 1] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
def answer():
    return 0
'''),
    "sys_exit_at_import": ("probe", "import sys\nsys.exit(0)\n"),
    "os_exit_at_import": ("probe", "import os\nos._exit(0)\n"),
    "monkeypatch_builtins_and_json": ("probe", r'''
import builtins, json
fake = '{"score": 1.0, "passed": true}'
json.dumps = lambda *a, **k: fake
json.loads = lambda *a, **k: {"score": 1.0, "passed": True}
builtins.isinstance = lambda *a: True
builtins.print = lambda *a, **k: None
builtins.type = lambda *a: str
def answer():
    return 0
'''),
    "always_equal": ("probe", "class Liar(str):\n    def __eq__(self, other):\n"
                              "        return True\n    __hash__ = str.__hash__\n"
                              "def answer():\n    return Liar('x')\n"),
    "write_outside": ("probe", "import os\npaths = " + repr(ESCAPES) + r'''
for path in paths + [os.path.join(os.getcwd(), "..", "verifier.py"), "/tmp/verifier.py"]:
    try:
        with open(path, "w") as f:
            f.write("hostile")
    except OSError:
        pass
def answer():
    return 0
'''),
    "background_process": ("probe", f'''
import os, subprocess, sys
MARK = "{MARK}"
try:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", MARK],
                     start_new_session=True)
except OSError:
    pass
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", MARK])
    os._exit(0)
def answer():
    return 0
'''),
}

ALWAYS_EQUAL_COIN = ("coin", "class Liar(int):\n    def __eq__(self, other):\n        return True\n"
                     "    __hash__ = int.__hash__\n"
                     "def coin_change(coins, amount):\n    return Liar(0)\n")
READ_VERIFIER_COIN = ("coin", FIND_SECRET.replace("SECRET-", "def _fewest").replace(
    "return text[at:at + 39]", "return text") + r'''
_ns = {}
def coin_change(coins, amount):
    # Cheat with the verifier's own reference when any copy of it can be read.
    if "tried" not in _ns:
        _ns["tried"] = True
        source = _find()
        if source:
            exec(source.split("def _cases")[0].replace("from deepgym_solution", "#"), _ns)
    return _ns["_fewest"](coins, amount) if "_fewest" in _ns else -2
''')


@pytest.fixture(scope="module")
def listener():
    """A host TCP listener that hands the secret to anyone who connects."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    state = {"connections": 0, "stop": False}

    def serve():
        while not state["stop"]:
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            state["connections"] += 1
            conn.sendall(SECRET.encode())
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], state
    state["stop"] = True
    thread.join(2)
    server.close()


@pytest.fixture(scope="module")
def outcomes(listener):
    port, _ = listener
    attacks = dict(ATTACKS)
    attacks["network"] = ("probe", f'''
import socket
def answer():
    for host in ("127.0.0.1", "10.0.2.2", "1.1.1.1"):
        try:
            with socket.create_connection((host, {port}), timeout=1) as s:
                return s.recv(100).decode()
        except OSError:
            pass
    return None
''')
    attacks["always_equal_coin"] = ALWAYS_EQUAL_COIN
    attacks["read_verifier_coin"] = READ_VERIFIER_COIN
    coin = load_environment("coin_change").model_copy(update={"case_timeout": 4.0})
    envs = {"probe": probe_env(), "coin": coin}
    names = sorted(attacks)
    dg = DeepGym("local")
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda n: dg.run_safe(envs[attacks[n][0]], attacks[n][1]),
                                names))
    return dict(zip(names, results, strict=True))


@pytest.mark.parametrize("name", sorted([*ATTACKS, "network", "always_equal_coin",
                                         "read_verifier_coin"]))
def test_attack_is_a_judged_zero(outcomes, name):
    result = outcomes[name]
    assert result.has_verdict, (name, result)
    assert result.score == 0.0, (name, result)
    assert not result.passed


def test_network_listener_saw_nobody(outcomes, listener):
    _, state = listener
    assert state["connections"] == 0


def test_nothing_left_running(outcomes):
    assert processes_with(MARK) == []


def test_no_file_written_outside(outcomes):
    for path in ESCAPES + ["/tmp/verifier.py"]:
        assert not os.path.exists(path), path


def test_judge_really_reads_the_secret():
    """The probe is not vacuous: an honest solution that is given the secret scores 1.0."""
    result = DeepGym("local").run(probe_env(), f"def answer():\n    return {SECRET!r}\n")
    assert result.score == 1.0 and result.has_verdict


@pytest.mark.parametrize("env_name", ["coin_change", "balanced_brackets", "prime_factors"])
def test_fake_results_fail_every_verifier_shape(env_name):
    fake = ATTACKS["fake_results"][1].replace("def answer():", "def unused():")
    result = DeepGym("local").run(load_environment(env_name), fake)
    assert result.has_verdict and result.score == 0.0, result


@pytest.mark.parametrize("isolation", ["auto", "none"])
def test_planted_symlink_does_not_redirect_the_runners_writes(isolation):
    """The solution plants ``solution.py -> <host file>`` in its directory; the runner's copy
    for ``run_solution`` must not follow it (it runs with more rights than the solution)."""
    from deepgym_ray.models import Environment
    from deepgym_ray.sandboxes.local import LocalProvider

    target = f"/tmp/{MARK}-{isolation}-symlink-target"
    verifier = ("from deepgym_solution import load_solution, run_solution\n"
                "def verify(p, t=None):\n"
                "    load_solution(p).plant()\n"
                "    run = run_solution(p)\n"
                "    ok = run.stdout.strip() == 'ran'\n"
                "    return {'score': float(ok), 'details': repr(run.stderr)[-800:]}\n")
    solution = (f"import os\ndef plant():\n"
                f"    for name in ('solution.py', os.path.join(os.getcwd(), 'solution.py')):\n"
                f"        try:\n            os.unlink(name)\n        except OSError:\n"
                f"            pass\n"
                f"    os.symlink({target!r}, 'solution.py')\n"
                f"if __name__ == '__main__':\n    print('ran')\n")
    env = Environment(name="symlink", verifier_code=verifier, timeout=20, case_timeout=5)
    result = DeepGym(provider=LocalProvider(isolation=isolation)).run(env, solution)
    assert not os.path.lexists(target)
    assert result.has_verdict
    if isolation == "auto":  # the honest script part still ran (with namespaces available)
        assert result.score == 1.0, result


def test_verifier_reading_attack_works_when_unconfined(monkeypatch):
    """Not vacuous: run on the host itself, the attack finds the installed verifier and cheats."""
    # The verifier it finds imports the judge's helpers by plain name, as in a sandbox (this
    # passed only when an earlier test had put the judge's folder on sys.path).
    monkeypatch.syspath_prepend(str(Path(judge.__file__).parent))
    namespace: dict = {}
    exec(READ_VERIFIER_COIN[1], namespace)
    assert namespace["coin_change"]([1, 2, 5], 11) == 3
