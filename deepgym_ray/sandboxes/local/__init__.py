"""The local sandbox provider: a subprocess per run on this machine, with no way out.

Each run gets its own process group and a temporary work directory; the runner (trusted: it runs
the verifier) works there, killed as a whole group at the deadline. The solution gets more: with
bubblewrap (``bwrap``) it runs in its own network, PID, IPC, UTS and mount namespaces, seeing only
the base interpreter, its standard library (no site-packages) and its own directory, with an
empty environment; when we run as root it also runs as a fresh unprivileged uid (which makes
``RLIMIT_NPROC`` bite), and its directory is a tmpfs of its own (``disk_mb``, ``max_files``:
its space and inodes, all files together, off the host's disk). Resource limits cap each
process's memory, CPU time, processes, file sizes and open files; per-run cgroups (see
``cgroups``) cap all of a run's processes together (memory, tasks), give every run the same
CPU share and count each solution process's CPU with all it started, orphans included (for
its calls' time limits). Every process of a run, the runner (the verifier's process) included,
is under a
syscall filter modelled on Docker's default profile (see ``seccomp``: no kernel keyrings,
io_uring, ptrace, BPF, perf events, module calls or new user namespaces). Where bwrap, root,
cgroups or libseccomp are missing it still runs, and says once which isolation and which
limits are missing.

Speed without less isolation: the judge runner is forked from a warm, trusted fork server
(``forkserver``; one per provider, reachable only over a private socket pair) instead of starting
an interpreter per run, falling back to exec when the server is gone. Likewise solution
processes are forked by a warm solution zygote (``zygote``), itself confined by bwrap, which
gives each its own network and IPC namespaces and drops it to the run's uid; when the zygote
is gone they start with bwrap each.

Cleanup is certain, and happens before ``run`` returns: every solution process is in the run's
freezer cgroup before any solution code runs, and no fork, ``setsid`` or PID namespace takes it
out; the provider freezes the group, kills every member, and checks the kernel's list of
members is empty (else the run raises SandboxError: no verdict on an unproven cleanup). Without
cgroups the runner proves its solution processes gone (bwrap-started: their PID namespaces'
inits have exited; zygote-started: a ``kill -1`` as the run's uid, then a search of /proc finds
none) by creating ``CLEAN_MARKER`` in the work directory; without that proof ``destroy`` kills
by uid the same way. Directories are then removed by ``removal.remove_tree``, which no tree
shape (depth, links, modes) can break.

Modules: ``provider`` (:class:`LocalProvider`), ``runbox`` (one run's directories, uid and
cgroups, and how they end), ``report`` (what isolation and limits this machine lacks, said
once), and the parts named above.

Example:
    provider = LocalProvider()
    box = provider.create(env)
    provider.put_files(box, {"a.py": b"print(1)"})
    provider.run(box, ["python3", "a.py"], timeout=5).stdout
    # b'1\\n'
"""

from deepgym_ray.sandboxes.local.provider import LocalProvider
from deepgym_ray.sandboxes.local.runbox import CLEAN_MARKER

__all__ = ["CLEAN_MARKER", "LocalProvider"]
