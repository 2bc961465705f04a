"""The judge: the stdlib-only files copied into every sandbox, and the host half that reads them.

In the sandbox: ``deepgym_runner.py`` (runs the verifier, reports one result over a channel the
solution cannot write to), ``deepgym_solution.py`` (what verifiers import), ``deepgym_wire.py``
(strict decoding of what the solution sends) and
``deepgym_worker.py`` (the solution process). On the host: :func:`judge` in ``host.py``.

Example:
    >>> sorted(sandbox_judge_files())
    ['deepgym_runner.py', 'deepgym_solution.py', 'deepgym_wire.py', 'deepgym_worker.py']
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

JUDGE_FILES = ("deepgym_runner.py", "deepgym_solution.py", "deepgym_wire.py", "deepgym_worker.py")
RUNNER = "deepgym_runner.py"


@lru_cache(maxsize=1)
def _read_all() -> tuple[tuple[str, bytes], ...]:
    here = Path(__file__).parent
    return tuple((name, (here / name).read_bytes()) for name in JUDGE_FILES)


def sandbox_judge_files() -> dict[str, bytes]:
    """The judge's own files, name -> content, ready for ``provider.put_files``."""
    return dict(_read_all())
