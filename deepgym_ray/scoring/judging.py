"""The host half of the judge: put the files in a sandbox, run the runner, read its verdict.

Runs on the host, never in a sandbox. It trusts only the line of the runner's stdout that carries
the per-run token it sent on stdin, and dates every failure by the runner's ``in_play`` report.

Example:
    from deepgym_ray.sandboxes import make_provider
    judge(make_provider("local"), env, "def f(): return 1")
    # RunResult(score=1.0, passed=True, ...)
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from functools import lru_cache
from typing import Any

from deepgym_ray import contract
from deepgym_ray.exceptions import (
    RunCancelledError,
    SandboxDiedError,
    SandboxError,
    TimeoutError,
    VerifierError,
)
from deepgym_ray.judge import RUNNER, deepgym_runner, sandbox_judge_files
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.sandboxes.base import CancelSignal, CommandResult, Sandbox, SandboxProvider

# Time the runner gets beyond the environment's timeout to start, clean up and report.
GRACE_SECONDS = 3.0
# A run's limit leaves out the time it waited for a CPU (the machine's load, not the answer's
# doing), up to this many times the limit in wall-clock time, however starved.
RUN_WALL_FACTOR = 3.0
# A run the machine's load starved (see judge) is run again this many times at most, after
# STARVED_BACKOFF seconds, then twice that, ...
STARVED_RETRIES = 2
STARVED_BACKOFF = 1.0

logger = logging.getLogger(__name__)


@lru_cache(maxsize=256)
def verifier_shape(source: str) -> str | None:
    """The verifier's shape, worked out once here so the runner need not import ``ast``.
    None when it does not parse: the runner then reports the syntax error itself. Also None on
    CPython 3.11's ``SystemError: AST constructor recursion depth mismatch``, which ``ast``
    raises in a thread that once hit a RecursionError: the runner, a fresh process, decides."""
    try:
        return deepgym_runner.detect_shape(source)
    except (SyntaxError, ValueError, SystemError):
        return None


def _text_bytes(text: str, name: str) -> bytes:
    """An environment file as UTF-8; a string that is not text (a lone surrogate) is the
    environment's fault, named here."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} is not valid text: it holds a lone surrogate "
                         f"U+{ord(text[exc.start]):04X} at position {exc.start}") from None


def sandbox_files(env: Environment, code: str) -> dict[str, bytes]:
    """Every file one run needs: the judge, the verifier, the solution, tests, support files.

    Raises ValueError naming an environment file that cannot be written as UTF-8. The answer
    is the model's: a lone surrogate in it (possible in JSONL) is written as the bytes it
    stands for, which are not UTF-8, so the solution fails to load and is judged like any
    other answer that does not run.
    """
    files = sandbox_judge_files()
    for name, content in env.support_files.items():
        files[name] = _text_bytes(content, f"support file {name!r}")
    where = env.verifier_path or "verifier.py"
    files["verifier.py"] = _text_bytes(env.verifier_source(), f"the verifier ({where})")
    files["solution.py"] = code.encode("utf-8", "surrogatepass")
    if env.test_cases is not None:
        files["test_cases.json"] = json.dumps(env.test_cases).encode("utf-8")
    return files


def judge(provider: SandboxProvider, env: Environment, code: str,
          cancel: CancelSignal | None = None) -> RunResult:
    """Score ``code`` against ``env`` in a fresh sandbox of ``provider``.

    Returns a result (with or without a verdict, see the reward contract); raises
    SandboxError, TimeoutError or VerifierError when nothing was judged (VerifierError too
    when the environment's files cannot be read or written, naming the file). ``cancel``, set
    by another thread, stops the run (a cancellable provider kills its processes then) and
    raises RunCancelledError: whatever the run had done, it is no verdict.

    A run that failed after one of its requests ran out of wall-clock time while the machine's
    load kept the answer waiting for a CPU (the runner's ``starved`` note) is run again, in a
    fresh sandbox, up to STARVED_RETRIES times: the load may have passed, and a right answer
    must not become a 0 by it. The last judged try's verdict stands: a try that judged nothing
    (it raised, or has no verdict) ends the retries and leaves the 0, so no answer escapes it.
    """
    if env.patch_task is not None or env.terminal_task is not None:
        return _judge_repository_task(provider, env, code, cancel)
    if env.multi_turn is not None:
        raise VerifierError(f"environment {env.name!r} is multi-turn: an agent's episode is "
                            "judged through a session (DeepGym.session or run_episode), not "
                            "one answer")
    started = time.monotonic()
    try:
        files = sandbox_files(env, code)
        shape = verifier_shape(env.verifier_source())
    except ValueError as exc:
        raise VerifierError(f"environment {env.name!r}: {exc}") from None
    result, starved = _judge_once(provider, env, files, shape, cancel)
    for attempt in range(1, STARVED_RETRIES + 1):
        if starved is None:
            break
        logger.info("%s: the machine's load starved the run (%s); running it again (%d of %d)",
                    env.name, starved, attempt, STARVED_RETRIES)
        time.sleep(STARVED_BACKOFF * attempt)
        try:
            again, starved = _judge_once(provider, env, files, shape, cancel)
        except RunCancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a try that judged nothing
            logger.info("%s: the run again judged nothing (%s); its judged 0 stands",
                        env.name, exc)
            break
        if not again.has_verdict:  # a try without a verdict never takes a judged 0's place
            break
        result = again
    # The result was made just now, for this run alone: set the run's fields on it (a copy
    # costs as much as the rest of the host's bookkeeping of a fast run).
    result.duration = time.monotonic() - started
    result.env_name = env.name
    return result


