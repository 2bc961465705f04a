"""The pool's runs at the node's niceness, not at the one Ray gives its workers.

Ray starts every worker process at nice 15 (its ``worker_niceness``), below its own processes.
A verifier actor's runs are the pool's whole work, and everything a run starts (the local
provider's fork server and zygote, each runner and solution process) inherits the niceness of
the thread that started it: at nice 15, on a machine where other work competes for the CPUs,
each run got half the CPU it gets on the thread backend (BENCHMARKS.md, issue 15). So an actor
takes the niceness the node was started with (its parent's: the raylet's), for every thread it
has and every one its executor starts. Lowering a niceness needs ``CAP_SYS_NICE`` (root has
it); without it the actor stays as Ray made it.

Example:
    take_node_niceness()   # in an actor: its threads now run at the raylet's niceness
"""

from __future__ import annotations

import logging
import os

__all__ = ["take_node_niceness"]

logger = logging.getLogger(__name__)


def take_node_niceness(all_threads: bool = True) -> None:
    """Lower this process's (``all_threads``) or only the calling thread's niceness to its
    parent's; a niceness already at or below it is left alone."""
    try:
        target = os.getpriority(os.PRIO_PROCESS, os.getppid())
        tids = [int(t) for t in os.listdir("/proc/self/task")] if all_threads else [0]
    except OSError as exc:
        logger.debug("cannot read the node's niceness: %s", exc)
        return
    for tid in tids:  # Linux keeps a niceness per thread; threads inherit their creator's
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) > target:
                os.setpriority(os.PRIO_PROCESS, tid, target)
        except OSError as exc:  # no CAP_SYS_NICE, or the thread is gone
            logger.debug("thread %s keeps its niceness: %s", tid, exc)
