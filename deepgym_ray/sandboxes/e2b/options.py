"""The E2B provider's settings, the SDK (loaded on first use), and the key's check.

Example:
    >>> E2BOptions(api_key="k", lifetime=600).lifetime
    600
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import Field

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.sandboxes.e2b.calls import bounded
from deepgym_ray.sandboxes.remote.options import RemoteOptions, check_answers

__all__ = ["E2BOptions", "check_access", "load_sdk"]

_INSTALL_HINT = "pip install 'deepgym_ray[e2b]'"


class E2BOptions(RemoteOptions):
    """The provider's settings; unset connection fields come from the E2B_* variables."""

    api_key: str | None = None
    domain: str | None = None
    api_url: str | None = None
    sandbox_url: str | None = Field(default=None, description="one address for every "
                                    "sandbox's daemon (a self-hosted or test E2B)")
    template: str | None = Field(default=None, description="the sandboxes' template where "
                                 "the environment names no image (None: E2B's default)")
    lifetime: int = Field(default=900, ge=10, le=86400, description="seconds a sandbox "
                          "lives unless a run extends it: the most a crashed actor's "
                          "sandbox is paid for")

    def resolved(self) -> E2BOptions:
        env = os.environ
        return self.model_copy(update={
            "api_key": self.api_key or env.get("E2B_API_KEY") or None,
            "domain": self.domain or env.get("E2B_DOMAIN") or None,
            "api_url": self.api_url or env.get("E2B_API_URL") or None,
            "sandbox_url": self.sandbox_url or env.get("E2B_SANDBOX_URL") or None,
        })

    def connection(self) -> dict[str, Any]:
        """The SDK's connection keywords (its own retries off: a throttled create waits in
        ``sandboxes.throttle``, and every call is bounded by our own deadline)."""
        found = {"api_key": self.api_key, "domain": self.domain, "api_url": self.api_url,
                 "sandbox_url": self.sandbox_url}
        return {**{k: v for k, v in found.items() if v}, "retries": 0}


def load_sdk() -> Any:
    try:
        import e2b
    except ImportError as exc:
        raise SandboxError(f"the E2B provider needs the 'e2b' SDK ({_INSTALL_HINT}): "
                           f"{exc}") from None
    return e2b


def check_access(opts: E2BOptions) -> None:
    """Raise SandboxError with one clear line when the SDK is missing, no key is set, or the
    service refuses the key (the provider's preflight); return quietly when E2B answers."""
    sdk = load_sdk()
    if not opts.api_key:
        raise SandboxError("E2B needs an API key: set E2B_API_KEY or pass api_key")
    where = opts.api_url or opts.domain or "the default E2B API"

    def list_one() -> None:
        pages = sdk.Sandbox.list(limit=1, request_timeout=opts.call_timeout,
                                 **opts.connection())
        bounded(pages.next_items, deadline=opts.call_timeout + 5, what="list sandboxes")

    check_answers("E2B", where, "E2B_API_KEY", list_one)
