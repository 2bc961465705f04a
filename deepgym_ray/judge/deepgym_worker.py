"""The solution process: load the untrusted solution and answer calls into it (stdlib only).

The runner starts it as ``python -I -S -c <this file's text> <config, marshalled, in hex>``,
inside whatever isolation the provider gives (bubblewrap namespaces locally). Everything here
runs next to untrusted code, so nothing it sends is trusted: the runner decodes it strictly.

Before any solution code runs it lowers its resource limits and, when started as root with a
``uid`` in its config, drops to that unprivileged user for good.

Modes (``config["mode"]``):
- ``module``: read a ``load`` message (the solution's source), then answer requests on the
  module or on a handle (``call``, ``get``, ``set``, ``next``, ``dir``, ``sig``...), one
  length-prefixed message each way: marshal from the runner, JSON back (see below). Objects
  that are not plain data stay here, named by handles; changes a call made to its list, dict,
  set or bytearray arguments are sent back with the reply.
- ``script``: exec the interpreter on ``config["script"]`` with ``config["args"]``.

Example (what the runner does):
    python3 -I -S -c "$(cat deepgym_worker.py)" "$(marshal.dumps(config).hex())"
"""

import marshal
import os
import resource
import sys
from _operator import is_

_LIMITS = {
    "as": resource.RLIMIT_AS,
    "cpu": resource.RLIMIT_CPU,
    "nproc": resource.RLIMIT_NPROC,
    "fsize": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
    "core": resource.RLIMIT_CORE,
}


def _confine(config):
    for name, value in (config.get("limits") or {}).items():
        which = _LIMITS.get(name)
        if which is None or value is None:
            continue
        _soft, hard = resource.getrlimit(which)
        value = int(value)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass  # a limit the kernel refuses stays as the provider set it
    uid = config.get("uid")
    if uid is not None and os.getuid() == 0:
        os.setgroups([])
        os.setgid(int(uid))
        os.setuid(int(uid))
        if os.getuid() == 0:  # never run untrusted code as root
            os._exit(121)


# --- objects that stay here: handles ---------------------------------------------------------
# A value that is not plain data never leaves this process: the verifier gets a handle (a
# number plus what kind of object it names) and sends the number back to act on the object.
# The verifier releases what it dropped, counted per export, so a handle still in flight in
# a reply is never freed early. Exception classes and the module stay pinned.

MAX_HANDLES = 100_000  # objects held for the verifier at once
MAX_REPLY = 64 << 20  # characters of one reply (the runner refuses larger frames anyway)
MAX_NAMES = 5000  # module names listed when it loads (the rest are looked up when asked)
_OBJECTS = {}  # handle -> object
_HANDLES = {}  # id(object) -> handle
_EXPORTS = {}  # handle -> exports not yet released (pinned handles are absent)
_NEXT = [1]
_METHODS = {}  # class -> its instances' method names, as JSON text


class _Refused(Exception):
    """A reply this process will not send (too large, too many handles)."""


class _Cyclic(Exception):
    """The value refers to itself: it crosses as an opaque value."""


class _Probe:
    def method(self):
        pass


_FUNCTION, _BUILTIN = type(_Probe.method), type(len)
_NAMED = (type, _FUNCTION, _BUILTIN, type(_Probe().method), type(sys))
_DESCRIPTORS = (_FUNCTION, staticmethod, classmethod, type(str.join), _BUILTIN)


def _handle(obj, pinned=False):
    hid = _HANDLES.get(id(obj))
    if hid is None:
        if len(_OBJECTS) >= MAX_HANDLES:
            raise _Refused(f"the verifier holds more than {MAX_HANDLES} of the solution's "
                           "objects")
        hid = _NEXT[0]
        _NEXT[0] += 1
        _OBJECTS[hid], _HANDLES[id(obj)] = obj, hid
        if not pinned:
            _EXPORTS[hid] = 0
    if pinned:
        _EXPORTS.pop(hid, None)
    elif hid in _EXPORTS:
        _EXPORTS[hid] += 1
    return hid


