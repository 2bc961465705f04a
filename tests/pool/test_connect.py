"""Starting the embedded Ray instance (deepgym_ray.pool.connect)."""

from __future__ import annotations

import pytest

from deepgym_ray.pool import connect

# Ray's own words when its raylet did not register within its fixed 30 s (ray/_private/node.py).
GAVE_UP = Exception("The current node timed out during startup. This could happen because "
                    "some of the raylet failed to startup or the GCS has become overloaded.")


class StartingRay:
    """Stands in for the ``ray`` module's init/shutdown: ``init`` raises ``failures`` in turn
    (a raylet too slow to register cannot be made to happen on demand)."""

    def __init__(self, *failures: Exception) -> None:
        self.failures, self.calls = list(failures), []

    def init(self, **options):
        self.calls.append("init")
        if self.failures:
            raise self.failures.pop(0)

    def shutdown(self):
        self.calls.append("shutdown")


def test_a_local_start_that_ray_gave_up_on_is_tried_again_once():
    ray = StartingRay(GAVE_UP)
    connect._start_local(ray, {"address": "local"})
    assert ray.calls == ["init", "shutdown", "init"]


def test_a_second_give_up_and_any_other_error_are_raised():
    ray = StartingRay(GAVE_UP, GAVE_UP)
    with pytest.raises(Exception, match="timed out during startup"):
        connect._start_local(ray, {"address": "local"})
    assert ray.calls == ["init", "shutdown", "init"]
    other = StartingRay(ValueError("bad option"))
    with pytest.raises(ValueError, match="bad option"):
        connect._start_local(other, {"address": "local"})
    assert other.calls == ["init"]
