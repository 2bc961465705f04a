"""Test sandbox providers for the pool: slow, failing, actor-killing, and a do-nothing one.

``ScriptedProvider`` implements the real provider protocol and answers the way the judge's
runner does (token-tagged JSON lines on stdout, the announced exit code), so the real client and
the real ``judge.host.interpret`` read its output. What a run does is written in the "solution"
itself, one ``key=value`` directive per line:

    score=0.5          the verdict's score (passed when 1.0)
    sleep=0.2          seconds the run takes
    cases=1,0,1        per-test results (scores)
    components=a:0.5   reward components
    fail=always        the provider fails (connection error) on every attempt
    fail=once:<tag>    ... only on the first attempt anywhere in the cluster (marker file)
    kill=once:<tag>    the first attempt kills the process holding the provider (the actor)
    node=1             the sandbox id names the Ray node that ran it
    gate=<tag>         the run says it started, then waits until the test opens the gate
                       (see Gate): a batch held in flight for as long as a test needs
    starved=always     the run times out with the runner's note that the machine's load
                       starved it (a judged 0 the host runs again)
    starved=once:<tag> ... only on the first attempt (marker file)

The module registers itself with Ray's cloudpickle by value, so Ray workers need no path to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deepgym_ray.exceptions import ProviderConnectionError, ProviderHTTPError
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.base import (
    CommandResult,
    ForwardingProvider,
    Sandbox,
    SandboxProvider,
)

try:  # workers unpickle these classes by value: no import path needed on their side
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
except ImportError:  # pragma: no cover
    pass


def directives(code: str) -> dict[str, str]:
    out = {}
    for line in code.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def script(**kw: Any) -> str:
    """A solution for ScriptedProvider: ``script(score=1.0, sleep=0.1)``."""
    return "".join(f"{k}={v}\n" for k, v in kw.items())


class ScriptedProvider(SandboxProvider):
    """Answers like the judge runner, as each solution's directives say (see module doc)."""

    name = "scripted"

    def __init__(self, marker_dir: str | os.PathLike[str] | None = None) -> None:
        self.marker_dir = Path(marker_dir) if marker_dir else None
        self._files: dict[str, dict[str, bytes]] = {}
        self._lock = threading.Lock()

    def create(self, env: Environment) -> Sandbox:
        sandbox = Sandbox(id=f"scripted-{uuid.uuid4().hex[:12]}", provider=self.name)
        with self._lock:
            self._files[sandbox.id] = {}
        return sandbox

    def put_files(self, sandbox: Sandbox, files: Mapping[str, bytes]) -> None:
        with self._lock:
            self._files[sandbox.id].update(files)

    def destroy(self, sandbox: Sandbox) -> None:
        with self._lock:
            self._files.pop(sandbox.id, None)

    def _first_time(self, tag: str) -> bool:
        """True once per tag across all processes on this machine (an atomic file create)."""
        assert self.marker_dir is not None, "fail=once/kill=once need a marker_dir"
        try:
            fd = os.open(self.marker_dir / f"{tag}.marker", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        os.close(fd)
        return True

    def run(
        self,
        sandbox: Sandbox,
        command: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        started = time.monotonic()
        with self._lock:
            files = dict(self._files[sandbox.id])
        config = json.loads((stdin or b"{}").decode())
        token = config["token"]
        todo = directives(files.get("solution.py", b"").decode())
        fail = todo.get("fail", "")
        if fail == "always" or (fail.startswith("once:") and self._first_time(fail[5:])):
            raise ProviderConnectionError("scripted provider: connection reset")
        kill = todo.get("kill", "")
        if kill.startswith("once:") and self._first_time(kill[5:]):
            os._exit(17)  # the actor process dies with every run it had in flight
        if todo.get("gate"):
            Gate(self.marker_dir, todo["gate"]).pass_through()
        time.sleep(float(todo.get("sleep", 0)))
        score = float(todo.get("score", 1.0))
        final: dict[str, Any] = {
            "kind": "verdict",
            "score": score,
            "passed": score >= 1.0,
            "exit_code": 0 if score >= 1.0 else 1,
            "details": f"scripted score {score}",
            "in_play": True,
            "final": True,
        }
        starved = todo.get("starved", "")
        if starved == "always" or (starved.startswith("once:") and self._first_time(starved[5:])):
            final.update(score=0.0, passed=False, exit_code=1, error_type="solution_timeout",
                         details="the solution did not answer within 5s of wall-clock time in "
                                 "all", starved="a request took 5.0s, 4.9s of it waiting")
        if "cases" in todo:
            final["cases"] = [{"id": str(i), "passed": float(s) >= 1.0, "score": float(s)}
                              for i, s in enumerate(todo["cases"].split(","))]
        if "components" in todo:
            final["reward_components"] = {
                k: float(v) for k, v in (p.split(":") for p in todo["components"].split(","))
            }
        if todo.get("node"):
            import ray

            sandbox.id = f"{ray.get_runtime_context().get_node_id()}/{sandbox.id}"
        lines = [{"event": "in_play", "t": 0.0}, final]
        stdout = "".join(f"{token} {json.dumps(m)}\n" for m in lines).encode()
        return CommandResult(exit_code=final["exit_code"], stdout=stdout,
                             duration=time.monotonic() - started)


class Gate:
    """Holds ``gate=<tag>`` runs in flight until the test opens it, across processes and nodes.

    A run entering the gate leaves a file naming its Ray node (so the test knows which runs are
    in flight where), then waits for the gate's open file. The test waits on those events,
    never on a clock: ``wait_started(n, node=...)`` returns once n runs are held there.
    """

    POLL = 0.01  # seconds between looks at the marker directory (an event, not a timing)

    def __init__(self, marker_dir: str | os.PathLike[str] | None, tag: str,
                 limit: float = 600.0) -> None:
        assert marker_dir is not None, "gate= needs a marker_dir"
        self.dir = Path(marker_dir)
        self.tag = tag
        self.limit = limit  # a run never waits longer than this: a broken test cannot hang

    @property
    def _open_file(self) -> Path:
        return self.dir / f"{self.tag}.open"

    def pass_through(self) -> None:
        """In a run: say where it started, then wait for the gate to open."""
        try:
            import ray

            node = ray.get_runtime_context().get_node_id()
        except Exception:  # not in a Ray worker
            node = "driver"
        (self.dir / f"{self.tag}.started.{uuid.uuid4().hex}").write_text(node)
        deadline = time.monotonic() + self.limit
        while not self._is_open_for(node):
            if time.monotonic() > deadline:
                raise ProviderConnectionError(f"gate {self.tag} never opened")
            time.sleep(self.POLL)

    def _is_open_for(self, node: str) -> bool:
        try:
            closed_for = self._open_file.read_text().split()
        except OSError:  # not open yet
            return False
        return node not in closed_for

    def started(self) -> list[str]:
        """The node of each run that has entered the gate so far."""
        out = []
        for path in self.dir.glob(f"{self.tag}.started.*"):
            try:
                out.append(path.read_text())
            except OSError:  # being written
                continue
        return out

    def wait_started(self, count: int, node: str | None = None,
                     limit: float = 300.0) -> list[str]:
        """Wait until ``count`` runs (on ``node``, if given) are held at the gate."""
        deadline = time.monotonic() + limit
        while True:
            nodes = self.started()
            if sum(1 for n in nodes if node is None or n == node) >= count:
                return nodes
            assert time.monotonic() < deadline, f"only {len(nodes)} runs reached the gate"
            time.sleep(self.POLL)

    def open(self, except_node: str | None = None) -> None:
        """Let the held runs go on, except those on ``except_node`` (they wait on)."""
        tmp = self.dir / f"{self.tag}.open.tmp"
        tmp.write_text(except_node or "")
        tmp.replace(self._open_file)  # atomic: a run never reads half the list


def make_client(marker_dir: str | os.PathLike[str] | None = None, **config: Any) -> Any:
    """A DeepGym client whose sandboxes are ScriptedProvider ones."""
    from deepgym_ray.config import DeepGymConfig

    cfg = DeepGymConfig(mode="local", **config)
    from deepgym_ray.client import DeepGym

    factory = _Factory(str(marker_dir) if marker_dir else None)
    return DeepGym(config=cfg, provider=factory)


class _Factory:
    """A picklable provider factory (the client builds its provider lazily, per process)."""

    def __init__(self, marker_dir: str | None) -> None:
        self.marker_dir = marker_dir

    def __call__(self) -> ScriptedProvider:
        return ScriptedProvider(self.marker_dir)


def provider_fails(code: bytes) -> bool:
    """Whether :class:`FlakyProvider` refuses this solution (about half of all answers)."""
    return hashlib.sha256(code).digest()[0] % 2 == 1


class FlakyProvider(ForwardingProvider):
    """The real local provider, answering HTTP 503 (no verdict) for the answers
    :func:`provider_fails` names: a trainer's step with some completions unjudged."""

    def __init__(self) -> None:
        from deepgym_ray.sandboxes import make_provider

        super().__init__(make_provider("local"))
        self.name = "flaky-local"

    def put_files(self, sandbox: Sandbox, files: Mapping[str, bytes]) -> None:
        if provider_fails(files["solution.py"]):
            raise ProviderHTTPError(503, "service unavailable (test provider)")
        self.inner.put_files(sandbox, files)
