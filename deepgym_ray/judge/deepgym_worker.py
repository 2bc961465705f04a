"""The solution process: load the untrusted solution and answer calls into it (stdlib only).

The runner starts it as ``python -I -S -c <program> <config, marshalled, in hex>``, the program
holding this file and its replies' encoder (``deepgym_reply``; see ``deepgym_proc.worker_source``),
inside whatever isolation the provider gives (bubblewrap namespaces locally). Everything here
runs next to untrusted code, so nothing it sends is trusted: the runner decodes it strictly.

Before any solution code runs it lowers its resource limits and, when started as root with a
``uid`` in its config, drops to that unprivileged user for good.

Modes (``config["mode"]``):
- ``module``: read a ``load`` message (the solution's source, or a tree of files), then
  answer requests on the module or on a handle (``call``, ``get``, ``set``, ``dir``...), one
  length-prefixed message each way: marshal from the runner, JSON back (see below). Objects
  that are not plain data stay here, named by handles; changes a call made to its list, dict,
  set or bytearray arguments are sent back with the reply.
- ``script``: exec the interpreter on ``config["script"]`` with ``config["args"]``.
- ``exec``: exec ``config["argv"]`` (an agent's action in a session, see ``deepgym_step``);
  ``python3`` as its first word stands for this interpreter.

Example (what the runner does):
    python3 -I -S -c "$(worker_source(judge_dir))" "$(marshal.dumps(config).hex())"
"""

import marshal
import os
import resource
import sys
from _operator import is_

from deepgym_reply import (
    HANDLES,
    OBJECTS,
    Ctx,
    Cyclic,
    Refused,
    builtin_base,
    contents,
    encode,
    handle_text,
    quote,
    release,
    send,
)
from deepgym_tree import import_tree

MAX_NAMES = 5000  # module names listed when it loads (the rest are looked up when asked)

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


def exec_command(config):
    """Become the command ``config`` names, confined already (``script`` and ``exec`` modes,
    see the module docstring); returns only for the ``module`` mode."""
    mode = config.get("mode")
    if mode == "script":
        os.execv(sys.executable, [sys.executable, "-I", "-S", config["script"],
                                  *config.get("args", [])])
    if mode == "exec":
        argv = [str(word) for word in config["argv"]]
        if argv[0] == "python3":
            argv[0] = sys.executable
        os.execvp(argv[0], argv)


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
    if isinstance(exc, Refused):
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
        if not reply["builtin"] and builtin_base(cls):
            reply["cls"] = handle_text(cls, Ctx())
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
        if tree[1] not in OBJECTS:
            raise TypeError("a handle the solution process no longer holds")
        return OBJECTS[tree[1]]
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


_MODULE = type(sys)
_MODULE_DICT = _MODULE.__dict__["__dict__"]  # a module's own namespace, whatever its class says


def _namespace(obj):
    """A module's public names and values, read from its own namespace: never through its
    ``__dir__``, ``__all__``, ``__getattr__`` or a ``__dict__`` its class redefines (a module
    can change its class). Names starting with ``_`` and imported modules are left out."""
    space = _MODULE_DICT.__get__(obj) if issubclass(type(obj), _MODULE) else vars(obj)
    return {k: v for k, v in list(space.items())
            if type(k) is str and k[:1] != "_" and not issubclass(type(v), _MODULE)}


_OPS = {
    "truth": bool, "len": len, "iter": iter, "contains": lambda obj, x: x in obj,
    "getitem": lambda obj, k: obj[k], "setitem": lambda obj, k, v: obj.__setitem__(k, v),
    "delitem": lambda obj, k: obj.__delitem__(k), "isinstance": lambda cls, x: isinstance(x, cls),
    "dir": lambda obj: [n for n in dir(obj) if type(n) is str],
    "vars": lambda obj: {k: v for k, v in vars(obj).items() if type(k) is str
                         and k != "__builtins__"},
    "sig": _signature, "namespace": _namespace,
}


def _answer(call):
    """Carry out one request; returns the reply."""
    release(call.get("rel") or ())
    target = OBJECTS[call.get("h", 0)]
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
    ctx = Ctx({id(c): i for i, c in enumerate(made)} if made else None)
    reply = {"ok": True}
    try:
        reply["value"] = encode(result, ctx)
        if before:
            changed = [i for i, c in enumerate(made) if _changed(c, before[i])]
            if changed:
                reply["mut"] = "[" + ",".join(
                    "[" + str(i) + "," + contents(made[i], ctx) + "]" for i in changed) + "]"
    except Cyclic:
        reply = {"ok": True, "value": '["o","<a self-referencing value>"]'}
    except BaseException:
        release([(hid, 1) for hid in ctx.exported])  # never delivered
        raise
    return reply


def _manifest(module):
    """The module's names for the verifier: [name, kind] with kind c (callable), v (a value)
    or x (an exception class, with its handle)."""
    entries, ctx = [], Ctx()
    for name, value in list(vars(module).items())[:MAX_NAMES]:
        if type(name) is not str or name == "__builtins__":
            continue
        if isinstance(value, type) and issubclass(value, BaseException) and \
                builtin_base(value):
            entries.append("[" + quote(name) + ',"x",' + handle_text(value, ctx) + "]")
        else:
            entries.append("[" + quote(name) + (',"c"]' if callable(value) else ',"v"]'))
    return "[" + ",".join(entries) + "]"


def _load(load):
    """The solution's module: one file's source run as a module, or the entry module of a
    tree of files (``deepgym_tree``)."""
    if "files" in load:
        return import_tree(load["files"], load["entry"], os.getcwd())
    module = type(sys)(load.get("module", "solution"))
    module.__file__ = load.get("filename", "solution.py")
    sys.modules[module.__name__] = module
    exec(compile(load["source"], module.__file__, "exec"), module.__dict__)
    return module


def _serve(config):
    # The protocol gets private copies of the pipes; the solution's own prints go to stderr.
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    load = _receive(proto_in)
    sys.path.insert(0, os.getcwd())
    try:
        module = _load(load)
        OBJECTS[0], HANDLES[id(module)] = module, 0
        reply = {"ok": True, "names": _manifest(module)}
        doc = module.__dict__.get("__doc__")
        if type(doc) is str:
            reply["doc"] = doc[:20000]
    except BaseException as exc:  # SystemExit at import is the solution's failure too
        reply = _error(exc)
    send(proto_out, reply)
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
            send(proto_out, reply)
        except (OSError, TypeError, ValueError) as exc:
            send(proto_out, _error(exc))


def main():
    config = marshal.loads(bytes.fromhex(sys.argv[1]))
    _confine(config)
    exec_command(config)
    _serve(config)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
