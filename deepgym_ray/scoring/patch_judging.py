"""Judging a patch to a repository: apply it in a fresh container of the task's image, run the
task's hidden tests, grade their log by ``FAIL_TO_PASS`` and ``PASS_TO_PASS``.

The steps, as SWE-bench's harness takes them, with what it left open closed:

1. The answer is a unified diff. Nothing that does not parse as one runs: ``invalid_patch``.
2. ``git apply`` in the task's work tree as root (atomic: all or nothing). One that does not
   apply is the model's judged 0: ``patch_apply_failed``.
3. Git says what changed (tracked, untracked and ignored files alike, whatever the diff's
   headers claimed). A change to the task's test files, to anything that can load itself into
   the test process (``conftest.py``, ``sitecustomize.py``, ``usercustomize.py``, ``*.pth``,
   pytest's configuration files) or to CI configuration, and any symlink the patch adds, is a
   judged 0: ``test_infra_tampering``, naming the path.
4. The test files are restored to the base commit and the test patch is applied. Until here a
   failure of the machinery has no verdict; from here on ("tests started") the answer's code
   runs, and a crash or timeout is its 0.
5. The tests run as an unprivileged user, offline, with a clean environment and an isolated
   interpreter (``python3 -I``: no ``PYTHONPATH``, no user site, no current directory), and
   the log is graded with SWE-bench's own parser and rules (the ``swebench`` extra).

What is trusted: the image, the test patch, the base commit's files. What is not: everything
the answer changes; it can still change the code the tests import, which is the point, and
that code runs inside the test process (see docs/repository_tasks.md).

Example:
    judge_patch(DockerProvider(), env, diff_text)   # RunResult(score=1.0, passed=True, ...)
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from pathlib import PurePosixPath

from deepgym_ray import contract
from deepgym_ray.exceptions import SandboxError, VerifierError
from deepgym_ray.models import CaseResult, Environment, RunResult
from deepgym_ray.repo_tasks import PatchTask
from deepgym_ray.sandboxes.base import CommandResult

__all__ = ["judge_patch", "refused_path"]

RUN_DIR = "/deepgym-run"
SETUP_TIMEOUT = 300.0  # seconds for each step before the tests (git, file copies)
# Files that, wherever they are, can load code into the test process or configure it.
_LOADERS = {"conftest.py", "sitecustomize.py", "usercustomize.py", "pytest.ini", ".pytest.ini",
            "tox.ini", "setup.cfg", "pyproject.toml", "noxfile.py"}
_CI = {".github", ".gitlab-ci.yml", ".circleci", ".travis.yml", "azure-pipelines.yml",
       ".git", ".gitmodules", ".gitattributes"}
_TEST_DIRS = {"test", "tests", "testing"}
# The work tree may belong to another user of the image: git must not refuse it as root.
GIT = ["git", "-c", "safe.directory=*"]
_STATUS, _LINKS = b"\0DEEPGYM-STATUS\0", b"\0DEEPGYM-LINKS\0"
# Exit 3: git apply refused the patch (its words on stdout). Else: git status -z and the
# symlinks among the changed paths, each after its marker (NUL-framed: no path holds a NUL,
# and a status entry starts with its two status letters). Our own script, run as root before
# any of the answer's code runs: nothing of the answer's can print here.
_APPLY_AND_LIST = (
    'set -f; g="git -c safe.directory=*"; '
    f"$g apply --verbose {RUN_DIR}/answer.diff 2>&1 || exit 3; "
    "printf '\\000DEEPGYM-STATUS\\000'; "
    "$g status --porcelain=v1 -z --untracked-files=all --ignored=matching --no-renames "
    f"> {RUN_DIR}/status || exit 4; cat {RUN_DIR}/status; "
    "printf '\\000DEEPGYM-LINKS\\000'; "
    f"sed -z 's/^...//' {RUN_DIR}/status | xargs -0 -r sh -c "
    "'for p; do [ -L \"$p\" ] && printf \"%s\\000\" \"$p\"; done; true' sh")
_CORRUPT = ("corrupt patch", "no valid patches", "unrecognized input", "patch fragment without")


def refused_path(path: str, test_files: set[str]) -> str | None:
    """Why a patch may not change ``path`` (relative to the work tree), or None."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else path
    if path in test_files:
        return "it is one of the task's test files"
    if name in _LOADERS or name.endswith(".pth"):
        return f"{name} can load code into the test run or configure it"
    if parts and parts[0] in _CI:
        return "it is CI or repository configuration"
    if any(part in _TEST_DIRS for part in parts[:-1]) or (
            name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))):
        return "it is a test file"
    return None


