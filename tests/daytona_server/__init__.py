"""A local Daytona API server for tests and benches (see ``server``); faults in ``faults``.

    >>> server = DaytonaTestServer().start()      # doctest: +SKIP
    >>> os.environ["DAYTONA_API_URL"] = server.url  # doctest: +SKIP
"""

from .faults import Faults, Rule
from .limits import Limits
from .server import DaytonaTestServer

__all__ = ["DaytonaTestServer", "Faults", "Limits", "Rule"]
