"""What the remote providers' tests share: an environment, a wrong answer, the provider's
options for a local test server (tests/daytona_server, tests/e2b_server).

Example:
    DaytonaProvider(**options(daytona_server, disk_mb=64))
"""

from __future__ import annotations

from deepgym_ray.suites import load_environment

ENV = load_environment("coin_change")
WRONG = "def coin_change(coins, amount):\n    raise ValueError(\"no idea\")\n"


def options(server, **extra):
    """The provider's options for ``server``, with ``extra``."""
    return {**server.provider_options(), **extra}
