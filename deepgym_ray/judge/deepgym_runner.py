"""The judge runner: runs one verifier against one solution and reports one result (stdlib only).

Copied into every sandbox with the other judge files (see ``JUDGE_FILES``) and started as
``python3 -I -S deepgym_runner.py``. Its first stdin line is a JSON config holding a per-run random
``token``; the result goes to the runner's own stdout as ``<token> <json>``. Nothing else can write
there: the verifier's prints are captured in memory, file descriptor 1 points at stderr while the
verifier runs, and solution processes get their own pipes. The solution never sees the token.

The three verifier shapes, told apart by parsing:
- a module defining ``verify(solution_path, test_cases_path=None)``;
- a script printing its JSON result (run as ``__main__`` with ``argv[1:] = [solution, tests]``);
- a bare function body using ``solution_path`` / ``test_cases_path`` and ending in ``return``.

Exit codes: 0 passed, 1 failed, 2 the verifier could not judge. The rules between a verifier's
exit and its result (``deepgym_result.outcome``), the same for every shape:
- a ``SystemExit`` (``sys.exit``, ``raise SystemExit``, and ``os._exit`` or a signal ending its
  own process called in the runner's main thread, see ``deepgym_exits``) ends any shape as it
  ends a script; its status is Python's (None 0, an int itself, anything else 1; a signal's
  128 + its number);
- any status other than 0 or 1 is the verifier's own error: exit 2, no verdict, before or after
  the answer came into play, whatever it printed (its printed ``details`` are kept);
- exit 0 or 1 needs a result (what ``verify`` returned, or the last JSON line printed), else no
  verdict; the exit code then decides ``passed``: a pass needs exit 0 *and* a result that
  passed, so exit 0 with ``"passed": false`` stays failed (its score kept); exit 1 never keeps
  full marks: a score of 1 becomes 0 and ``details`` says the exit code contradicted the
  result, while a partial score below 1 is kept;
- a result that cannot be read (no number for a score, a circular reference, malformed cases or
  components) is the verifier's failure (no verdict, whenever it happened); what travels back
  is bounded (see ``deepgym_result``), the verdict never changed by it.

The solution's code never runs in this process (``deepgym_guard``): a verifier that would run
it here (``exec`` of its text, ``runpy``, a loader on its file) is stopped, and the run is the
verifier's error (no verdict), its details naming ``load_solution`` as the fix.

It runs the same whether started by exec or forked by the provider's warm fork server
(``deepgym_forkserver.py``). With ``clean_marker`` in its config it creates that file once every
solution process is known to be gone.

Example (what the host sends on stdin):
    {"token": "9f...", "verifier": "verifier.py", "solution": "solution.py", "timeout": 60,
     "wall_timeout": 180, ...}
"""

import contextlib
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
try:  # on the host (shape detection, tests)
    from deepgym_ray.judge import deepgym_guard, deepgym_taint, deepgym_workcopy
    from deepgym_ray.judge.deepgym_exits import trap_exits
    from deepgym_ray.judge.deepgym_hooks import (
        check_runtime_names,
        failed_on_work,
        install_import_guard,
        install_in_play_hook,
    )
    from deepgym_ray.judge.deepgym_result import (
        Capture,
        VerifierFailed,
        exit_status,
        normalise,
        outcome,
    )
except ImportError:  # in a sandbox, or forked by the fork server: the judge files side by side
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import deepgym_guard
    import deepgym_taint
    import deepgym_workcopy
    from deepgym_exits import trap_exits
    from deepgym_hooks import (  # noqa: I001 - the same names as above
        check_runtime_names,
        failed_on_work,
        install_import_guard,
        install_in_play_hook,
    )
    from deepgym_result import (  # noqa: I001 - the same names as above
        Capture,
        VerifierFailed,
        exit_status,
        normalise,
        outcome,
    )

__all__ = ["VerifierFailed", "detect_shape", "main", "normalise", "run_verifier"]


