"""The wire from a solution process to the runner: strict decoding (stdlib only).

Only plain data is rebuilt (None, bool, int, float, complex, str, bytes, list, tuple, dict, set,
frozenset); anything else becomes an :class:`OpaqueValue` that equals nothing. Exceptions come
back as builtin exceptions of the same type, or as :class:`SolutionError`.

Example:
    >>> decode(["l", [["i", "1"], ["s", "a"]]])
    [1, 'a']
    >>> decode(["o", "<Liar>"]) == decode(["o", "<Liar>"])
    False
"""

import builtins

__all__ = ["OpaqueValue", "SolutionError", "decode", "encode_arg", "exception_from", "tag"]


class SolutionError(Exception):
    """The solution failed in a way that is not a builtin exception (or its process died)."""

    def __init__(self, message, type_name=None, traceback_text=""):
        super().__init__(message)
        self.type_name = type_name
        self.solution_traceback = traceback_text


class OpaqueValue:
    """A value the solution returned that is not plain data. It equals nothing, itself included."""

    __slots__ = ("description",)

    def __init__(self, description):
        self.description = description

    def __eq__(self, other):
        return False

    def __ne__(self, other):
        return True

    __hash__ = object.__hash__

    def __bool__(self):
        return False

    def __repr__(self):
        return f"<opaque solution value {self.description}>"


def tag(exc, origin):
    """Mark where a failure came from ('error' or 'timeout') so the runner can date it."""
    exc._deepgym_origin = origin
    return exc


def decode(tree, depth=0):
    if depth > 220 or not isinstance(tree, list) or not tree or not isinstance(tree[0], str):
        raise ValueError("malformed value")
    kind, rest = tree[0], tree[1:]
    if kind == "N" and not rest:
        return None
    if len(rest) != 1:
        raise ValueError("malformed value")
    item = rest[0]
    if kind == "b" and type(item) is bool:
        return item
    if kind == "i" and type(item) is str and len(item) < 5000:
        return int(item)
    if kind == "f" and type(item) is str:
        return float(item)
    if kind == "c" and type(item) is list and len(item) == 2:
        return complex(float(item[0]), float(item[1]))
    if kind == "s" and type(item) is str:
        return item
    if kind == "y" and type(item) is str:
        return bytes.fromhex(item)
    if kind == "o" and type(item) is str:
        return OpaqueValue(item[:200])
    if type(item) is not list:
        raise ValueError("malformed value")
    if kind == "l":
        return [decode(v, depth + 1) for v in item]
    if kind == "t":
        return tuple(decode(v, depth + 1) for v in item)
    if kind == "S":
        return {decode(v, depth + 1) for v in item}
    if kind == "F":
        return frozenset(decode(v, depth + 1) for v in item)
    if kind == "d":
        out = {}
        for pair in item:
            if type(pair) is not list or len(pair) != 2:
                raise ValueError("malformed value")
            out[decode(pair[0], depth + 1)] = decode(pair[1], depth + 1)
        return out
    raise ValueError("malformed value")


def encode_arg(value, depth=0):
    if depth > 200:
        raise ValueError("argument nested too deeply")
    t = type(value)
    if value is None:
        return ["N"]
    simple = {bool: "b", str: "s"}
    if t in simple:
        return [simple[t], value]
    if t is int:
        return ["i", str(value)]
    if t is float:
        return ["f", repr(value)]
    if t is complex:
        return ["c", [repr(value.real), repr(value.imag)]]
    if t in (bytes, bytearray):
        return ["y", bytes(value).hex()]
    containers = {list: "l", tuple: "t", set: "S", frozenset: "F"}
    if t in containers:
        return [containers[t], [encode_arg(v, depth + 1) for v in value]]
    if t is dict:
        return ["d", [[encode_arg(k, depth + 1), encode_arg(v, depth + 1)]
                      for k, v in value.items()]]
    raise TypeError(f"only plain data can be passed to the solution, not {t.__name__}")


def exception_from(reply):
    type_name = str(reply.get("type", "Exception"))[:100]
    message = str(reply.get("message", ""))
    cls = getattr(builtins, type_name, None)
    # Only ordinary builtin exceptions keep their type; SystemExit and friends never reach the
    # verifier as themselves.
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == "builtins":
        try:
            exc = cls(message)
        except Exception:
            exc = SolutionError(f"{type_name}: {message}", type_name)
    else:
        exc = SolutionError(f"{type_name}: {message}", type_name)
    exc.solution_traceback = str(reply.get("traceback", ""))
    return tag(exc, "error")