def _release(pairs):
    for hid, count in pairs:
        left = _EXPORTS.get(hid)
        if left is None:
            continue
        if left > count:
            _EXPORTS[hid] = left - count
        else:
            del _EXPORTS[hid]
            del _HANDLES[id(_OBJECTS.pop(hid))]


def _builtin_base(cls):
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
        text = _METHODS[cls] = "[" + ",".join(_q(n) for n in list(names)[:300]) + "]"
    return text


def _handle_text(obj, ctx):
    """``["h", handle, flags, type name, __name__, method names, builtin exception base]``;
    flags: c callable, C a class, i an iterator, b its truth needs asking."""
    cls, base = type(obj), None
    is_class = isinstance(obj, type)
    if is_class and issubclass(obj, BaseException):
        base = _builtin_base(obj)
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
    name = _q(name[:200]) if type(name) is str else "null"
    return ('["h",' + str(hid) + ',"' + flags + '",' + _q(str(cls.__qualname__)[:100]) + ","
            + name + "," + methods + "," + (_q(base) if base else "null") + "]")


# --- wire encoding of values (mirrors deepgym_wire's strict decoder) -------------------------
# Replies are JSON text written by hand: importing ``json`` (and the ``re``/``enum`` it pulls
# in) would double this process's start-up cost. Requests from the trusted runner are marshal.

_MAX_DEPTH = 200
_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)}
_ESCAPES.update({34: '\\"', 92: "\\\\"})
_CONTAINERS = {list: "l", tuple: "t", set: "S", frozenset: "F", dict: "d"}


def _q(text):
    """``text`` as a JSON string literal (non-ASCII stays raw; the frame is UTF-8)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'
    return '"' + text.translate(_ESCAPES) + '"'


class _Ctx:
    """One reply's encoding: the call's argument containers (sent back as references), the
    containers being encoded (a cycle is refused), characters so far, handles exported."""

    __slots__ = ("refs", "path", "size", "exported")

    def __init__(self, refs=None):
        self.refs, self.path, self.size, self.exported = refs, set(), 0, []


def _encode(value, ctx, depth=0):
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
        text = '["s",' + _q(value) + "]"
    elif t is bytes or t is bytearray:
        ref = ctx.refs and ctx.refs.get(id(value))
        text = '["r",' + str(ref) + "]" if ref is not None else '["y","' + value.hex() + '"]'
    elif t in _CONTAINERS:
        ref = ctx.refs and ctx.refs.get(id(value))
        if ref is not None:
            return '["r",' + str(ref) + "]"
        return _container(value, _CONTAINERS[t], ctx, depth)
    else:
        text = _handle_text(value, ctx)
    ctx.size += len(text)
    if ctx.size > MAX_REPLY:
        raise _Refused(f"the value is too large to send (over {MAX_REPLY} characters)")
    return text


def _container(value, kind, ctx, depth):
    key = id(value)
    if key in ctx.path:
        raise _Cyclic
    ctx.path.add(key)
    if kind == "d":
        inner = ",".join(["[" + _encode(k, ctx, depth + 1) + "," + _encode(v, ctx, depth + 1)
                          + "]" for k, v in value.items()])
    else:
        inner = ",".join([_encode(v, ctx, depth + 1) for v in value])
    ctx.path.discard(key)
    ctx.size += 8
    return '["' + kind + '",[' + inner + "]]"


def _contents(container, ctx):
    """An argument container's new contents (nested argument containers as references)."""
    if type(container) is bytearray:
        return '["y","' + container.hex() + '"]'
    return _container(container, _CONTAINERS[type(container)], ctx, 0)


def _send(fd, message):
    """Send a reply: a dict of str keys to bool, str, or (keys in _RAW) encoded JSON text."""
    parts = []
    for key, value in message.items():
        if key in _RAW:
            text = value
        elif type(value) is bool:
            text = "true" if value else "false"
        else:
            text = _q(str(value))
        parts.append(_q(key) + ":" + text)
    data = ("{" + ",".join(parts) + "}").encode("utf-8", "surrogatepass")
    frame = len(data).to_bytes(4, "big") + data
    view = memoryview(frame)
    while view:
        written = os.write(fd, view)
        view = view[written:]


