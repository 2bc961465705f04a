"""The solution process's replies: handles for its objects, values as JSON text (stdlib only).

Part of the solution process's program (``deepgym_worker``; ``deepgym_proc.worker_source``
puts both in it), so it runs next to untrusted code and nothing it sends is trusted: the runner
decodes it strictly (``deepgym_wire``).

Example (what the worker does with a call's result):
    ctx = Ctx()
    send(fd, {"ok": True, "value": encode(result, ctx)})
"""

import os
import sys

# --- objects that stay here: handles ---------------------------------------------------------
# A value that is not plain data never leaves this process: the verifier gets a handle (a
# number plus what kind of object it names) and sends the number back to act on the object.
# The verifier releases what it dropped, counted per export, so a handle still in flight in
# a reply is never freed early. Exception classes and the module stay pinned.

MAX_HANDLES = 100_000  # objects held for the verifier at once
MAX_REPLY = 64 << 20  # characters of one reply (the runner refuses larger frames anyway)
OBJECTS = {}  # handle -> object
HANDLES = {}  # id(object) -> handle
_EXPORTS = {}  # handle -> exports not yet released (pinned handles are absent)
_NEXT = [1]
_METHODS = {}  # class -> its instances' method names, as JSON text


class Refused(Exception):
    """A reply this process will not send (too large, too many handles)."""


class Cyclic(Exception):
    """The value refers to itself: it crosses as an opaque value."""


class _Probe:
    def method(self):
        pass


_FUNCTION, _BUILTIN = type(_Probe.method), type(len)
_NAMED = (type, _FUNCTION, _BUILTIN, type(_Probe().method), type(sys))
_DESCRIPTORS = (_FUNCTION, staticmethod, classmethod, type(str.join), _BUILTIN)


def _handle(obj, pinned=False):
    hid = HANDLES.get(id(obj))
    if hid is None:
        if len(OBJECTS) >= MAX_HANDLES:
            raise Refused(f"the verifier holds more than {MAX_HANDLES} of the solution's "
                           "objects")
        hid = _NEXT[0]
        _NEXT[0] += 1
        OBJECTS[hid], HANDLES[id(obj)] = obj, hid
        if not pinned:
            _EXPORTS[hid] = 0
    if pinned:
        _EXPORTS.pop(hid, None)
    elif hid in _EXPORTS:
        _EXPORTS[hid] += 1
    return hid


def release(pairs):
    for hid, count in pairs:
        left = _EXPORTS.get(hid)
        if left is None:
            continue
        if left > count:
            _EXPORTS[hid] = left - count
        else:
            del _EXPORTS[hid]
            del HANDLES[id(OBJECTS.pop(hid))]


def builtin_base(cls):
    """The name of the first builtin class in ``cls``'s MRO."""
    for klass in cls.__mro__:
        if klass.__module__ == "builtins":
            return klass.__name__
    return None


def _methods(cls):
    """Names of the methods an instance of ``cls`` gets from its class (JSON text), so the
    verifier can call ``obj.method(...)`` in one exchange."""
    text = _METHODS.get(cls)
    if text is None:
        names = {}
        for klass in cls.__mro__[:-1]:
            for name, value in list(vars(klass).items()):
                if (type(name) is str and not name.startswith("__")
                        and isinstance(value, _DESCRIPTORS)):
                    names.setdefault(name[:200], None)
        text = _METHODS[cls] = "[" + ",".join(quote(n) for n in list(names)[:300]) + "]"
    return text


def handle_text(obj, ctx):
    """``["h", handle, flags, type name, __name__, method names, builtin exception base]``;
    flags: c callable, C a class, i an iterator, b its truth needs asking."""
    cls, base = type(obj), None
    is_class = isinstance(obj, type)
    if is_class and issubclass(obj, BaseException):
        base = builtin_base(obj)
    hid = _handle(obj, pinned=base is not None)
    if base is None:
        ctx.exported.append(hid)
    flags = ("c" if callable(obj) else "") + ("C" if is_class else "")
    methods = "[]"
    if not is_class:
        flags += ("i" if hasattr(cls, "__next__") else "") + (
            "b" if hasattr(cls, "__bool__") or hasattr(cls, "__len__") else "")
        if not isinstance(obj, _NAMED):
            methods = _methods(cls)
    name = getattr(obj, "__name__", None) if isinstance(obj, _NAMED) else None
    name = quote(name[:200]) if type(name) is str else "null"
    return ('["h",' + str(hid) + ',"' + flags + '",' + quote(str(cls.__qualname__)[:100]) + ","
            + name + "," + methods + "," + (quote(base) if base else "null") + "]")


