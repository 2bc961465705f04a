"""A gate that holds a batch's runs in flight, and a real local provider behind it.

``Gate`` is a named Ray actor: every run of a :class:`GatedProvider` reports its arrival to it
and then waits for it to open, so a test can see "N runs are in flight" (an event, not a sleep),
inject its fault, and then let them go. ``GatedProvider`` is the real local provider (built
by ``make_provider``) with that gate in front of ``run``, and optionally one fault it injects
itself at the right moment: killing its solution zygote or its runner fork server once the
run's solution process is up (the first such run in the whole batch only).

The module registers itself with Ray's cloudpickle by value, so actors need no path to it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import ray

from deepgym_ray.sandboxes.base import CommandResult, ForwardingProvider, Sandbox

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

NAMESPACE = "deepgym_ray_faults"


@ray.remote(num_cpus=0)
class Gate:
    """Counts arrivals, holds runs until opened, and hands out one fault ticket."""

    def __init__(self) -> None:
        self.arrived = 0
        self.opened = asyncio.Event()
        self.changed = asyncio.Condition()
        self.ticket = True

    async def arrive(self) -> int:
        async with self.changed:
            self.arrived += 1
            self.changed.notify_all()
            return self.arrived

    async def wait_open(self) -> None:
        await self.opened.wait()

    async def wait_arrivals(self, count: int) -> int:
        async with self.changed:
            await self.changed.wait_for(lambda: self.arrived >= count)
            return self.arrived

    async def open(self) -> None:
        self.opened.set()

    async def take_ticket(self) -> bool:
        """True for the first caller only (the one run that suffers the injected fault)."""
        ticket, self.ticket = self.ticket, False
        return ticket


def make_gate(name: str) -> Any:
    """A gate on the driver's node (a fault that takes a worker node must not take the gate)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return Gate.options(name=name, namespace=NAMESPACE, lifetime="detached",
                        scheduling_strategy=here).remote()


class GatedProvider(ForwardingProvider):
    """The real local provider, each run held at ``gate`` first; ``fault`` is None, 'zygote'
    or 'fork_server' (killed once the run's solution is up, for one run of the batch)."""

    def __init__(self, gate: str, fault: str | None = None, tempdir: str | None = None) -> None:
        import tempfile

        from deepgym_ray.sandboxes import make_provider

        if tempdir is not None:  # this actor's process works there (the test's small disk)
            tempfile.tempdir = tempdir
        super().__init__(make_provider("local"))
        if tempdir is not None:
            from deepgym_ray.sandboxes.local.workarea import WorkRoot

            # As where the provider cannot mount its own tmpfs for the runners (not root, or
            # the mount refused): their files go on the temp directory's disk, the full one.
            self.inner._work_root = WorkRoot(mount=False)
        self.gate = ray.get_actor(gate, namespace=NAMESPACE)
        self.fault = fault

    def run(self, sandbox: Sandbox, command: Sequence[str], *, timeout: float,
            stdin: bytes | None = None, env: Mapping[str, str] | None = None) -> CommandResult:
        ray.get(self.gate.arrive.remote())
        ray.get(self.gate.wait_open.remote())
        if self.fault is not None and ray.get(self.gate.take_ticket.remote()):
            threading.Thread(target=self._inject, args=(sandbox.handle.uid,),
                             daemon=True).start()
        return self.inner.run(sandbox, command, timeout=timeout, stdin=stdin, env=env)

    def _inject(self, uid: int) -> None:
        """Kill the zygote or the fork server as soon as this run's solution process is up."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _has_process_of(uid):
            time.sleep(0.005)
        target = self.inner.zygote if self.fault == "zygote" else self.inner.fork_server
        pid = target.pid if target is not None else None
        if pid is not None:
            os.kill(pid, signal.SIGKILL)


def _has_process_of(uid: int) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    for line in f:
                        if line.startswith("Uid:"):
                            if str(uid) in line.split()[1:]:
                                return True
                            break
            except OSError:
                continue
    return False


class GatedFactory:
    """A picklable factory of GatedProvider (each actor builds its own)."""

    def __init__(self, gate: str, fault: str | None = None, tempdir: str | None = None) -> None:
        self.gate, self.fault, self.tempdir = gate, fault, tempdir

    def __call__(self) -> GatedProvider:
        return GatedProvider(self.gate, self.fault, self.tempdir)