def _judge_once(provider: SandboxProvider, env: Environment, files: dict[str, bytes],
                shape: str | None, cancel: CancelSignal | None) -> tuple[RunResult, str | None]:
    """One run in a fresh sandbox: its result, and the runner's note when the machine's load
    starved it (else None)."""
    _check(cancel, "before it started")
    sandbox = provider.create(env)
    try:
        provider.put_files(sandbox, files)
        token = secrets.token_hex(16)
        config: dict[str, Any] = {
            "token": token,
            "verifier": "verifier.py",
            "solution": "solution.py",
            "test_cases": "test_cases.json" if env.test_cases is not None else None,
            "timeout": env.timeout,
            "wall_timeout": RUN_WALL_FACTOR * env.timeout,
            "case_timeout": env.case_timeout,
            "shape": shape,
        }
        config.update(provider.solution_launch(sandbox))
        stdin = (json.dumps(config) + "\n").encode("utf-8")
        outcome = run_runner(provider, sandbox, env, stdin, cancel)
        result = interpret(outcome, token, sandbox_id=sandbox.id)
    finally:
        provider.destroy(sandbox)  # its cleanup is proven (or raises) as after any run
    result.sandbox_id = sandbox.id
    # The runner notes starvation only on a verdict that did not pass: a pass is not re-read.
    final = _last_final(outcome.stdout, token) if result.has_verdict and not result.passed \
        else None
    starved = final.get("starved") if final is not None else None
    return result, starved if isinstance(starved, str) else None


def _judge_repository_task(provider: SandboxProvider, env: Environment, answer: str,
                           cancel: CancelSignal | None) -> RunResult:
    """A repository task: its tests judge, in fresh containers of its image (Docker only)."""
    if not hasattr(provider, "start_task_container"):
        raise SandboxError(f"environment {env.name!r} is a repository task: it runs on the "
                           f"docker provider (mode='docker'), not on {provider.name!r}")
    if env.patch_task is not None:
        from deepgym_ray.scoring.patch_judging import judge_patch

        return judge_patch(provider, env, answer, cancel)
    from deepgym_ray.scoring.terminal_judging import judge_terminal

    return judge_terminal(provider, env, answer, cancel)


def run_runner(provider: SandboxProvider, sandbox: Sandbox, env: Environment, stdin: bytes,
                cancel: CancelSignal | None) -> CommandResult:
    """The judge runner's run in ``sandbox``; RunCancelledError once ``cancel`` is set."""
    command = [provider.python, "-I", "-S", "-B", RUNNER]
    # Only a provider that says it takes ``cancel`` gets it (one written before it existed
    # keeps working; its given-up runs go on to their end).
    extra = {"cancel": cancel} if cancel is not None and provider.cancellable else {}
    try:
        outcome = provider.run(sandbox, command,
                               timeout=RUN_WALL_FACTOR * env.timeout + GRACE_SECONDS,
                               stdin=stdin, env=env.env_vars or None, **extra)
    except Exception as exc:  # the kill may have broken the run in any way
        _check(cancel, "while it ran", sandbox.id, exc)
        raise
    _check(cancel, "while it ran", sandbox.id)
    return outcome


def _check(cancel: CancelSignal | None, when: str, sandbox_id: str | None = None,
           cause: BaseException | None = None) -> None:
    if cancel is not None and cancel.is_set():
        raise RunCancelledError(f"the run's caller gave up on it {when}; nothing was judged",
                                sandbox_id=sandbox_id) from cause


