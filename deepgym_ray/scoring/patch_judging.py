"""Judging a patch to a repository: apply it in a fresh container of the task's image, run the
task's hidden tests, grade their log by ``FAIL_TO_PASS`` and ``PASS_TO_PASS``.

The steps, as SWE-bench's harness takes them, with what it left open closed:

1. The answer is a unified diff. Nothing that does not parse as one runs: ``invalid_patch``.
2. ``git apply`` in the task's work tree as root (atomic: all or nothing). One that does not
   apply is the model's judged 0: ``patch_apply_failed``.
3. Git says which paths the patch changes, by its own reading of the diff (``git apply
   --numstat``, forwards and reversed for both names of a rename), not ours of its headers;
   what the image left untracked or ignored in the tree (a development install's
   ``*.egg-info``, caches) and the patch does not touch is not the patch's. A change to
   the task's test files (or to where they go), to anything that can load itself into the
   test process (``conftest.py``, ``sitecustomize``, ``*.pth``, distribution metadata and
   editable-install files, byte code) or configure it (pytest's configuration files), to
   ``.gitattributes`` or CI configuration, and any symlink the patch adds, is a judged 0:
   ``test_infra_tampering``, naming the path.
4. The test files are restored to the base commit and the test patch is applied. Until here a
   failure of the machinery has no verdict; from here on ("tests started") the answer's code
   runs, and a crash or timeout is its 0.
5. The tests run as an unprivileged user, offline, with a clean environment and an isolated
   interpreter (``python3 -I``: no ``PYTHONPATH``, no user site, no current directory), with
   pytest's plugin autoloading off (only the task's ``pytest_plugins`` load, by ``-p``), and
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
from deepgym_ray.sandboxes.docker.task_container import TransferTimedOut

__all__ = ["judge_patch", "refused_path"]

RUN_DIR = "/deepgym-run"
SETUP_TIMEOUT = 300.0  # seconds for each step before the tests (git, file copies)
# The most of git's list of the paths a patch changes that is checked (bytes): a patch that
# changes more (tens of thousands of files) cannot be checked, and is refused.
MAX_LISTING = 1 << 20
# Names (of a file or of any folder above it; compared in lower case, as importlib.metadata
# compares them) that load code into the test process or configure it wherever they are:
# conftests and pytest's configuration files (pytest looks for them upwards from the tests),
# entry point lists, byte code caches, an egg's EGG-INFO.
_LOADERS = {"conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml",
            "tox.ini", "setup.cfg", "pyproject.toml", "noxfile.py", "entry_points.txt",
            "__pycache__", "egg-info"}
# Modules Python imports by name at start-up, in any form (a .py, a package, byte code, an
# extension): found first on a path a development install puts on sys.path.
_STARTUP_MODULES = {"sitecustomize", "usercustomize"}
# Distribution metadata (where importlib.metadata finds entry points such as pytest's
# ``pytest11`` plugins), what a development install leaves (``*.egg-link``, ``*.pth``,
# ``__editable__*`` finders), and byte code (a .pyc can stand in for a module's source).
_LOADER_SUFFIXES = (".egg-info", ".dist-info", ".egg", ".egg-link", ".pth", ".pyc", ".pyo")
_LOADER_PREFIXES = ("__editable__",)
_CI = {".github", ".gitlab-ci.yml", ".circleci", ".travis.yml", "azure-pipelines.yml"}
# Git's own files, at any depth: a nested .gitattributes changes how the restored test files
# check out (encoding, line ends, filters).
_GIT_FILES = {".git", ".gitmodules", ".gitattributes"}
_TEST_DIRS = {"test", "tests", "testing"}
# The work tree may belong to another user of the image: git must not refuse it as root.
GIT = ["git", "-c", "safe.directory=*"]
_PATHS, _LINKS = b"\0DEEPGYM-PATHS\0", b"\0DEEPGYM-LINKS\0"
# Exit 3: git apply refused the patch (its words on stdout); exit 5: git's list of the paths
# it changes is over $1 bytes (MAX_LISTING). Else: every path the patch
# changes, as git apply reads it (--numstat -z: "added<TAB>deleted<TAB>path" entries, one name
# each; reversed, the other name of a rename), then the symlinks among them, each list after
# its marker (NUL-framed: no path holds a NUL). Not git status: it would also list what the
# image left untracked or ignored (a development install's *.egg-info) and miss a change to
# an ignored file that was there before. Our own script, run as root before any of the
# answer's code runs: nothing of the answer's can print here.
_APPLY_AND_LIST = (
    f'set -f; g="git -c safe.directory=*"; d={RUN_DIR}/answer.diff; '
    '$g apply --verbose "$d" 2>&1 || exit 3; '
    f'{{ $g apply --numstat -z "$d" && $g apply -R --numstat -z "$d"; }} > {RUN_DIR}/paths '
    f'|| exit 4; [ "$(wc -c < {RUN_DIR}/paths)" -le "$1" ] || exit 5; '
    "printf '\\000DEEPGYM-PATHS\\000'; "
    f"cat {RUN_DIR}/paths; printf '\\000DEEPGYM-LINKS\\000'; "
    f"sed -z 's/^[^\\t]*\\t[^\\t]*\\t//' {RUN_DIR}/paths | xargs -0 -r sh -c "
    "'for p; do [ -L \"$p\" ] && printf \"%s\\000\" \"$p\"; done; true' sh")
# The tests' whole environment. Plugin autoloading off: no entry point (the image's, or one
# the answer's metadata declares) loads itself into pytest; the task names what it needs.
_TEST_ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp",
             "LANG=C.UTF-8", "TMPDIR=/tmp", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"]
_CORRUPT = ("corrupt patch", "no valid patches", "unrecognized input", "patch fragment without")


def refused_path(path: str, test_files: set[str]) -> str | None:
    """Why a patch may not change ``path`` (relative to the work tree), or None."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else path
    if path in test_files:
        return "it is one of the task's test files"
    if any(test.startswith(f"{path}/") for test in test_files):
        return "the task's test files go beneath it"
    loader = next((part for part in parts if _loads_code(part.lower())), None)
    if loader is not None:
        return f"{loader} can load code into the test run or configure it"
    if (parts and parts[0] in _CI) or any(part.lower() in _GIT_FILES for part in parts):
        return "it is CI or repository configuration"
    if any(part in _TEST_DIRS for part in parts[:-1]) or (
            name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))):
        return "it is a test file"
    return None


