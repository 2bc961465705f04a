"""A sandbox's life as the service runs it: stopped and started again, stopped when idle, deleted.

``stop`` ends every process of the sandbox and keeps its files (its init, which holds the
sandbox's disk and namespaces, stays); ``start`` brings its toolbox back (a container whose init
is gone starts afresh). Every toolbox call is activity; a sandbox with no command running and no
activity (a toolbox call in flight is
activity) for its ``auto_stop_interval`` minutes is stopped, and one stopped for its
``auto_delete_interval`` minutes is deleted (0: at once; a negative interval, or an auto-stop of
0, never). ``minute`` is how many seconds a minute of those intervals lasts here, so a test can
watch them happen; at its default (60) they are the service's.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from daytona_api_client import SandboxState

from .box import Box

if TYPE_CHECKING:
    from .server import DaytonaTestServer


def stop_box(box: Box) -> None:
    """Every process of ``box`` ended, its files kept."""
    box.kill_all(keep_files=True)
    box.state = SandboxState.STOPPED
    box.stopped_at = time.monotonic()


class Lifecycle:
    """The server's sweeper of idle and stopped sandboxes (one thread)."""

    def __init__(self, server: DaytonaTestServer, minute: float = 60.0) -> None:
        self.server = server
        self.minute = minute
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._sweep_forever, daemon=True,
                                        name="daytona-test-lifecycle")

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._closing.set()

    def start_box(self, box: Box) -> None:
        if box.container is not None and not box.container.alive():
            box.container.start()  # its init died: a fresh container, its files gone with it
        if box.state != SandboxState.STARTED:
            self.server.start_daemon(box)
        box.state = SandboxState.STARTED
        box.touch()

    def _sweep_forever(self) -> None:
        while not self._closing.wait(min(1.0, self.minute / 20)):
            self.sweep()

    def sweep(self) -> None:
        now = time.monotonic()
        with self.server.lock:
            boxes = list(self.server.boxes.values())
        for box in boxes:
            if box.state == SandboxState.STARTED and box.auto_stop and not box.procs \
                    and not box.calls_in_flight \
                    and now - box.last_active >= box.auto_stop * self.minute:
                stop_box(box)
            elif box.state == SandboxState.STOPPED and box.auto_delete is not None \
                    and box.auto_delete >= 0 \
                    and now - box.stopped_at >= box.auto_delete * self.minute:
                self.server.vanish(box.id)
