"""The settings every remote provider has (its own add the cloud's: keys, images, lifetimes).

Example:
    >>> RemoteOptions(disk_mb=64).disk_mb
    64
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from deepgym_ray.exceptions import ProviderHTTPError, SandboxError

__all__ = ["RemoteOptions", "check_answers"]


class RemoteOptions(BaseModel):
    """How a remote provider bounds its calls, reuses its sandboxes and bounds each run."""

    model_config = ConfigDict(extra="forbid")

    call_timeout: float = Field(default=60.0, gt=0, description="one API call's bound")
    create_timeout: float = Field(default=180.0, gt=0, description="a new sandbox's bound, "
                                  "to ready for its first run (created, probed)")
    throttle_wait: float = Field(default=180.0, ge=0, description="how long, in all, a create "
                                 "that the cloud throttles (HTTP 429, a full quota) waits and "
                                 "tries again before its run gets no verdict")
    reuse: bool = True
    state_check_after: float = Field(default=60.0, ge=0, description="a sandbox idle this "
                                     "long is checked (one API call) before it is reused: one "
                                     "stopped meanwhile is deleted, not handed a run")
    solution_memory_mb: int = Field(default=1024, ge=64, description="per solution process, "
                                    "and for all of a run's (at most the sandbox's memory "
                                    "less the judge's share)")
    max_processes: int = Field(default=64, ge=4)
    disk_mb: int = Field(default=256, ge=16, description="a run's tmpfs work area: space")
    max_files: int = Field(default=20000, ge=100, description="a run's tmpfs work area: inodes")



def check_answers(service: str, where: str, variable: str, call: Callable[[], Any]) -> None:
    """A provider's preflight: ``call()`` (one bounded API call with the key) answers, or a
    SandboxError says in one line what is wrong: the key refused (naming ``variable``),
    another HTTP status, or the service not reached at ``where``."""
    try:
        call()
    except ProviderHTTPError as exc:
        if exc.status in (401, 403):
            raise SandboxError(f"{service} refused the API key at {where} (HTTP {exc.status})"
                               f"; check {variable}") from None
        raise SandboxError(f"{service} at {where} answered HTTP {exc.status}") from None
    except SandboxError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise type(exc)(f"cannot use {service} at {where}: {first}") from None
