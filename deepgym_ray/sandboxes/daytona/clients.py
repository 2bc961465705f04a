"""The SDK clients a Daytona provider spreads its sandboxes over, a few sandboxes per client.

Each client has its own HTTP connection pools, sized for ``sandboxes_per_client`` sandboxes
(see ``options.new_client``): a sandbox takes a place on the first client with room (counted
from the moment it is being made until it is deleted), and a new client is made when every
one is full.

Example:
    clients = SdkClients(options)
    index = clients.take()                # a place for a new sandbox
    clients.get(index).create(params)
    clients.release(index)                # once that sandbox is deleted (or not made)
"""

from __future__ import annotations

import threading
from typing import Any

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.sandboxes.daytona.calls import bounded
from deepgym_ray.sandboxes.daytona.options import DaytonaOptions, load_sdk, new_client

__all__ = ["SdkClients"]


class SdkClients:
    """A provider's SDK clients and how many sandboxes each serves; thread-safe."""

    def __init__(self, options: DaytonaOptions) -> None:
        self.options = options
        self._first: Any = None
        self._clients: list[Any] = []
        self._load: list[int] = []  # sandboxes (made or being made) per client
        self._making = threading.Lock()  # held while a client for sandboxes is made
        self._first_lock = threading.Lock()
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        return bounded(new_client, load_sdk(), self.options, deadline=self.options.call_timeout,
                       what="connect to Daytona")

    def first(self) -> Any:
        """The first SDK client, made on first use."""
        if self._first is None:
            with self._first_lock:
                if self._first is None:
                    if not self.options.api_key:
                        raise SandboxError("Daytona needs an API key: set DAYTONA_API_KEY")
                    self._first = self._connect()
        return self._first

    def take(self) -> int:
        """The index of the client a new sandbox is made with; its place is held until
        :meth:`release`."""
        with self._making:  # made here, once per few sandboxes: never seen half-made
            with self._lock:
                index = next((i for i, load in enumerate(self._load)
                              if load < self.options.sandboxes_per_client), None)
                if index is not None:
                    self._load[index] += 1
                    return index
            client = self.first() if not self._clients else self._connect()
            with self._lock:
                self._clients.append(client)
                self._load.append(1)
                return len(self._clients) - 1

    def get(self, index: int) -> Any:
        return self._clients[index]

    def release(self, index: int) -> None:
        with self._lock:
            self._load[index] -= 1
