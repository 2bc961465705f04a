"""A local E2B server for tests (see ``server``): the control plane and the sandboxes' daemon.

    >>> server = E2BTestServer().start()          # doctest: +SKIP
    >>> os.environ.update(server.environ())       # doctest: +SKIP
"""

from .server import E2BTestServer

__all__ = ["E2BTestServer"]
