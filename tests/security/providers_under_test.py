"""The providers the battery runs against, and what "the host is clean" means for each.

Adding a provider to the battery is one line in ``PROVIDERS``. Each entry says how to build the
provider (through the real ``make_provider``, so the battery tests what users get) and how to
check the host after a run. A provider that cannot be built here skips with the reason it gave
(under CI, where nothing may skip, that is a failure).

Every provider is wrapped in :class:`Recorded`, which delegates everything to it and writes one
line per sandbox to a ledger file (one JSON object per line, appended atomically, so Ray actor
processes on this machine can share it): for the local provider the run's uid and its
directories, for Daytona, E2B and Modal (whose test servers run their sandboxes on this machine) the
run's uid, so the host check can look for exactly that run's processes and files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.base import ForwardingProvider, Sandbox, SandboxProvider

try:  # Ray actors unpickle these classes by value: no import path needed on their side
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
except ImportError:  # pragma: no cover
    pass

# The local provider runs each solution under a fresh uid at or above this one.
SANDBOX_UID_BASE = 1 << 20


def describe_local(sandbox: Sandbox) -> dict[str, Any]:
    box = sandbox.handle
    return {"uid": box.uid, "dirs": [str(box.work_dir), str(box.solution_dir.parent)]}


def describe_remote(sandbox: Sandbox) -> dict[str, Any]:
    # The local Daytona server runs its sandboxes on this machine: a run's uid (the provider
    # gives each run one) must have no process left here either.
    return {"uid": getattr(sandbox.handle, "uid", None), "dirs": []}


class Recorded(ForwardingProvider):
    """A provider that records every sandbox it makes in a ledger, and otherwise is ``inner``."""

    def __init__(self, inner: SandboxProvider, ledger: str, local: bool) -> None:
        super().__init__(inner)
        self.ledger, self.local = ledger, local

    def create(self, env: Environment) -> Sandbox:
        sandbox = self.inner.create(env)
        entry = (describe_local if self.local else describe_remote)(sandbox)
        entry.update(id=sandbox.id, pid=os.getpid(), env=env.name)
        line = (json.dumps(entry) + "\n").encode()
        fd = os.open(self.ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        return sandbox


@dataclass
class RecordingFactory:
    """A picklable zero-argument provider factory (the client builds providers lazily, in
    each Ray actor too)."""

    mode: str
    ledger: str
    options: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> SandboxProvider:
        from deepgym_ray.sandboxes import make_provider

        return Recorded(make_provider(self.mode, **self.options), self.ledger,
                        local=self.mode == "local")


def read_ledger(path: str, start: int = 0) -> list[dict[str, Any]]:
    """The ledger's complete entries from byte offset ``start`` on. An actor may be writing
    one as it is read (a reader can see part of a write): a last line without its newline is
    not an entry yet. Every run's entry is complete before the run starts."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read()
    except FileNotFoundError:
        return []
    complete = data[:data.rfind(b"\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line.strip()]


def uid_processes(uids: set[int]) -> dict[int, list[str]]:
    """Live (non-zombie) processes whose real, effective or saved uid is in ``uids``:
    uid -> ["pid cmdline", ...]."""
    found: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/status").read_text(errors="replace")
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if fields.get("State", "").split()[:1] == ["Z"]:
            continue
        ids = {int(x) for x in fields.get("Uid", "").split()[:3] if x.isdigit()}
        for uid in ids & uids:
            name = cmdline.replace(b"\0", b" ").decode(errors="replace")[:120]
            found.setdefault(uid, []).append(f"{entry} {name}")
    return found


def remove_tree(path: str) -> None:
    """Remove a tree whatever its depth (``rm`` does not recurse on the stack)."""
    subprocess.run(["rm", "-rf", "--one-file-system", path], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


@dataclass(frozen=True)
class ProviderCase:
    """One provider of the battery: its mode, options, and its host checks."""

    mode: str
    options: dict[str, Any] = field(default_factory=dict)
    needs_env: tuple[str, ...] = ()  # variables that must be set for it to be reachable
    server: str | None = None  # a session fixture serving its API here (url, api_key)
    required: bool = False  # a required provider that cannot be built fails instead of skipping
    # Attacks known to get through this provider today: attack name -> what is missing. Their
    # tests are strict xfails, so one that starts to hold fails until it leaves this list.
    known_gaps: dict[str, str] = field(default_factory=dict)
    name: str | None = None  # its test id, where one mode is tested in several setups
    # The attacks it runs (None: all); the others are deselected, never skipped, unless
    # DEEPGYM_FULL_BATTERY=1 (for a setup whose full battery runs by hand, not in CI).
    attacks: frozenset[str] | None = None

    @property
    def label(self) -> str:
        return self.name or self.mode

    def unavailable(self) -> str | None:
        """Why this provider cannot run here, or None when it can."""
        missing = [name for name in self.needs_env if not os.environ.get(name)]
        if missing:
            return f"{self.mode}: {', '.join(missing)} not set"
        from deepgym_ray.sandboxes import make_provider

        try:
            provider = make_provider(self.mode, **self.options)
        except Exception as exc:  # whatever it is, it is why this provider is skipped
            if self.required:
                raise
            return f"{self.mode}: {type(exc).__name__}: {exc}"
        provider.close()
        return None

    def factory(self, ledger: str) -> RecordingFactory:
        return RecordingFactory(self.mode, ledger, dict(self.options))

    def leftovers(self, entries: list[dict[str, Any]]) -> list[str]:
        """What the recorded runs left on this host: processes of their uids, directories."""
        problems = []
        uids = {e["uid"] for e in entries if e.get("uid") is not None}
        for uid, procs in sorted(uid_processes(uids).items()):
            problems.append(f"{len(procs)} process(es) of sandbox uid {uid} outlived the run: "
                            + "; ".join(procs[:4]))
        for entry in entries:
            for path in entry.get("dirs", []):
                if os.path.lexists(path):
                    problems.append(f"the run's directory {path} is still on the host")
        return problems

    def clean_up(self, entries: list[dict[str, Any]]) -> None:
        """Remove whatever the recorded runs left (after the check has recorded it)."""
        from deepgym_ray.judge.deepgym_proc import kill_uid

        for entry in entries:
            uid = entry.get("uid")
            if uid is not None and uid >= SANDBOX_UID_BASE:
                # only this run's uid: processes our own test started
                kill_uid(uid, rounds=200, wait_for_zombies=False)
            for path in entry.get("dirs", []):
                if os.path.lexists(path):
                    remove_tree(path)


# The battery runs unchanged against every provider listed here; one line per provider.
PROVIDERS = [
    ProviderCase("local", required=True),
    ProviderCase("docker", {"image": os.environ.get("DEEPGYM_DOCKER_IMAGE",
                                                    "deepgym/python:3-bookworm")}),
    # Daytona's default: the sandbox's user is not root (``daytona``) and has passwordless
    # sudo, through which each run's program becomes root (a uid of its own, in the server).
    ProviderCase("daytona", server="daytona_server"),
    # A sandbox whose user is root (an image made so): the same program and judge, without
    # sudo. In CI, the attacks on what differs (who owns and may read or write what, the
    # uids, root's tools, cleanup); the full battery by hand (DEEPGYM_FULL_BATTERY=1 ...
    # -k daytona-root).
    ProviderCase("daytona", server="daytona_root_server", name="daytona-root",
                 attacks=frozenset({
                     "read_verifier_and_tests", "read_host_env_secrets", "fake_result_line",
                     "rewrite_runner_modules", "setuid_escalation", "sudo_escalation",
                     "survivor_double_fork", "disk_fill", "sandbox_control_daemon"})),
    # E2B: the same in-sandbox program and judge as Daytona's, run as root by E2B's daemon.
    # In CI, the attacks on what differs (the files written and the program started as root
    # through E2B's daemon, the daemon itself, who may read and write what, cleanup); the full
    # battery by hand (DEEPGYM_FULL_BATTERY=1 ... -k e2b; all held: RELIABILITY.md).
    ProviderCase("e2b", server="e2b_server",
                 attacks=frozenset({
                     "read_verifier_and_tests", "read_host_env_secrets", "fake_result_line",
                     "rewrite_runner_modules", "sudo_escalation", "survivor_double_fork",
                     "disk_fill", "sandbox_control_daemon"})),
    # Modal: the same program and judge, run as root through Modal's command router, the
    # files through a command's stdin. In CI the same attacks as E2B's; the full battery by
    # hand (DEEPGYM_FULL_BATTERY=1 ... -k modal).
    ProviderCase("modal", server="modal_server",
                 attacks=frozenset({
                     "read_verifier_and_tests", "read_host_env_secrets", "fake_result_line",
                     "rewrite_runner_modules", "sudo_escalation", "survivor_double_fork",
                     "disk_fill", "sandbox_control_daemon"})),
]
