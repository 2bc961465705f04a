"""``python -m deepgym_ray.cli``: the same as ``deepgym-ray``."""

from deepgym_ray.cli.main import run

run()
