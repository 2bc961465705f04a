"""User-Mode Linux machines whose cgroups are v2 only, and a remote provider on them (for the
in-sandbox program's cgroup v2 path; this machine's own cgroups are v1): see ``machine``."""

from .machine import UmlMachine, missing
from .provider import UmlProvider

__all__ = ["UmlMachine", "UmlProvider", "missing"]
