"""What isolation and which per-run limits this machine lacks, said once per process.

The local provider still runs where bubblewrap, root, cgroups or libseccomp are missing; these
warnings name what is lost, so nobody mistakes a weaker sandbox for the full one.

Example:
    warn_isolation(namespaces=False, as_root=True, solution_python="/usr/bin/python3.11",
                   no_seccomp_why=None)
    # WARNING local sandbox isolation is weaker here: no bubblewrap namespaces: ...
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from deepgym_ray.sandboxes.local.cgroups import missing_guarantees
from deepgym_ray.sandboxes.local.isolation import world_reachable

__all__ = ["warn_isolation", "warn_limits", "warn_once"]

logger = logging.getLogger(__name__)

_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """Log ``message`` as a warning, the first time only (a provider per actor says it once)."""
    if message not in _WARNED:
        _WARNED.add(message)
        logger.warning(message)


def warn_isolation(*, namespaces: bool, as_root: bool, solution_python: str,
                   no_seccomp_why: str | None) -> None:
    """Say which isolation solutions lack here; ``no_seccomp_why`` is None with the filter."""
    missing = []
    if not namespaces:
        missing.append("no bubblewrap namespaces: the solution can see the host's files "
                       "(including the verifier) and reach the network")
        if as_root and not world_reachable(solution_python):
            missing.append(f"the solution's uid cannot reach {solution_python} (a "
                           "private directory on the way), so scripts and late imports fail")
    if not as_root:
        missing.append("not root: the solution runs as this user (no separate uid, no "
                       "process limit of its own)")
    if not namespaces and not as_root:
        missing.append("a background process that starts its own session can outlive "
                       "the run")
    if no_seccomp_why is not None:
        missing.append(f"no syscall filter ({no_seccomp_why}): kernel keyrings, "
                       "io_uring, ptrace and new user namespaces are open to solutions "
                       "and verifiers")
    if missing:
        warn_once("local sandbox isolation is weaker here: " + "; ".join(missing))


def warn_limits(limits: Mapping[str, bool], cgroups_missing: Mapping[str, str],
                what_holds: str) -> None:
    """Say once which of a run's aggregate limits do not hold here (``limits``: see
    ``LocalProvider.limits``; ``cgroups_missing``: controller -> why), else log ``what_holds``."""
    lost = missing_guarantees(limits)
    why = "; ".join(f"{c}: {r}" for c, r in cgroups_missing.items())
    if lost:
        warn_once("local sandbox limits are weaker here: " + "; ".join(lost)
                  + (f" ({why})" if why else ""))
    else:
        logger.info("local sandbox: %s", what_holds)
