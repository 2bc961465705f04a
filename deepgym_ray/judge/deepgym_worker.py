"""The solution process: load the untrusted solution and answer calls into it (stdlib only).

The runner starts it as ``python -I -S -c <this file's text> <config, marshalled, in hex>``,
inside whatever isolation the provider gives (bubblewrap namespaces locally). Everything here
runs next to untrusted code, so nothing it sends is trusted: the runner decodes it strictly.

Before any solution code runs it lowers its resource limits and, when started as root with a
``uid`` in its config, drops to that unprivileged user for good.

Modes (``config["mode"]``):
- ``module``: read a ``load`` message (the solution's source), then answer ``call`` messages,
  one length-prefixed message each way: marshal from the runner, JSON back (see below).
- ``script``: exec the interpreter on ``config["script"]`` with ``config["args"]``.

Example (what the runner does):
    python3 -I -S -c "$(cat deepgym_worker.py)" "$(marshal.dumps(config).hex())"
"""

import marshal
import os
import resource
import sys

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


# --- wire encoding of plain data (mirrors deepgym_wire's strict decoder) -------------------
# Replies are JSON text written by hand: importing ``json`` (and the ``re``/``enum`` it pulls
# in) would double this process's start-up cost. Requests from the trusted runner are marshal.

_MAX_DEPTH = 200
_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)}
_ESCAPES.update({34: '\\"', 92: "\\\\"})


def _q(text):
    """``text`` as a JSON string literal (non-ASCII stays raw; the frame is UTF-8)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'
    return '"' + text.translate(_ESCAPES) + '"'


def _encode(value, depth=0):
    """The JSON text of ``value``'s wire tree (``["i", "3"]``, ``["l", [...]]``...)."""
    if depth > _MAX_DEPTH:
        return '["o","<too deeply nested>"]'
    t = type(value)
    if value is None:
        return '["N"]'
    if t is bool:
        return '["b",true]' if value else '["b",false]'
    if t is int:
        return '["i","' + str(value) + '"]'
    if t is float:
        return '["f","' + repr(value) + '"]'
    if t is complex:
        return '["c",["' + repr(value.real) + '","' + repr(value.imag) + '"]]'
    if t is str:
        return '["s",' + _q(value) + "]"
    if t in (bytes, bytearray):
        return '["y","' + bytes(value).hex() + '"]'
    kind = _CONTAINERS.get(t)
    if kind is not None:
        return '["' + kind + '",[' + ",".join([_encode(v, depth + 1) for v in value]) + "]]"
    if t is dict:
        return '["d",[' + ",".join(["[" + _encode(k, depth + 1) + "," + _encode(v, depth + 1)
                                    + "]" for k, v in value.items()]) + "]]"
    try:
        text = object.__repr__(value)
    except Exception:
        text = "<object>"
    return '["o",' + _q(text[:200]) + "]"


_CONTAINERS = {list: "l", tuple: "t", set: "S", frozenset: "F"}


def _send(fd, message):
    """Send a reply: a dict of str keys to bool, str, or (key "value") encoded JSON text."""
    parts = []
    for key, value in message.items():
        if key == "value":
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
    import traceback

    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]
    except Exception:
        text = ""
    try:
        message = str(exc)[:2000]
    except Exception:
        message = "<unprintable>"
    return {"ok": False, "type": type(exc).__name__, "message": message, "traceback": text}


def _decode_args(tree):
    # Arguments come from the trusted verifier, encoded by deepgym_proxy (deepgym_wire).
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
    if kind == "l":
        return [_decode_args(v) for v in tree[1]]
    if kind == "t":
        return tuple(_decode_args(v) for v in tree[1])
    if kind == "S":
        return {_decode_args(v) for v in tree[1]}
    if kind == "F":
        return frozenset(_decode_args(v) for v in tree[1])
    if kind == "d":
        return {_decode_args(k): _decode_args(v) for k, v in tree[1]}
    raise ValueError("cannot send an opaque value into the solution")


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
    try:
        code = compile(load["source"], module.__file__, "exec")
        exec(code, module.__dict__)
        reply = {"ok": True}
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
            target = module
            for part in call["name"].split("."):
                target = getattr(target, part)
            args = _decode_args(call["args"])
            kwargs = _decode_args(call["kwargs"])
            result = target(*args, **kwargs) if call.get("call", True) else target
            reply = {"ok": True, "value": _encode(result)}
        except BaseException as exc:
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