_RAW = frozenset({"value", "mut", "cls", "names"})


def read_exact(fd, size, wait=None):
    """Exactly ``size`` bytes from ``fd`` (EOFError when it closes first). The runner's side of
    the pipe uses it too, with ``wait(fd)`` called before each read (it waits with a deadline)."""
    chunks = []
    while size:
        if wait is not None:
            wait(fd)
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _receive(fd):
    size = int.from_bytes(read_exact(fd, 4), "big")
    return marshal.loads(read_exact(fd, size))


def _error(exc):
    if isinstance(exc, _Refused):
        return {"ok": False, "type": "SolutionError", "message": str(exc), "builtin": False}
    import traceback

    reply = {"ok": False, "type": "Exception", "message": "<unprintable>", "traceback": ""}
    try:
        cls = type(exc)
        reply["type"] = cls.__name__
        reply["traceback"] = "".join(
            traceback.format_exception(cls, exc, exc.__traceback__))[-4000:]
        reply["message"] = str(exc)[:2000]
        reply["builtin"] = type(cls.__module__) is str and cls.__module__ == "builtins"
        if not reply["builtin"] and _builtin_base(cls):
            reply["cls"] = _handle_text(cls, _Ctx())
    except Exception:
        pass
    return reply


# --- arguments in, calls, changes to the arguments out ------------------------------------------


def _decode_args(tree, made):
    """Arguments from the trusted verifier (encoded by deepgym_wire.encode_arg). Mutable
    containers are listed in ``made`` in the order the verifier listed its own."""
    kind = tree[0]
    if kind == "N":
        return None
    if kind in ("b", "s"):
        return tree[1]
    if kind == "i":
        return int(tree[1])
    if kind == "f":
        return float(tree[1])
    if kind == "c":
        return complex(float(tree[1][0]), float(tree[1][1]))
    if kind == "y":
        return bytes.fromhex(tree[1])
    if kind == "t":
        return tuple(_decode_args(v, made) for v in tree[1])
    if kind == "F":
        return frozenset(_decode_args(v, made) for v in tree[1])
    if kind == "h":
        if tree[1] not in _OBJECTS:
            raise TypeError("a handle the solution process no longer holds")
        return _OBJECTS[tree[1]]
    if kind == "r":
        return made[tree[1]]
    if kind == "Y":
        out = bytearray.fromhex(tree[1])
        made.append(out)
        return out
    out = {"l": list, "d": dict, "S": set}[kind]()
    made.append(out)
    if kind == "l":
        out.extend([_decode_args(v, made) for v in tree[1]])
    elif kind == "d":
        for k, v in tree[1]:
            out[_decode_args(k, made)] = _decode_args(v, made)
    else:
        out.update([_decode_args(v, made) for v in tree[1]])
    return out


def _snapshot(container):
    return list(container.items()) if type(container) is dict else container.copy()


def _changed(container, before):
    t = type(container)
    if len(container) != len(before):
        return True
    if t is list:
        return not all(map(is_, container, before))
    if t is dict:
        return any(k is not k0 or v is not v0
                   for (k, v), (k0, v0) in zip(container.items(), before, strict=False))
    return container != before


def _signature(target):
    import inspect

    def text(annotation):
        if annotation is inspect.Parameter.empty:
            return None
        return annotation if type(annotation) is str else inspect.formatannotation(annotation)

    sig = inspect.signature(target)
    params = [[p.name, int(p.kind), p.default is not p.empty,
               None if p.default is p.empty else p.default, text(p.annotation)]
              for p in sig.parameters.values()]
    return [params, text(sig.return_annotation)]