def judge_patch(provider, env: Environment, diff: str, cancel=None) -> RunResult:
    """Score the unified diff ``diff`` against ``env``'s patch task in a fresh container of
    its image (the Docker provider). Raises SandboxError / VerifierError
    when nothing was judged, as ``judge`` does."""
    task = env.patch_task
    assert task is not None
    started = time.monotonic()
    if not _looks_like_diff(diff):
        return _judged("invalid_patch",
                       "the answer is not a unified diff (no '---'/'+++' file headers)")
    grade = _grader(task)  # before any container: a missing extra is no verdict at once
    image = provider.task_image(env)
    box = provider.start_task_container(image)
    box.cancel = cancel  # a given-up run's container is killed at once
    try:
        result = _run(box, env, task, diff, grade)
    except SandboxError as exc:
        exc.sandbox_id = exc.sandbox_id or box.name
        raise
    finally:
        provider.end_task_container(box)
    result.duration = time.monotonic() - started
    result.env_name, result.sandbox_id = env.name, box.name
    return result


def _run(box, env: Environment, task: PatchTask, diff: str,
         grade: Callable[[str], RunResult]) -> RunResult:
    box.put(RUN_DIR, {"answer.diff": _text(diff), "test.diff": _text(task.test_patch)})
    # One call: apply, then git's list of what changed, then which of those are symlinks.
    applied = _root(box, task, ["sh", "-c", _APPLY_AND_LIST])
    said = applied.stdout
    if applied.exit_code == 3:
        text = said.decode("utf-8", "replace")
        kind = ("invalid_patch" if any(w in text.lower() for w in _CORRUPT)
                else "patch_apply_failed")
        return _judged(kind, f"git apply refused the patch: {_tail(text)}")
    if applied.exit_code != 0 or _STATUS not in said or _LINKS not in said:
        raise SandboxError(f"listing the patch's changes failed (exit "
                           f"{applied.exit_code}): {_tail(said)}")
    test_files = task.test_files
    refused = _tampering(said.split(_STATUS, 1)[1], set(test_files))
    if refused:
        return _judged("test_infra_tampering", refused)
    _restore_and_apply_tests(box, task, test_files)
    # Tests started: from here on the answer's code runs.
    command = f"{task.test_command} {' '.join(shlex.quote(f) for f in _test_targets(task))}"
    outcome = box.exec(["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"
                        ":/sbin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "TMPDIR=/tmp",
                        "sh", "-c", command], user=task.test_user, timeout=env.timeout,
                       workdir=task.workdir)
    if outcome.timed_out:
        return _judged(contract.SOLUTION_TIMEOUT,
                       f"the tests ran past the task's limit of {env.timeout:g}s")
    if box.disk_exceeded:
        return _judged(contract.POLICY_SANDBOX_FAILURE, f"the tests wrote more than "
                       f"{box.limits.disk_mb} MB to the container's disk")
    if outcome.exit_code is None or box.state().get("OOMKilled"):
        return _judged(contract.POLICY_SANDBOX_FAILURE,
                       "the tests' container was killed (out of memory) while they ran")
    return grade(outcome.stdout.decode("utf-8", "replace"))


def _root(box, task: PatchTask, argv: list[str]) -> CommandResult:
    return box.exec(argv, user="0", timeout=SETUP_TIMEOUT, workdir=task.workdir)