# --- wire encoding of values (mirrors deepgym_wire's strict decoder) -------------------------
# Replies are JSON text written by hand: importing ``json`` (and the ``re``/``enum`` it pulls
# in) would double this process's start-up cost. Requests from the trusted runner are marshal.

_MAX_DEPTH = 200
_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)}
_ESCAPES.update({34: '\\"', 92: "\\\\"})
_CONTAINERS = {list: "l", tuple: "t", set: "S", frozenset: "F", dict: "d"}


def quote(text):
    """``text`` as a JSON string literal (non-ASCII stays raw; the frame is UTF-8)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'
    return '"' + text.translate(_ESCAPES) + '"'


class Ctx:
    """One reply's encoding: the call's argument containers (sent back as references), the
    containers being encoded (a cycle is refused), characters so far, handles exported."""

    __slots__ = ("refs", "path", "size", "exported")

    def __init__(self, refs=None):
        self.refs, self.path, self.size, self.exported = refs, set(), 0, []


def encode(value, ctx, depth=0):
    """The JSON text of ``value``'s wire tree (``["i", "3"]``, ``["l", [...]]``...)."""
    if depth > _MAX_DEPTH:
        return '["o","<too deeply nested>"]'
    t = type(value)
    if value is None:
        return '["N"]'
    if t is bool:
        return '["b",true]' if value else '["b",false]'
    if t is int:
        text = '["i","' + str(value) + '"]'
    elif t is float:
        text = '["f","' + repr(value) + '"]'
    elif t is complex:
        text = '["c",["' + repr(value.real) + '","' + repr(value.imag) + '"]]'
    elif t is str:
        text = '["s",' + quote(value) + "]"
    elif t is bytes or t is bytearray:
        ref = ctx.refs and ctx.refs.get(id(value))
        text = '["r",' + str(ref) + "]" if ref is not None else '["y","' + value.hex() + '"]'
    elif t in _CONTAINERS:
        ref = ctx.refs and ctx.refs.get(id(value))
        if ref is not None:
            return '["r",' + str(ref) + "]"
        return _container(value, _CONTAINERS[t], ctx, depth)
    else:
        text = handle_text(value, ctx)
    ctx.size += len(text)
    if ctx.size > MAX_REPLY:
        raise Refused(f"the value is too large to send (over {MAX_REPLY} characters)")
    return text


def _container(value, kind, ctx, depth):
    key = id(value)
    if key in ctx.path:
        raise Cyclic
    ctx.path.add(key)
    if kind == "d":
        inner = ",".join(["[" + encode(k, ctx, depth + 1) + "," + encode(v, ctx, depth + 1)
                          + "]" for k, v in value.items()])
    else:
        inner = ",".join([encode(v, ctx, depth + 1) for v in value])
    ctx.path.discard(key)
    ctx.size += 8
    return '["' + kind + '",[' + inner + "]]"


def contents(container, ctx):
    """An argument container's new contents (nested argument containers as references)."""
    if type(container) is bytearray:
        return '["y","' + container.hex() + '"]'
    return _container(container, _CONTAINERS[type(container)], ctx, 0)


def send(fd, message):
    """Send a reply: a dict of str keys to bool, str, or (keys in _RAW) encoded JSON text."""
    parts = []
    for key, value in message.items():
        if key in _RAW:
            text = value
        elif type(value) is bool:
            text = "true" if value else "false"
        else:
            text = quote(str(value))
        parts.append(quote(key) + ":" + text)
    data = ("{" + ",".join(parts) + "}").encode("utf-8", "surrogatepass")
    frame = len(data).to_bytes(4, "big") + data
    view = memoryview(frame)
    while view:
        written = os.write(fd, view)
        view = view[written:]


_RAW = frozenset({"value", "mut", "cls", "names"})