_OPS = {
    "truth": bool, "len": len, "iter": iter, "contains": lambda obj, x: x in obj,
    "getitem": lambda obj, k: obj[k], "setitem": lambda obj, k, v: obj.__setitem__(k, v),
    "delitem": lambda obj, k: obj.__delitem__(k), "isinstance": lambda cls, x: isinstance(x, cls),
    "dir": lambda obj: [n for n in dir(obj) if type(n) is str],
    "vars": lambda obj: {k: v for k, v in vars(obj).items() if type(k) is str
                         and k != "__builtins__"},
    "sig": _signature,
}


def _answer(call):
    """Carry out one request; returns the reply."""
    _release(call.get("rel") or ())
    target = _OBJECTS[call.get("h", 0)]
    for part in call.get("path") or ():
        target = getattr(target, part)
    made = []
    args = _decode_args(call["args"], made) if "args" in call else ()
    kwargs = _decode_args(call["kwargs"], made) if "kwargs" in call else {}
    op, attr = call["op"], call.get("attr")
    before = [_snapshot(c) for c in made] if call.get("sync") else None
    if op == "call":
        result = target(*args, **kwargs)
    elif op == "get":
        result = getattr(target, attr)
    elif op == "set":
        result = setattr(target, attr, args[0])
    elif op == "del":
        result = delattr(target, attr)
    elif op == "next":
        try:
            result = next(target)
        except StopIteration:  # the end of the iteration, not an error
            return {"ok": True, "done": True}
    else:
        result = _OPS[op](target, *args)
    ctx = _Ctx({id(c): i for i, c in enumerate(made)} if made else None)
    reply = {"ok": True}
    try:
        reply["value"] = _encode(result, ctx)
        if before:
            changed = [i for i, c in enumerate(made) if _changed(c, before[i])]
            if changed:
                reply["mut"] = "[" + ",".join(
                    "[" + str(i) + "," + _contents(made[i], ctx) + "]" for i in changed) + "]"
    except _Cyclic:
        reply = {"ok": True, "value": '["o","<a self-referencing value>"]'}
    except BaseException:
        _release([(hid, 1) for hid in ctx.exported])  # never delivered
        raise
    return reply


def _manifest(module):
    """The module's names for the verifier: [name, kind] with kind c (callable), v (a value)
    or x (an exception class, with its handle)."""
    entries, ctx = [], _Ctx()
    for name, value in list(vars(module).items())[:MAX_NAMES]:
        if type(name) is not str or name == "__builtins__":
            continue
        if isinstance(value, type) and issubclass(value, BaseException) and \
                _builtin_base(value):
            entries.append("[" + _q(name) + ',"x",' + _handle_text(value, ctx) + "]")
        else:
            entries.append("[" + _q(name) + (',"c"]' if callable(value) else ',"v"]'))
    return "[" + ",".join(entries) + "]"


def _serve(config):
    # The protocol gets private copies of the pipes; the solution's own prints go to stderr.
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    load = _receive(proto_in)
    module = type(sys)(load.get("module", "solution"))
    module.__file__ = load.get("filename", "solution.py")
    sys.modules[module.__name__] = module
    sys.path.insert(0, os.getcwd())
    _OBJECTS[0], _HANDLES[id(module)] = module, 0
    try:
        exec(compile(load["source"], module.__file__, "exec"), module.__dict__)
        reply = {"ok": True, "names": _manifest(module)}
        doc = module.__dict__.get("__doc__")
        if type(doc) is str:
            reply["doc"] = doc[:20000]
    except BaseException as exc:  # SystemExit at import is the solution's failure too
        reply = _error(exc)
    _send(proto_out, reply)
    if not reply["ok"]:
        return
    while True:
        try:
            call = _receive(proto_in)
        except EOFError:
            return
        try:
            reply = _answer(call)
        except BaseException as exc:  # noqa: B036 - the solution's SystemExit is its failure
            reply = _error(exc)
        try:
            _send(proto_out, reply)
        except (OSError, TypeError, ValueError) as exc:
            _send(proto_out, _error(exc))


def main():
    config = marshal.loads(bytes.fromhex(sys.argv[1]))
    _confine(config)
    if config.get("mode") == "script":
        os.execv(sys.executable, [sys.executable, "-I", "-S", config["script"],
                                  *config.get("args", [])])
    _serve(config)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
