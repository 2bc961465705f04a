"""The security battery's harness: what an attack is, and the environments it is judged in.

An attack is one file, ``tests/security/test_<name>.py``, that declares ``ATTACK = Attack(...)``
and the two tests every attack gets (alone, and inside a batch on the Ray pool; see
``battery.py``). Each attack is written so that it scores above 0 only if it worked:

- against the default *probe* environment a solution scores 1.0 only by answering ``SECRET``
  (which lives in the verifier, its test data, a support file, the verifier's environment
  variables and the host's environment, and nowhere a solution may look) or ``CLAIM`` (a public
  string that an attack returns only when it has checked that it got what it tried: the memory,
  the disk, the survivor, the write outside its directory);
- an attack that needs another verifier (the control-flow exceptions, the runner's modules, a
  neighbour's load) brings its own, with a right answer that scores 1.0 on it.

So a judged 0 shows the attack failed, not merely that the answer was wrong; the right answers
run next to it in the batch show the verifier can give 1.0. Solutions and verifiers may use the
placeholders ``@SECRET@`` (verifiers only), ``@CLAIM@``, ``@MARK@`` (in the name of anything an
attack leaves behind), ``@PORT@`` (a host TCP port that hands out the secret) and ``@TAIL@``
(the secret's length after its ``SECRET-`` prefix).
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from deepgym_ray.models import Environment

SECRET = "SECRET-" + uuid.uuid4().hex
CLAIM = "CLAIM-" + uuid.uuid4().hex
MARK = "DGSEC" + uuid.uuid4().hex[:10]
# The host's environment carries the secret too: no sandbox may pass it on to a solution.
CANARY_VARIABLE = "DEEPGYM_SECURITY_CANARY"

TAGS = frozenset({
    "time", "memory", "processes", "disk", "inodes", "output", "fake-result", "verifier-data",
    "runner", "network", "secrets", "outliving", "plain-data", "control-flow", "concurrency",
    "neighbours",
})

PROBE_VERIFIER = '''
from deepgym_solution import load_solution

SECRET = "@SECRET@"
CLAIM = "@CLAIM@"


def verify(solution_path, test_cases_path=None):
    try:
        got = load_solution(solution_path).answer()
    except Exception as exc:
        return {"score": 0.0, "passed": False, "details": repr(exc)[:300]}
    ok = got == SECRET or got == CLAIM
    return {"score": 1.0 if ok else 0.0, "passed": ok, "details": repr(got)[:300]}
'''

PROBE_RIGHT = 'def answer():\n    return "@SECRET@"\n'

# A helper solutions can paste: where a secret could be found if the sandbox leaked it.
FIND_IN_TEXT = '''
def _secret_in(data):
    if isinstance(data, bytes):
        data = data.decode("latin-1")
    at = data.find("SECRET-")
    return data[at:at + 7 + @TAIL@] if at >= 0 and len(data) >= at + 7 + @TAIL@ else None
'''


# A sensor for control-flow exceptions: 1.0 for the right answer, and 1.0 when one of them
# crossed the proxy as itself (what such an attack tries); 0.0 for any other outcome.
CONTROL_FLOW_VERIFIER = '''
from deepgym_solution import load_solution

CONTROL_FLOW = (StopIteration, StopAsyncIteration, GeneratorExit, KeyboardInterrupt, SystemExit)


def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    try:
        ok = sol.double(21) == 42
    except CONTROL_FLOW as exc:
        return {"score": 1.0, "details": "crossed as itself: " + type(exc).__name__}
    except Exception as exc:
        return {"score": 0.0, "details": repr(exc)[:200]}
    return 1.0 if ok else 0.0
'''
CONTROL_FLOW_RIGHT = "def double(x):\n    return 2 * x\n"


@dataclass(frozen=True)
class Attack:
    """One attack of the battery (see the module docstring).

    ``neighbour``: a load or neighbour attack, judged also by an innocent right answer run at
    the same time (it must still score 1.0). ``follow_up``: a later run's solution that cheats
    only if the attack outlived its run (it must be a judged 0 too). ``drops``: host paths the
    attack tries to create (they must not exist afterwards). ``right_timeout``: the right
    answers' run time, when it must outlast the attack's (default: ``timeout``).
    ``expect``: how the attack must end, ``"zero"`` (a judged 0) or ``"verifier_error"`` (the
    verifier's error without a verdict, naming ``load_solution``: what a verifier that runs the
    solution's code in its own process gets).
    """

    name: str
    tags: tuple[str, ...]
    tries: str
    solution: str
    verifier: str = PROBE_VERIFIER
    right: str = PROBE_RIGHT
    timeout: float = 5.0
    case_timeout: float = 2.0
    test_cases: list[Any] | None = field(default_factory=lambda: [{"secret": "@SECRET@"}])
    neighbour: bool = False
    follow_up: str | None = None
    drops: tuple[str, ...] = ()
    right_timeout: float | None = None
    expect: str = "zero"

    def __post_init__(self) -> None:
        unknown = set(self.tags) - TAGS
        if unknown or not self.tags:
            raise ValueError(f"attack {self.name!r}: unknown or no tags {sorted(unknown)}")
        if self.expect not in ("zero", "verifier_error"):
            raise ValueError(f"attack {self.name!r}: unknown expect {self.expect!r}")
        if "@SECRET@" in self.solution or "@SECRET@" in (self.follow_up or ""):
            raise ValueError(f"attack {self.name!r}: a solution may not be given the secret")

    def environment(self, *, for_right: bool = False) -> Environment:
        """The attack's environment; ``for_right``: the one its right answers run in."""
        cases = None if self.test_cases is None else _fill(self.test_cases)
        timeout = self.right_timeout if for_right and self.right_timeout else self.timeout
        return Environment(
            name=f"security-{self.name}", verifier_code=render(self.verifier),
            test_cases=cases, support_files={"data/secret.txt": SECRET},
            env_vars={"DG_SECRET": SECRET}, timeout=timeout,
            case_timeout=self.case_timeout)

    def code(self) -> str:
        return render(self.solution)

    def right_code(self) -> str:
        return render(self.right)

    def follow_up_code(self) -> str | None:
        return None if self.follow_up is None else render(self.follow_up)

    def drop_paths(self) -> list[str]:
        return [render(path) for path in self.drops]


def render(text: str) -> str:
    """Fill the placeholders (see the module docstring)."""
    return (text.replace("@SECRET@", SECRET).replace("@CLAIM@", CLAIM)
            .replace("@MARK@", MARK).replace("@PORT@", str(secret_listener().port))
            .replace("@TAIL@", str(len(SECRET) - len("SECRET-"))))


def _fill(value: Any) -> Any:
    if isinstance(value, str):
        return render(value)
    if isinstance(value, list):
        return [_fill(v) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v) for k, v in value.items()}
    return value


class SecretListener:
    """A TCP listener on the host's loopback that hands the secret to whoever connects; it
    counts connections, so a test can also see that nobody reached it."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, name="secret-listener", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            try:
                conn.sendall(SECRET.encode())
            except OSError:
                pass
            conn.close()


_LISTENER: list[SecretListener] = []
_LISTENER_LOCK = threading.Lock()


def secret_listener() -> SecretListener:
    with _LISTENER_LOCK:
        if not _LISTENER:
            _LISTENER.append(SecretListener())
        return _LISTENER[0]


def plant_host_canary() -> None:
    """Put the secret in this process's environment (inherited by Ray and every provider)."""
    os.environ[CANARY_VARIABLE] = SECRET