def _loads_code(name: str) -> bool:
    return (name in _LOADERS or name.endswith(_LOADER_SUFFIXES)
            or name.startswith(_LOADER_PREFIXES) or name.split(".")[0] in _STARTUP_MODULES)


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
    # What it costs (its time, its output) is the answer's diff's: past the bounds, its 0.
    try:
        applied = _root(box, task, ["sh", "-c", _APPLY_AND_LIST, "sh", str(MAX_LISTING)])
    except TransferTimedOut as exc:
        return _judged("patch_apply_failed", f"git apply's output could not be copied in the "
                       f"time allowed for its size: {exc}")
    said = applied.stdout
    if applied.timed_out:
        return _judged("patch_apply_failed", f"git apply ran past {SETUP_TIMEOUT:g}s")
    if box.disk_exceeded:
        return _judged(contract.POLICY_SANDBOX_FAILURE, f"applying the patch {box.overrun}")
    if applied.exit_code == 3:
        text = said.decode("utf-8", "replace")
        kind = ("invalid_patch" if any(w in text.lower() for w in _CORRUPT)
                else "patch_apply_failed")
        return _judged(kind, f"git apply refused the patch: {_tail(text)}")
    if applied.exit_code == 5:
        return _judged("invalid_patch", f"the patch changes more paths than are checked (git's "
                       f"list of them is over {MAX_LISTING >> 20} MiB)")
    if applied.exit_code != 0 or _PATHS not in said or _LINKS not in said:
        raise SandboxError(f"listing the patch's changes failed (exit "
                           f"{applied.exit_code}): {_tail(said)}")
    test_files = task.test_files
    refused = _tampering(said.split(_PATHS, 1)[1], set(test_files))
    if refused:
        return _judged("test_infra_tampering", refused)
    _restore_and_apply_tests(box, task, test_files)
    # Tests started: from here on the answer's code runs.
    try:
        outcome = box.exec(["env", "-i", *_TEST_ENV, "sh", "-c", _test_command(task)],
                           user=task.test_user, timeout=env.timeout, workdir=task.workdir)
    except TransferTimedOut as exc:  # the output the answer's code wrote, out of its time
        return _judged(contract.POLICY_SANDBOX_FAILURE, f"the tests' output could not be "
                       f"copied in the time allowed for its size: {exc}")
    if outcome.timed_out:
        return _judged(contract.SOLUTION_TIMEOUT,
                       f"the tests ran past the task's limit of {env.timeout:g}s")
    if box.disk_exceeded:
        return _judged(contract.POLICY_SANDBOX_FAILURE, f"the tests {box.overrun}")
    if outcome.exit_code is None or box.state().get("OOMKilled"):
        return _judged(contract.POLICY_SANDBOX_FAILURE,
                       "the tests' container was killed (out of memory) while they ran")
    return grade(outcome.stdout.decode("utf-8", "replace"))


def _root(box, task: PatchTask, argv: list[str]) -> CommandResult:
    return box.exec(argv, user="0", timeout=SETUP_TIMEOUT, workdir=task.workdir)


def _tampering(listing: bytes, test_files: set[str]) -> str | None:
    """Why the applied patch is refused: a changed path (git apply --numstat -z entries, then
    the symlinks among them after their marker), or None."""
    numstat, _, links = listing.partition(_LINKS)  # the first: no entry holds a NUL
    changed = [entry.split(b"\t", 2)[2].decode("utf-8", "surrogateescape")
               for entry in numstat.split(b"\0") if entry.count(b"\t") >= 2]
    for path in changed:
        why = refused_path(path, test_files)
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


def _test_command(task: PatchTask) -> str:
    """The task's test command, the plugins it names (``-p``) and the test files."""
    words = [*(f"-p {shlex.quote(name)}" for name in task.pytest_plugins),
             *(shlex.quote(path) for path in _test_targets(task))]
    return " ".join([task.test_command, *words])


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
