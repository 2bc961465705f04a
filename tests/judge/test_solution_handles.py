"""Handles of the solution module, driven directly (a real solution process, no sandbox):
release of dropped handles, aliasing of arguments, a restarted process, copies."""

from __future__ import annotations

import pytest

DIRECT = '''
import sys


def live():
    """How many objects the worker holds for the verifier (the module included)."""
    return len(sys.modules["deepgym_reply"].OBJECTS)


class Box:
    def __init__(self, value=0):
        self.value = value


def make():
    return Box()


def extend_twice(first, second):
    first.append(1)
    second.append(2)
    return first


def spin():
    while True:
        pass
'''


@pytest.fixture()
def direct(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2] / "deepgym_ray/judge"))
    from deepgym_solution import load_solution

    path = tmp_path / "solution.py"
    path.write_text(DIRECT)
    solution = load_solution(str(path), timeout=1)
    yield solution
    solution.close()


def test_dropped_handles_are_released(direct):
    for _ in range(300):
        direct.make()  # each handle dropped at once
    assert direct.live() <= 2
    kept = [direct.make() for _ in range(50)]
    assert direct.live() >= 51 and len({id(box) for box in kept}) == 50


def test_an_argument_passed_twice_stays_one_object(direct):
    items: list = []
    returned = direct.extend_twice(items, items)
    assert items == [1, 2] and returned is items


def test_handles_of_a_restarted_process_are_gone(direct):
    box = direct.Box(7)
    assert box.value == 7
    with pytest.raises(TimeoutError):
        direct.spin()
    with pytest.raises(Exception, match="restarted after a timeout"):
        _ = box.value
    assert direct.Box(8).value == 8  # the module itself works on in the new process


def test_a_copied_handle_is_the_same_reference(direct):
    import copy
    import pickle

    box = direct.Box([1])
    assert copy.copy(box) is box and copy.deepcopy({"b": box})["b"] is box
    with pytest.raises(TypeError):
        pickle.dumps(box)
    del box
    assert direct.live() <= 2  # released once, not twice
