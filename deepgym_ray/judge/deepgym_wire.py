"""The wire from a solution process to the runner: strict decoding (stdlib only).

Only plain data is rebuilt (None, bool, int, float, complex, str, bytes, list, tuple, dict, set,
frozenset). An object that stays in the solution process arrives as a handle, made by the
connection given as ``ctx`` (``deepgym_remote``); a reference names one of the call's own
argument containers; anything else unreadable becomes an :class:`OpaqueValue` that equals
nothing. Exceptions come back as builtin exceptions of the same type, as local subclasses of the
builtin base of a solution-defined class, or as :class:`SolutionError` (control flow never
crosses as itself). Arguments go the other way with :func:`encode_arg`.

Example:
    >>> decode(["l", [["i", "1"], ["s", "a"]]])
    [1, 'a']
    >>> decode(["o", "<Liar>"]) == decode(["o", "<Liar>"])
    False
"""

import builtins

__all__ = ["CONTROL_FLOW", "ArgEncoder", "OpaqueValue", "SolutionError", "builtin_exception",
           "decode", "encode_arg", "exception_from", "local_exception", "tag"]


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


def decode(tree, depth=0, ctx=None):
    """Rebuild a value the solution process sent. ``ctx`` (a connection's decoder) turns
    handles into objects (``ctx.handle``) and references into the call's own argument
    containers (``ctx.refs``); without it both are malformed."""
    if depth > 220 or not isinstance(tree, list) or not tree or not isinstance(tree[0], str):
        raise ValueError("malformed value")
    kind, rest = tree[0], tree[1:]
    if kind == "N" and not rest:
        return None
    if kind == "h" and ctx is not None:
        return ctx.handle(_checked_handle(rest))
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
    if kind == "r" and ctx is not None and type(item) is int and 0 <= item < len(ctx.refs):
        return ctx.refs[item]
    if type(item) is not list:
        raise ValueError("malformed value")
    if kind == "l":
        return [decode(v, depth + 1, ctx) for v in item]
    if kind == "t":
        return tuple(decode(v, depth + 1, ctx) for v in item)
    if kind == "S":
        return {decode(v, depth + 1, ctx) for v in item}
    if kind == "F":
        return frozenset(decode(v, depth + 1, ctx) for v in item)
    if kind == "d":
        out = {}
        for pair in item:
            if type(pair) is not list or len(pair) != 2:
                raise ValueError("malformed value")
            out[decode(pair[0], depth + 1, ctx)] = decode(pair[1], depth + 1, ctx)
        return out
    raise ValueError("malformed value")


def _checked_handle(rest):
    """``[handle, flags, type name, name, method names, exception base]``, strictly."""
    if len(rest) != 6:
        raise ValueError("malformed handle")
    hid, flags, type_name, name, methods, base = rest
    if (type(hid) is not int or hid < 0 or type(flags) is not str or not set(flags) <= set("cCib")
            or type(type_name) is not str or (name is not None and type(name) is not str)
            or type(methods) is not list or len(methods) > 300
            or any(type(m) is not str or len(m) > 200 for m in methods)
            or (base is not None and type(base) is not str)):
        raise ValueError("malformed handle")
    return hid, flags, type_name[:100], None if name is None else name[:200], methods, base


class ArgEncoder:
    """How one call's arguments are encoded: its mutable containers are listed in order (the
    solution process lists its copies in the same order, and reports changes by index), a
    container met twice is sent as a reference, and ``reference(value)`` turns a handle of this
    solution process into ``["h", handle, path]`` (anything else raises TypeError)."""

    __slots__ = ("containers", "seen", "reference")

    def __init__(self, reference):
        self.containers, self.seen, self.reference = [], {}, reference


_SIMPLE = {bool: "b", str: "s"}
_FIXED = {tuple: "t", frozenset: "F"}
_MUTABLE = {list: "l", set: "S", dict: "d"}