class _Deadline(BaseException):
    """The run's time limit; a BaseException so a verifier's ``except Exception`` cannot eat it."""


def _set_limits(limits):
    import resource

    names = {"as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE,
             "nofile": resource.RLIMIT_NOFILE, "core": resource.RLIMIT_CORE}
    for name, value in (limits or {}).items():
        if name in names and value is not None:
            try:
                resource.setrlimit(names[name], (int(value), int(value)))
            except (ValueError, OSError):
                pass


def detect_shape(source, filename="verifier.py"):
    """'module', 'script' or 'body' (raises SyntaxError, naming ``filename``, for none)."""
    import ast  # only when the host did not tell the shape: it costs a few ms to import

    tree = ast.parse(source, filename)
    if _has_top_level_return(tree.body):
        ast.parse(_as_function(source), filename)
        return "body"
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "verify":
            return "module"
    return "script"


def _has_top_level_return(nodes):
    # A ``return`` outside any def (the parser accepts it; only compiling rejects it).
    import ast

    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _as_function(source):
    body = "\n".join("    " + line for line in source.splitlines()) or "    pass"
    return "def verify(solution_path, test_cases_path=None):\n" + body + "\n"


def run_verifier(source, shape, verifier_path, solution_path, tests_path, capture, guard=None):
    """Run the verifier; returns (its result or None, its exit status, its exit message:
    None when it did not exit, else what ``SystemExit`` carried beyond a status, or "").

    A script's result is the last JSON line it printed; a module's or a body's is what
    ``verify`` returned. A ``SystemExit`` (or ``os._exit``, see ``deepgym_exits``) ends
    any shape as it ends a script: its exit status, and the last JSON line it printed.
    """
    def code(text):  # the verifier's own source: not checked by the guard, its own text
        with guard.trusted() if guard is not None else contextlib.nullcontext():
            compiled = compile(text, verifier_path, "exec")
        if guard is not None:
            guard.own_code(compiled)
        return compiled

    try:
        if shape == "script":
            sys.argv = [verifier_path, solution_path] + ([tests_path] if tests_path else [])
            namespace = {"__name__": "__main__", "__file__": verifier_path,
                         "__builtins__": __builtins__}
            exec(code(source), namespace)
            return capture.printed_result(), 0, None
        if shape == "body":
            source = _as_function(source)
        namespace = {"__name__": "verifier", "__file__": verifier_path,
                     "__builtins__": __builtins__}
        exec(code(source), namespace)
        return namespace["verify"](solution_path, tests_path), 0, None
    except SystemExit as exc:
        if getattr(exc, "_deepgym_origin", None):  # raised by the solution: its failure
            raise
        status = exit_status(exc.code)
        message = "" if exc.code is None or isinstance(exc.code, int) else str(exc.code)[:500]
        try:
            printed = capture.printed_result()
        except VerifierFailed:
            printed = None
        return printed, status, message


