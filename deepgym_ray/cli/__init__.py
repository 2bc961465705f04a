"""``deepgym-ray``, the command line: :mod:`~deepgym_ray.cli.main` (the commands and how they
end), :mod:`~deepgym_ray.cli.options` (the options they share, and the settings, client and
environments those give), :mod:`~deepgym_ray.cli.eval_command` with
:mod:`~deepgym_ray.cli.eval_runner` (what ``eval`` does), the ``--out`` results file, the
solutions file, the summary and its metrics, and the ``pool`` and ``serve`` commands."""

from deepgym_ray.cli.main import build_parser, main, run

__all__ = ["build_parser", "main", "run"]