def encode_arg(value, depth=0, ctx=None):
    """The wire tree of a plain value sent to the solution (``ctx``: an :class:`ArgEncoder`)."""
    if depth > 200:
        raise ValueError("argument nested too deeply")
    t = type(value)
    if value is None:
        return ["N"]
    if t in _SIMPLE:
        return [_SIMPLE[t], value]
    if t is int:
        return ["i", str(value)]
    if t is float:
        return ["f", repr(value)]
    if t is complex:
        return ["c", [repr(value.real), repr(value.imag)]]
    if t is bytes or (t is bytearray and ctx is None):
        return ["y", bytes(value).hex()]
    if t in _FIXED:
        return [_FIXED[t], [encode_arg(v, depth + 1, ctx) for v in value]]
    if t in _MUTABLE or t is bytearray:
        if ctx is not None:
            index = ctx.seen.get(id(value))
            if index is not None:
                return ["r", index]
            ctx.seen[id(value)] = len(ctx.containers)
            ctx.containers.append(value)
        if t is bytearray:
            return ["Y", value.hex()]
        if t is dict:
            return ["d", [[encode_arg(k, depth + 1, ctx), encode_arg(v, depth + 1, ctx)]
                          for k, v in value.items()]]
        return [_MUTABLE[t], [encode_arg(v, depth + 1, ctx) for v in value]]
    if ctx is not None:
        return ctx.reference(value)
    raise TypeError(f"only plain data can be passed to the solution, not {t.__name__}")


# Control flow never reaches the verifier as itself: a StopIteration raised by the solution's
# function would end the verifier's own loop (``all(map(sol.f, ...))`` would pass).
CONTROL_FLOW = frozenset({"StopIteration", "StopAsyncIteration", "GeneratorExit",
                          "KeyboardInterrupt", "SystemExit"})


def builtin_exception(name):
    """The builtin exception class ``name`` when it may cross as itself, else None."""
    cls = getattr(builtins, str(name), None)
    if (isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == "builtins"
            and not issubclass(cls, (StopIteration, StopAsyncIteration))):
        return cls
    return None


MAX_EXCEPTION_CLASSES = 1000  # local stand-ins per solution process (then SolutionError)


def local_exception(cache, key, name, base_name, module):
    """A local subclass of the builtin ``base_name`` standing for the solution's exception class
    ``name`` (one per ``key`` in ``cache``), so ``except ValueError`` still catches it; None
    when the base may not cross (control flow)."""
    cls = cache.get(key)
    if cls is None:
        base = builtin_exception(base_name)
        if base is None or len(cache) >= MAX_EXCEPTION_CLASSES:
            return None
        if not (name.isidentifier() and name.isascii()):
            name = "SolutionException"
        try:
            # Also a SolutionError: ``except SolutionError`` catches the solution's own classes.
            bases = (SolutionError,) if base is Exception else (base, SolutionError)
            cls = type(name, bases, {"__module__": module})
        except TypeError:
            return None
        cache[key] = cls
    return cls


def exception_from(reply, ctx=None):
    """The exception to raise in the verifier for a failed request: a builtin exception keeps
    its type, a solution-defined one arrives as a local subclass of its builtin base, control
    flow and anything else as :class:`SolutionError`."""
    type_name = str(reply.get("type", "Exception"))[:100]
    message = str(reply.get("message", ""))
    cls = None
    if reply.get("builtin", True) is not False:
        cls = builtin_exception(type_name)
    elif ctx is not None and reply.get("cls") is not None:
        try:
            cls = decode(reply["cls"], ctx=ctx)
        except (ValueError, TypeError):
            cls = None
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            cls = None
    exc = None
    if cls is not None:
        if cls.__bases__ == (SolutionError,):  # from Exception itself: named, as it always was
            message = f"{type_name}: {message}"
        try:
            exc = cls(message)
        except Exception:
            exc = None
    if exc is not None and isinstance(exc, SolutionError):
        exc.type_name = type_name
    if exc is None:  # (the solution process's own refusals are SolutionErrors already)
        text = message if type_name == "SolutionError" else f"{type_name}: {message}"
        exc = SolutionError(text, type_name)
    exc.solution_traceback = str(reply.get("traceback", ""))
    return tag(exc, "error")
