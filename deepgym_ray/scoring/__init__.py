"""The host side of judging, in process: an environment and code in, a RunResult out.

- :mod:`~deepgym_ray.scoring.judging`: :func:`judge`, which puts the judge's files in a sandbox,
  runs the runner and reads its one trusted result;
- :mod:`~deepgym_ray.scoring.scorer`: :class:`Scorer`, the picklable thing a pool's actors hold;
- :mod:`~deepgym_ray.scoring.threads`: the thread backend (``backend="threads"``).
"""

from deepgym_ray.scoring.scorer import ProviderSpec, Scorer
from deepgym_ray.scoring.threads import map_threads

__all__ = ["ProviderSpec", "Scorer", "map_threads"]
