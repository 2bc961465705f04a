"""The Daytona provider's settings, the SDK and its client (loaded on first use), the key's check.

Example:
    >>> DaytonaOptions(api_key="k", disk_mb=64).disk_mb
    64
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import Field

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.sandboxes.daytona.calls import bounded
from deepgym_ray.sandboxes.remote.options import RemoteOptions, check_answers

_INSTALL_HINT = "pip install 'deepgym_ray[daytona]'"


class DaytonaOptions(RemoteOptions):
    """The provider's settings; unset connection fields come from the DAYTONA_* variables."""

    api_key: str | None = None
    api_url: str | None = None
    target: str | None = None
    snapshot: str | None = None
    image: str | None = None
    cpu: int | None = Field(default=None, ge=1)
    memory: int | None = Field(default=None, ge=1, description="GiB")
    disk: int | None = Field(default=None, ge=1, description="GiB")
    auto_stop_minutes: int = Field(default=15, ge=1)
    auto_delete_minutes: int = Field(default=30, ge=0)
    sandboxes_per_client: int = Field(default=16, ge=1, description="sandboxes sharing one "
                                      "SDK client (and its HTTP connection pools)")

    def resolved(self) -> DaytonaOptions:
        env = os.environ
        return self.model_copy(update={
            "api_key": self.api_key or env.get("DAYTONA_API_KEY") or None,
            "api_url": self.api_url or env.get("DAYTONA_API_URL") or None,
            "target": self.target or env.get("DAYTONA_TARGET") or None,
        })


def load_sdk() -> Any:
    try:
        import daytona

        # The SDK loads its client lazily (about a second, more on a busy machine): load it
        # here, outside any call's deadline.
        _ = (daytona.Daytona, daytona.DaytonaConfig, daytona.FileUpload)
    except ImportError as exc:
        raise SandboxError(f"the Daytona provider needs the 'daytona' SDK ({_INSTALL_HINT}): "
                           f"{exc}") from None
    return daytona


def new_client(sdk: Any, options: DaytonaOptions) -> Any:
    """An SDK client whose connection pools keep a connection alive for each sandbox it serves
    (``sandboxes_per_client``; a sandbox serves one run, so one call, at a time). The HTTP
    client of its uploads looks through all of its pool's connections on every request, so
    an actor's hundreds of runs in flight cost less CPU on many small clients than on one big
    one (whose default keeps 62 alive: the rest would open a new connection per call)."""
    pool = max(32, 2 * options.sandboxes_per_client)  # the SDK keeps max(20, pool // 4) alive
    config = sdk.DaytonaConfig(api_key=options.api_key, api_url=options.api_url,
                               target=options.target, connection_pool_maxsize=pool)
    return sdk.Daytona(config)


def check_access(opts: DaytonaOptions) -> None:
    """Raise SandboxError with one clear line when the SDK is missing, no key is set, or the
    server refuses the key (the provider's preflight); return quietly when Daytona answers."""
    sdk = load_sdk()
    if not opts.api_key:
        raise SandboxError("Daytona needs an API key: set DAYTONA_API_KEY or pass api_key")
    where = opts.api_url or "the default Daytona API"

    def list_one() -> None:
        client = bounded(new_client, sdk, opts, deadline=opts.call_timeout,
                         what="connect to Daytona")
        query = sdk.ListSandboxesQuery(limit=1)
        bounded(lambda: next(iter(client.list(query, request_timeout=opts.call_timeout)), None),
                deadline=opts.call_timeout, what="list sandboxes")

    check_answers("Daytona", where, "DAYTONA_API_KEY", list_one)
