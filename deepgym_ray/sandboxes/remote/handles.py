"""What a remote provider keeps per sandbox it made (:class:`Remote`) and per run (:class:`Run`).

Example:
    run = Run(remote=remote, dir=f"{remote.home}/deepgym/{run_id}", uid=None)
    run.reusable   # True until the run fails or its cleanup is not proven
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from deepgym_ray.sandboxes.remote import privilege

__all__ = ["Remote", "Run"]


@dataclass
class Remote:
    """One sandbox this provider made; used by one run at a time."""

    sdk: Any
    key: tuple
    home: str
    root: privilege.RootAccess  # how its runs get root (its user is root, or sudo), if at all
    memory_mb: int | None = None  # the sandbox's own memory
    client_index: int | None = None  # which of the provider's SDK clients it uses, if any
    last_used: float = field(default_factory=time.monotonic)
    runs: int = 0
    judge_digest: str | None = None  # which judge files are in its judge directory
    confinement: dict | None = None  # what its first run could apply (see in_sandbox)
    ends_at: float | None = None  # (monotonic) where the provider ends it at a set time
    # files a provider sends in with its next command rather than by a call of their own
    staged: list[tuple[str, bytes]] = field(default_factory=list)

    @property
    def as_root(self) -> bool:
        return self.root.as_root

    @property
    def judge_dir(self) -> str:
        return f"{self.home}/deepgym/judge"

    @cached_property  # an SDK object's attributes can cost (Modal's go through its wrappers)
    def id(self) -> str:
        sdk = self.sdk  # E2B's, Modal's, Daytona's
        return str(getattr(sdk, "sandbox_id", None) or getattr(sdk, "object_id", None) or sdk.id)


@dataclass
class Run:
    remote: Remote
    dir: str
    uid: int | None
    files: dict[str, bytes] = field(default_factory=dict)
    reusable: bool = True  # False after a failure or an unproven cleanup: delete, not reuse
    session: bool = False  # an agent's session: its work lasts from run to run (in_sandbox)
