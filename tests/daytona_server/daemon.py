"""The toolbox daemon inside a sandbox, as in Daytona's cloud.

There, each sandbox runs a daemon that serves the toolbox API on port 2280 of every interface
of the sandbox, its loopback included, with no key: the proxy in front of it checks the key,
while inside the sandbox whoever connects is served (and runs commands as the sandbox's user).
Here the same toolbox routes are served on 127.0.0.1:2280 of a contained sandbox's own network
namespace (one with ``network_block_all``), for that sandbox alone, so an answer that tries
this way out is tried against what the cloud offers it.

Example:
    daemon = InnerDaemon(handler_class, pid=box.container.pid)
    daemon.close()
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from typing import Any

TOOLBOX_PORT = 2280
CLONE_NEWNET = 0x40000000


def listen_in(pid: int, port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:``port`` in the network namespace of ``pid``."""
    made: dict[str, Any] = {}

    def inside() -> None:  # on a thread of its own: only that thread enters the namespace
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
            try:
                if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns")
            finally:
                os.close(fd)
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen(16)
            made["sock"] = sock
        except OSError as exc:
            made["error"] = exc

    thread = threading.Thread(target=inside, name="daytona-daemon-listen")
    thread.start()
    thread.join()
    if "error" in made:
        raise made["error"]
    return made["sock"]


class InnerDaemon:
    """Serves ``handler_class`` (a request handler for this sandbox's toolbox routes) on the
    sandbox's loopback; a blocked accept costs no CPU while nobody connects."""

    def __init__(self, handler_class: type, pid: int) -> None:
        self.handler_class = handler_class
        self.sock = listen_in(pid, TOOLBOX_PORT)
        threading.Thread(target=self._accept, daemon=True, name="daytona-daemon").start()

    def _accept(self) -> None:
        while True:
            try:
                conn, address = self.sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn, address), daemon=True).start()

    def _serve(self, conn: socket.socket, address: Any) -> None:
        try:
            self.handler_class(conn, address, self)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
        except OSError:
            pass
        self.sock.close()
