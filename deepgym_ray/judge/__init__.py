"""The judge: the stdlib-only files copied into every sandbox.

Why every file is named ``deepgym_*``: in a sandbox they are top-level modules in one folder,
beside the verifier, the solution and the environment's own files, importing each other by plain
name; a plain name (``runner.py``, ``solution.py``, ``proxy.py``) could collide with one of the
user's files or a stdlib module, and be shadowed by it or shadow it.

In the sandbox (``JUDGE_FILES``, all side by side, importing each other by plain name):
``deepgym_runner.py`` (runs the verifier, reports one result over a channel the solution cannot
write to), ``deepgym_hooks.py`` (the runner's hooks dating the solution's coming into play and
giving the verifier's own import of the solution file a proxy), ``deepgym_guard.py`` (keeps the
solution's code out of the runner's process, with ``deepgym_taint.py``: recognising the
solution's text and what it sent), ``deepgym_exits.py`` (the verifier's ways out of the runner's
process, made exits it reports), ``deepgym_solution.py`` (what verifiers import: the verifier
runtime, with ``deepgym_patch.py``, patches applied in memory, and ``deepgym_output.py``, the
solution's output files read safely), ``deepgym_cases.py`` (case-by-case scoring for verifiers),
``deepgym_proxy.py`` (``load_solution`` and its connection to the solution process),
``deepgym_clock.py`` (a request's and the run's limits: the solution's CPU time and wall-clock
bounds, with ``deepgym_cgroup.py``: the solution's own cgroup), ``deepgym_step.py`` (one step
of an agent's session: its command run as the agent, with the solution processes' isolation),
``deepgym_workcopy.py`` (the copy of an agent's work directory its session verifier reads),
``deepgym_remote.py`` (the solution's module and objects as the verifier sees them),
``deepgym_spawn.py`` (starting and killing solution processes, the run's settings),
``deepgym_proc.py`` (small process helpers the host uses too), ``deepgym_result.py`` (the
verifier's captured output and its result, checked and bounded), ``deepgym_wire.py`` (strict
decoding of what the solution sends), ``deepgym_worker.py`` (the solution process, with
``deepgym_reply.py``: its handles and the encoding of its replies, and ``deepgym_tree.py``: a
solution of several files imported from memory) and ``deepgym_zyproc.py`` (a solution process
forked by the provider's warm zygote, when it has one).

Everything here is stdlib-only and runs inside a sandbox; the host side of judging (the
environment and the code in, a RunResult out) is :mod:`deepgym_ray.scoring`.
``deepgym_zygote.py``, the warm solution zygote, also runs in sandboxes (inside bubblewrap for
the local provider, in the container for Docker), but is started by the provider rather than
copied with the others for every run.

Example:
    >>> sorted(sandbox_judge_files())  # doctest: +NORMALIZE_WHITESPACE
    ['deepgym_cases.py', 'deepgym_cgroup.py', 'deepgym_clock.py', 'deepgym_exits.py',
     'deepgym_guard.py', 'deepgym_hooks.py', 'deepgym_output.py', 'deepgym_patch.py',
     'deepgym_proc.py', 'deepgym_proxy.py', 'deepgym_remote.py', 'deepgym_reply.py',
     'deepgym_result.py', 'deepgym_runner.py', 'deepgym_solution.py', 'deepgym_spawn.py',
     'deepgym_step.py', 'deepgym_taint.py', 'deepgym_tree.py', 'deepgym_wire.py',
     'deepgym_workcopy.py', 'deepgym_worker.py', 'deepgym_zyproc.py']
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

JUDGE_FILES = ("deepgym_runner.py", "deepgym_solution.py", "deepgym_proxy.py", "deepgym_spawn.py",
               "deepgym_proc.py", "deepgym_wire.py", "deepgym_worker.py", "deepgym_cases.py",
               "deepgym_zyproc.py", "deepgym_remote.py", "deepgym_result.py", "deepgym_clock.py",
               "deepgym_guard.py", "deepgym_exits.py", "deepgym_taint.py", "deepgym_hooks.py",
               "deepgym_reply.py", "deepgym_tree.py", "deepgym_patch.py", "deepgym_output.py",
               "deepgym_cgroup.py", "deepgym_step.py", "deepgym_workcopy.py")
RUNNER = "deepgym_runner.py"
STEP = "deepgym_step.py"  # one step of an agent's session (deepgym_ray.sessions)


@lru_cache(maxsize=1)
def _read_all() -> tuple[tuple[str, bytes], ...]:
    here = Path(__file__).parent
    return tuple((name, (here / name).read_bytes()) for name in JUDGE_FILES)


def sandbox_judge_files() -> dict[str, bytes]:
    """The judge's own files, name -> content, ready for ``provider.put_files``."""
    return dict(_read_all())
