"""``deepgym-ray``, the command line: :mod:`~deepgym_ray.cli.main` (the commands),
:mod:`~deepgym_ray.cli.eval_runner` (what ``eval`` does), the ``--out`` results file, the
solutions file, the summary and its metrics, and the ``pool`` commands."""

from deepgym_ray.cli.main import build_parser, main, run

__all__ = ["build_parser", "main", "run"]