def _read_verifier(path):
    """The verifier's source: UTF-8, a leading byte order mark dropped."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise VerifierFailed(f"{os.path.basename(path)} is not UTF-8 text: byte "
                             f"0x{data[exc.start]:02x} at offset {exc.start}") from None


class _Channel:
    """The one way out for the result: a copy of the runner's stdout taken before anything
    else ran (not inherited by children), each line tagged with the run's token. It also
    reports the moment the solution comes into play."""

    def __init__(self, fd, token):
        self.fd, self.token = fd, token
        self.started = time.monotonic()
        self.in_play = False

    def emit(self, payload):
        try:
            text = json.dumps(payload, default=repr)
        except (ValueError, TypeError, RecursionError) as exc:  # never a lost result
            text = json.dumps({"kind": "verifier_failed", "exit_code": 2, "final": True,
                               "error_type": "verifier_error", "score": 0.0, "passed": False,
                               "in_play": self.in_play,
                               "details": f"the result cannot be encoded: {exc}"})
        view = memoryview((self.token + " " + text + "\n").encode("utf-8", "surrogatepass"))
        while view:
            view = view[os.write(self.fd, view):]

    def on_in_play(self):
        self.in_play = True
        self.emit({"event": "in_play", "t": time.monotonic() - self.started})


def _load_judge(config, channel):
    """Import the judge's modules, set up solution processes, the hooks that date the
    solution's coming into play and the guard that keeps its code out of this process; returns
    (deepgym_spawn, the guard, verifier, solution, test cases)."""
    sys.path[:0] = [HERE, os.getcwd()]
    import deepgym_proc
    import deepgym_proxy
    import deepgym_spawn

    verifier_path = os.path.abspath(config.get("verifier", "verifier.py"))
    solution_path = os.path.abspath(config.get("solution", "solution.py"))
    tests_path = config.get("test_cases")
    tests_path = os.path.abspath(tests_path) if tests_path else None
    deepgym_spawn.configure(launch=config.get("launch") or {},
                            solution_dir=config.get("solution_dir"),
                            case_timeout=float(config.get("case_timeout", 10)),
                            on_in_play=channel.on_in_play, solution_path=solution_path)
    install_in_play_hook(solution_path, deepgym_spawn)
    launch = config.get("launch") or {}
    guard = deepgym_guard.install(solution_path, config.get("solution_dir"), launch.get("uid"),
                                  verifier_path, tests_path)
    guard.produced = deepgym_taint.Produced()
    deepgym_taint.watch(guard.produced, deepgym_proxy, deepgym_proc)
    install_import_guard(solution_path, deepgym_proxy.load_solution)
    if config.get("work_copy"):  # relative paths mean the agent's files, as DeepGym's do
        deepgym_spawn.compile_worker()
        os.chdir(solution_path)
    if config.get("launch") and config.get("prewarm", True):
        try:
            with open(verifier_path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            # score_cases (deepgym_cases) calls load_solution for the verifier.
            if any(word in text for word in ("load_solution", "score_cases",
                                             "spec_from_file_location")):
                deepgym_proxy.prewarm()
        except OSError:
            pass  # reported below when the verifier is read for real
    return deepgym_spawn, guard, verifier_path, solution_path, tests_path


def _copy_agent_work(config):
    """A session's verifier reads a copy of the agent's work directory, made here before any
    verifier code runs (``deepgym_workcopy``): ``config["solution"]`` becomes the copy, which
    is also the verifier's current directory once the judge is loaded. None, or the final
    result when the copy was refused."""
    spec = config.get("work_copy")
    if not spec:
        return None
    copy, note, refused = deepgym_workcopy.take_copy(spec, os.getcwd())
    if refused is None:
        config.update(solution=copy, left_out=note)
    return refused


def _on_deadline(reason):
    raise _Deadline(reason)


def _verify(config, guard, verifier_path, solution_path, tests_path, channel):
    """Run the verifier under the run's deadline, its prints captured; the result dict (the
    verifier's error when the guard refused something, whatever the verifier did next)."""
    import deepgym_clock

    limit = float(config.get("timeout", 60))
    # Its waits for a CPU are left out of the limit, up to the host's bound on all of its time.
    timer = deepgym_clock.RunTimer(limit, float(config.get("wall_timeout") or limit), _on_deadline)
    timer.start()
    capture = Capture()
    sys.stdout = capture
    result = {}
    try:
        source = _read_verifier(verifier_path)
        shape = config.get("shape") or detect_shape(source, os.path.basename(verifier_path))
        result["shape"] = shape
        check_runtime_names(source, VerifierFailed)
        raw, status, message = run_verifier(source, shape, verifier_path, solution_path,
                                            tests_path, capture, guard)
        timer.stop()
        printed = shape == "script" or message is not None
        result.update(outcome(raw, status, message, capture, printed))
    except VerifierFailed as exc:  # the verifier's own fault, whenever it happened
        timer.stop()
        result = {"kind": "verifier_failed", "exit_code": 2, "error_type": "verifier_error",
                  "score": 0.0, "passed": False, "details": str(exc), **_shape(result)}
    except BaseException as exc:  # noqa: B036 - every failure must become a result
        timer.stop()
        if not channel.in_play and failed_on_work(exc):
            channel.on_in_play()  # it failed on the agent's work: that is in play
        result = _failure(exc, channel.in_play, result.get("shape"))
    finally:
        sys.stdout = sys.__stdout__
    refused = guard.refusal()
    if refused is not None:
        result = {"kind": "verifier_failed", "exit_code": 2, "error_type": "verifier_error",
                  "score": 0.0, "passed": False, "details": refused, **_shape(result)}
    return result


