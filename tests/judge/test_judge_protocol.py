"""The host's reading of the runner (token, dating) and the strict wire decoding."""

from __future__ import annotations

import json
import sys

import pytest

from deepgym_ray.exceptions import SandboxDiedError, SandboxError, VerifierError
from deepgym_ray.exceptions import TimeoutError as DGTimeoutError
from deepgym_ray.sandboxes.base import CommandResult
from deepgym_ray.scoring.judging import interpret

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "deepgym_ray/judge"))
import deepgym_wire  # noqa: E402 - the stdlib-only module lives in the judge folder

TOKEN = "t" * 32
IN_PLAY = f"{TOKEN} {json.dumps({'event': 'in_play', 't': 0.1})}\n"


def final(**fields) -> str:
    body = {"final": True, "kind": "verdict", "score": 1.0, "passed": True, "exit_code": 0}
    body.update(fields)
    return f"{TOKEN} {json.dumps(body)}\n"


def outcome(stdout: str, exit_code: int | None = 0, timed_out: bool = False) -> CommandResult:
    return CommandResult(exit_code=exit_code, stdout=stdout.encode(), stderr=b"err",
                         timed_out=timed_out)


def test_only_the_tagged_final_line_counts():
    forged = "f" * 32 + " " + json.dumps({"final": True, "score": 1.0, "exit_code": 0})
    stdout = forged + "\n" + '{"score": 1.0, "passed": true}\n' + final(score=0.25, passed=False,
                                                                        exit_code=1)
    result = interpret(outcome(stdout, exit_code=1), TOKEN)
    assert result.score == 0.25 and result.has_verdict


def test_final_line_needs_the_matching_exit_code():
    with pytest.raises(SandboxError):
        interpret(outcome(final(), exit_code=3), TOKEN)


def test_dating_of_deadlines_and_deaths():
    timed = interpret(outcome(IN_PLAY, exit_code=None, timed_out=True), TOKEN)
    assert timed.error_type == "solution_timeout" and timed.has_verdict and timed.score == 0
    with pytest.raises(DGTimeoutError):
        interpret(outcome("", exit_code=None, timed_out=True), TOKEN)
    died = interpret(outcome(IN_PLAY + final(), exit_code=-9), TOKEN)
    assert died.error_type == "policy_sandbox_failure" and died.has_verdict and died.score == 0
    with pytest.raises(SandboxDiedError):
        interpret(outcome("", exit_code=-9), TOKEN)
    with pytest.raises(SandboxError):
        interpret(outcome("", exit_code=1), TOKEN)


def test_verifier_failures_raise_and_reported_errors_return():
    with pytest.raises(VerifierError) as info:
        interpret(outcome(final(kind="verifier_failed", exit_code=2), exit_code=2), TOKEN)
    assert info.value.in_play is False
    reported = interpret(outcome(final(kind="reported_error", exit_code=2), exit_code=2), TOKEN)
    assert reported.exit_code == 2 and not reported.has_verdict


@pytest.mark.parametrize("tree", [
    ["i", 5], ["b", 1], ["s"], ["l", "x"], ["d", [["s", "a"]]], ["q", 1], "s", [],
    ["N", 1], ["i", "9" * 6000],
])
def test_wire_rejects_malformed_values(tree):
    with pytest.raises((ValueError, TypeError)):
        deepgym_wire.decode(tree)


def test_wire_rebuilds_plain_data_only():
    value = deepgym_wire.decode(["d", [[["s", "k"], ["t", [["f", "nan"], ["y", "6869"]]]]]])
    assert value["k"][1] == b"hi" and value["k"][0] != value["k"][0]
    opaque = deepgym_wire.decode(["o", "<thing>"])
    assert opaque != opaque and not (opaque == 1) and not opaque
    with pytest.raises(TypeError):
        deepgym_wire.encode_arg(object())
    exc = deepgym_wire.exception_from({"type": "SystemExit", "message": "0"})
    assert isinstance(exc, deepgym_wire.SolutionError)
    assert isinstance(deepgym_wire.exception_from({"type": "KeyError", "message": "k"}), KeyError)


@pytest.mark.parametrize("name", ["StopIteration", "StopAsyncIteration", "GeneratorExit",
                                  "KeyboardInterrupt", "SystemExit"])
def test_control_flow_never_crosses_as_itself(name):
    exc = deepgym_wire.exception_from({"type": name, "message": ""})
    assert type(exc) is deepgym_wire.SolutionError and exc.type_name == name
    assert isinstance(exc, Exception)


@pytest.mark.parametrize("tree", [
    ["h", 1, "c", "T", None, [], None],  # a handle without a connection to make it
    ["r", 0],  # a reference without the call's arguments
])
def test_handles_and_references_need_a_connection(tree):
    with pytest.raises(ValueError):
        deepgym_wire.decode(tree)


class _Conn:
    refs = ("mine",)

    def handle(self, parts):
        return ("handle", parts)


@pytest.mark.parametrize("rest", [
    [-1, "c", "T", None, [], None], [True, "c", "T", None, [], None],
    [1, "cx", "T", None, [], None], [1, "c", 5, None, [], None],
    [1, "c", "T", None, ["m" * 201], None], [1, "c", "T", None, ["m"] * 301, None],
    [1, "c", "T", None, [], 3], [1, "c", "T", None, []],
])
def test_malformed_handles_are_refused(rest):
    with pytest.raises(ValueError):
        deepgym_wire.decode(["h", *rest], ctx=_Conn())


def test_handles_and_references_with_a_connection():
    assert deepgym_wire.decode(["r", 0], ctx=_Conn()) == "mine"
    with pytest.raises(ValueError):
        deepgym_wire.decode(["r", 1], ctx=_Conn())
    kind, parts = deepgym_wire.decode(["h", 3, "ci", "gen", None, ["send"], None], ctx=_Conn())
    assert kind == "handle" and parts[0] == 3


def test_a_solution_exception_class_becomes_a_subclass_of_its_builtin_base():
    cache: dict = {}
    cls = deepgym_wire.local_exception(cache, "k", "InvalidAge", "ValueError", "solution")
    assert issubclass(cls, ValueError) and cls.__name__ == "InvalidAge"
    assert deepgym_wire.local_exception(cache, "k", "Other", "KeyError", "solution") is cls
    assert deepgym_wire.local_exception({}, "s", "MyStop", "StopIteration", "solution") is None
    odd = deepgym_wire.local_exception({}, "o", "not a name", "ValueError", "solution")
    assert odd.__name__ == "SolutionException"


def test_arguments_keep_their_aliasing():
    encoder = deepgym_wire.ArgEncoder(lambda value: ["h", 1, []])
    shared = [1]
    tree = deepgym_wire.encode_arg((shared, {"k": shared}, bytearray(b"x")), ctx=encoder)
    assert tree[1][1] == ["d", [[["s", "k"], ["r", 0]]]]
    assert tree[1][2] == ["Y", "78"] and encoder.containers[0] is shared
    assert deepgym_wire.encode_arg(object(), ctx=encoder) == ["h", 1, []]