def _tampering(listing: bytes, test_files: set[str]) -> str | None:
    """Why the applied patch is refused: a changed path (git status -z entries, then the
    symlinks among them after their marker), or None."""
    status, _, links = listing.partition(_LINKS)  # the first: no status entry is the marker
    changed = [entry[3:].decode("utf-8", "surrogateescape")
               for entry in status.split(b"\0") if len(entry) > 3]
    for path in changed:
        why = refused_path(path.rstrip("/"), test_files)
        if why:
            return f"the patch changes {path}: {why}"
    symlinks = [p for p in links.decode("utf-8", "replace").split("\0") if p]
    if symlinks:
        return f"the patch adds a symlink: {symlinks[0]}"
    return None


def _restore_and_apply_tests(box, task: PatchTask, test_files: list[str]) -> None:
    """The test files as the base commit has them, then the test patch; a failure here is
    the task's (no verdict)."""
    base = task.base_commit or "HEAD"
    script = ('set -f; base=$1; shift; g="git -c safe.directory=*"; for f; do '
              'if $g cat-file -e "$base:$f" 2>/dev/null; then $g checkout -q "$base" -- "$f"; '
              f'else rm -f -- "$f"; fi; done && $g apply --verbose {RUN_DIR}/test.diff')
    done = _root(box, task, ["sh", "-c", script, "sh", base, *test_files])
    if done.exit_code != 0:
        raise VerifierError(f"the task's test patch did not apply at {base}: "
                            f"{_tail(done.stdout)}")


def _test_targets(task: PatchTask) -> list[str]:
    """The test files to name on the command line: those of the test patch that are Python
    test modules (as SWE-bench's harness passes them)."""
    return [f for f in task.test_files if f.endswith(".py")]


def _grader(task: PatchTask) -> Callable[[str], RunResult]:
    try:
        from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS
        from swebench.harness.grading import get_eval_tests_report, get_resolution_status
        from swebench.harness.log_parsers import python as parsers
    except ImportError:
        raise VerifierError("repository tasks are graded with SWE-bench's own rules: install "
                            "the extra (pip install 'deepgym_ray[swebench]')") from None
    parse = getattr(parsers, task.log_parser, None)
    if parse is None:
        known = ", ".join(n for n in dir(parsers) if n.startswith("parse_log_"))
        raise VerifierError(f"task {task.instance_id}: swebench has no log parser "
                            f"{task.log_parser!r} (it has {known})")

    def grade(log: str) -> RunResult:
        statuses = parse(log, None)  # (the test spec: no parser of these reads it)
        report = get_eval_tests_report(statuses, {FAIL_TO_PASS: task.fail_to_pass,
                                                  PASS_TO_PASS: task.pass_to_pass})
        resolution = get_resolution_status(report)
        f2p, p2p = report[FAIL_TO_PASS], report[PASS_TO_PASS]
        passed = resolution == "RESOLVED_FULL"
        share = len(f2p["success"]) / len(task.fail_to_pass)
        score = 1.0 if passed else (share if task.partial_credit else 0.0)
        cases = [CaseResult(id=test, passed=test in group["success"],
                            score=1.0 if test in group["success"] else 0.0, group=name)
                 for name, group, tests in (("FAIL_TO_PASS", f2p, task.fail_to_pass),
                                            ("PASS_TO_PASS", p2p, task.pass_to_pass))
                 for test in tests]
        details = (f"{resolution}: FAIL_TO_PASS {len(f2p['success'])}/{len(task.fail_to_pass)}"
                   f" passed, PASS_TO_PASS {len(p2p['success'])}/{len(task.pass_to_pass)}")
        return RunResult(score=score, passed=passed, exit_code=0 if passed else 1,
                         details=details, cases=cases)

    return grade


def _judged(error_type: str, details: str) -> RunResult:
    """A judged 0 for the answer's own failure."""
    return RunResult(score=0.0, passed=False, exit_code=1, error_type=error_type,
                     details=details)


def _looks_like_diff(text: str) -> bool:
    return ("\n+++ " in f"\n{text}" and "\n--- " in f"\n{text}") or "diff --git " in text


def _text(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _tail(data: bytes | str, size: int = 1500) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text[-size:].strip()