def main():
    real_out = os.dup(1)  # the only way out for the result; not inherited by children
    os.dup2(2, 1)
    config = json.loads(sys.stdin.readline())
    sys.stdin.close()
    _set_limits(config.get("limits"))
    channel = _Channel(real_out, config["token"])
    refused = _copy_agent_work(config)
    if refused is not None:  # nothing of the verifier's has run
        refused["final"] = True
        channel.emit(refused)
        os._exit(refused["exit_code"])
    spawn, guard, verifier_path, solution_path, tests_path = _load_judge(config, channel)
    timings = {"ready": time.monotonic() - channel.started, "cpu_ready": time.process_time()}
    real_exit = trap_exits()
    result = _verify(config, guard, verifier_path, solution_path, tests_path, channel)
    timings["verified"] = time.monotonic() - channel.started
    timings["cpu_verified"] = time.process_time()
    if spawn.shutdown_all() and config.get("clean_marker"):
        _mark_clean(config["clean_marker"])
    timings["shut_down"] = time.monotonic() - channel.started
    timings["cpu_shut_down"] = time.process_time()  # this process's own CPU seconds so far
    result["timings"] = timings  # where a run's time went, for diagnosis
    if result["kind"] == "verdict" and "exit_code" not in result:
        score = result.get("score")
        valid = isinstance(score, float) and math.isfinite(score) and -1e-6 <= score <= 1 + 1e-6
        result["exit_code"] = (0 if result.get("passed") else 1) if valid else 2
    result["in_play"] = channel.in_play
    if config.get("left_out"):
        result["left_out"] = config["left_out"]
    import deepgym_clock  # imported by now (the verifier ran under its timer)

    if deepgym_clock.STARVED and result["kind"] == "verdict" and not result.get("passed"):
        result["starved"] = deepgym_clock.STARVED[0]  # the host may run it again
    result["final"] = True
    channel.emit(result)
    real_exit(int(result["exit_code"]))


def _shape(result):
    return {"shape": result["shape"]} if "shape" in result else {}


def _mark_clean(name):
    """Tell the provider (a file in the work directory, which no solution can reach) that
    every solution process is known to be gone, so it can skip its sweep by uid."""
    try:
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except OSError:
        pass


# How an exception of the judge's, uncaught by the verifier after the answer came into play,
# names the answer's failure (anything else it raised is a solution_error).
_ANSWER_FAULTS = {"timeout": "solution_timeout", "invalid_patch": "invalid_patch",
                  "patch_apply_failed": "patch_apply_failed"}


def _failure(exc, in_play, shape):
    origin = getattr(exc, "_deepgym_origin", None)
    if isinstance(exc, _Deadline):
        origin = "timeout"
        text = "the run's time limit ran out" + (f": {exc}" if str(exc) else "")
    else:
        import traceback

        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]
    base = {"shape": shape, "score": 0.0, "passed": False, "details": text}
    if in_play:
        error_type = _ANSWER_FAULTS.get(origin, "solution_error")
        return dict(base, kind="verdict", exit_code=1, error_type=error_type)
    if isinstance(exc, _Deadline):
        return dict(base, kind="timeout", exit_code=2, error_type="timeout")
    return dict(base, kind="verifier_failed", exit_code=2, error_type="verifier_error")


if __name__ == "__main__":
    main()
