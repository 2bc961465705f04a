"""A local Modal server for tests (see ``server``): the control plane and the task command
router, on the gRPC servicer classes the ``modal`` wheel ships.

    >>> server = ModalTestServer().start()        # doctest: +SKIP
    >>> os.environ.update(server.environ())       # doctest: +SKIP
"""

from .server import ModalTestServer

__all__ = ["ModalTestServer"]