def _message(line: bytes, prefix: bytes) -> dict[str, Any] | None:
    """The JSON object a line carrying the run's token holds, else None."""
    if not line.startswith(prefix):
        return None
    try:
        value = json.loads(line[len(prefix):])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _tagged(stdout: bytes, token: str) -> list[dict[str, Any]]:
    prefix = token.encode() + b" "
    return [m for m in (_message(line, prefix) for line in stdout.splitlines()) if m is not None]


def _last_final(stdout: bytes, token: str) -> dict[str, Any] | None:
    """The runner's last final message, looked for from the end (it is the last line of a run
    that went right, so the others need not be parsed)."""
    prefix = token.encode() + b" "
    for line in reversed(stdout.splitlines()):
        message = _message(line, prefix)
        if message is not None and message.get("final"):
            return message
    return None


def _tail(data: bytes, size: int = 2000) -> str:
    return data[-size:].decode("utf-8", "replace").strip()


def interpret(outcome: CommandResult, token: str, sandbox_id: str | None = None) -> RunResult:
    """Turn what the runner did into a result, or raise when nothing was judged."""
    final = _last_final(outcome.stdout, token)
    # A final line counts only when the runner then exited with the code it announced.
    if final is not None and not outcome.timed_out and outcome.exit_code == final.get("exit_code"):
        return _from_final(final, outcome, sandbox_id)
    in_play = any(m.get("event") == "in_play" or m.get("in_play")
                  for m in _tagged(outcome.stdout, token))
    stderr = _tail(outcome.stderr)
    if outcome.timed_out:
        if in_play:
            return RunResult(score=0.0, passed=False, exit_code=1,
                             error_type=contract.SOLUTION_TIMEOUT,
                             details="the run's time limit ran out while the solution ran")
        raise TimeoutError("the run's time limit ran out before the solution was in play",
                           sandbox_id=sandbox_id)
    what = f"the judge runner exited with code {outcome.exit_code} without a result"
    if outcome.exit_code == contract.EXIT_VERIFIER_ERROR:
        # Only code in the runner's own process exits it with 2 (a solution process cannot
        # reach it): the verifier ended it with os._exit(2) where the runner could not catch
        # it (another thread). The verifier's exit 2 is its own error, in play or not.
        return RunResult(score=0.0, passed=False, exit_code=contract.EXIT_VERIFIER_ERROR,
                         error_type=contract.VERIFIER_ERROR,
                         details=f"the verifier exited with code 2 (the runner could not "
                                 f"report); {stderr}")
    if in_play:
        return RunResult(score=0.0, passed=False, exit_code=1,
                         error_type=contract.POLICY_SANDBOX_FAILURE,
                         details=f"{what} after the solution was in play; {stderr}")
    if outcome.exit_code is not None and outcome.exit_code < 0:
        raise SandboxDiedError(f"{what}: {stderr}", sandbox_id=sandbox_id)
    raise SandboxError(f"{what}: {stderr}", sandbox_id=sandbox_id)


def _as_text(details: Any) -> str | None:
    """Details as printable text: a lone surrogate (a solution's string the verifier quoted)
    becomes '?', so writing the result to a console or a file never fails on it."""
    if details is None:
        return None
    text = details if isinstance(details, str) else json.dumps(details, default=repr)
    return text.encode("utf-8", "replace").decode("utf-8")


def _from_final(final: dict[str, Any], outcome: CommandResult,
                sandbox_id: str | None) -> RunResult:
    kind = final.get("kind")
    details = _as_text(final.get("details"))
    left_out = final.get("left_out")  # what a session's copy of the work did not hold
    if isinstance(left_out, str):
        details = "\n".join(filter(None, (details, f"[{_as_text(left_out)}]")))
    if kind == "verifier_failed":
        raise VerifierError(f"the verifier could not judge: {details}", sandbox_id=sandbox_id,
                            in_play=bool(final.get("in_play")))
    if kind == "timeout":
        raise TimeoutError("the verifier ran out of time before the solution was in play",
                           sandbox_id=sandbox_id)
    fields: dict[str, Any] = {
        "score": final.get("score", 0.0),
        "passed": bool(final.get("passed", False)),
        "exit_code": final.get("exit_code"),
        "error_type": final.get("error_type"),
        "details": details,
    }
    if kind == "reported_error":
        fields.update(score=0.0, passed=False, error_type=contract.VERIFIER_ERROR, exit_code=2)
    if final.get("reward_components") is not None:
        fields["reward_components"] = final["reward_components"]
    if final.get("cases") is not None:
        fields["cases"] = final["cases"]
    try:
        return RunResult(**fields)
    except ValueError as exc:  # a malformed case list or component table: the verifier's fault
        raise VerifierError(f"the verifier's result is malformed: {exc}",
                            sandbox_id=sandbox_id) from None
