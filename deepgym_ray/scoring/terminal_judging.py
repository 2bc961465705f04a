"""Judging a Terminal-Bench task (Harbor's format): the answer is a shell script.

Two phases, in two containers of the task's image, neither with network:

1. **Agent.** The script runs in the task's work directory as the agent's user, within the
   task's agent time limit. From its first line the answer is in play: running out of time is
   its 0 (``solution_timeout``). The tests are not in this container, and nothing is kept of it
   but the work directory: the container is paused (nothing the script left running changes
   the directory or writes to the disk while it is copied), and the engine's archive of the
   directory is read as it streams, within the bounds of
   :class:`~deepgym_ray.scoring.workdir_archive.TreeLimits` (entries, depth, path length, header
   bytes, link bytes, file bytes; past one: the answer's 0, ``policy_sandbox_failure``, naming
   it) and the time allowed for them.
2. **Grading.** A fresh container gets the work directory in place of the image's, confined by
   :func:`~deepgym_ray.scoring.workdir_archive.confine` (links kept only where the kernel
   resolves them inside), within the time allowed for what was kept; then the tests in
   ``/tests`` and an empty ``/logs/verifier``, and runs ``bash /tests/test.sh`` as root within
   the verifier's time limit. The reward is read from ``reward.json`` (its ``reward`` key) or
   else ``reward.txt``, as Harbor's verifier does (its documentation names reward.txt first;
   its source reads reward.json first: the source is followed).

Dating (the reward contract): the answer is in play from the script's first line, so every
copy of what it left that runs out of its time is its 0. The tests have executed the agent's
work once ``bash /tests/test.sh`` has run in the grading container on the agent's work
directory (the exec came back, whatever its exit code): from then on a reward file that is
missing, unreadable, not a number or outside [0, 1] is the answer's judged 0
(``solution_error``; a program of the agent's that the tests ran, as root, could have removed
or spoiled it). Any failure before ``test.sh`` runs (the grading container, the copies, the
image without ``bash``) has no verdict.

Example:
    judge_terminal(DockerProvider(), env, "echo 42 > /app/answer.txt\\n")
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import PurePosixPath

from deepgym_ray import contract
from deepgym_ray.exceptions import SandboxError
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.repo_tasks import TerminalTask
from deepgym_ray.sandboxes.docker.task_container import (
    ArchiveTooLarge,
    TaskLimits,
    TransferTimedOut,
)
from deepgym_ray.scoring.workdir_archive import TreeLimits, TreeTooLarge, confine, read_tree

__all__ = ["judge_terminal"]

RUN_DIR = "/deepgym-run"
LOGS = "/logs/verifier"
WORK_LIMITS = TreeLimits()
REWARD_LIMIT = 1 << 20  # bytes of a reward file
SETUP_TIMEOUT = 300.0
# The grading container's work directory and /logs emptied (the work directory is replaced
# whole), and bash there to run the tests: else they could not start (no verdict).
_PREPARE = ('rm -rf -- "$1" /logs && mkdir -p -- "$1" /logs/verifier || exit 1; '
            'command -v bash >/dev/null || { echo "the image has no bash to run the tests"; '
            'exit 1; }')


def judge_terminal(provider, env: Environment, script: str, cancel=None) -> RunResult:
    """Score the shell script ``script`` against ``env``'s Terminal-Bench task (on the Docker
    provider). Raises SandboxError / VerifierError when nothing was judged."""
    task = env.terminal_task
    assert task is not None
    started = time.monotonic()
    image = provider.task_image(env)
    limits = TaskLimits(memory_mb=task.memory_mb, cpus=task.cpus, disk_mb=task.storage_mb)
    work, ended = _agent_phase(provider, image, limits, task, script, cancel)
    if ended is not None:
        result = ended
    else:
        result = _grading_phase(provider, image, limits, task, work, cancel)
    result.duration = time.monotonic() - started
    result.env_name = env.name
    return result


def _agent_phase(provider, image: str, limits: TaskLimits, task: TerminalTask,
                 script: str, cancel) -> tuple[list, RunResult | None]:
    """The entries of the work directory the script left, or the judged 0 that ended the run."""
    box = provider.start_task_container(image, limits)
    box.cancel = cancel  # a given-up run's container is killed at once
    try:
        box.put(RUN_DIR, {"solve.sh": script.encode("utf-8", "surrogateescape")}, mode=0o755,
                directory_mode=0o755)
        try:
            ran = box.exec(["bash", f"{RUN_DIR}/solve.sh"], user=task.agent_user,
                           timeout=task.agent_timeout, workdir=task.workdir)
        except TransferTimedOut as exc:
            return [], _judged(contract.POLICY_SANDBOX_FAILURE, f"the script's output: {exc}")
        if ran.timed_out:
            return [], _judged(contract.SOLUTION_TIMEOUT, f"the script ran past the agent's "
                               f"limit of {task.agent_timeout:g}s")
        if box.disk_exceeded:
            return [], _judged(contract.POLICY_SANDBOX_FAILURE, f"the script {box.overrun}")
        box.freeze()
        try:
            return _work_tree(box, task.workdir), None
        except TreeTooLarge as exc:
            return [], _judged(contract.POLICY_SANDBOX_FAILURE, f"the script left {exc} in "
                               f"{task.workdir}, past what grading copies")
        except TransferTimedOut as exc:
            return [], _judged(contract.POLICY_SANDBOX_FAILURE, f"the script's {task.workdir}:"
                               f" {exc}")
    finally:
        provider.end_task_container(box)


def _work_tree(box, workdir: str) -> list:
    """The entries of ``workdir`` in ``box`` (none when it is missing), read within
    WORK_LIMITS and the time allowed for a tree at those bounds."""
    budget = box.transfer_timeout(entries=WORK_LIMITS.entries,
                                  components=WORK_LIMITS.entries * (WORK_LIMITS.depth + 1),
                                  data_bytes=WORK_LIMITS.data_bytes)
    with box.open_archive(workdir, budget) as body:
        if body is None:
            return []
        try:
            return read_tree(io.BufferedReader(body, 1 << 18), WORK_LIMITS)
        except tarfile.TarError as exc:
            raise SandboxError(f"the engine's archive of {workdir} is unreadable: "
                               f"{exc}") from exc


def _grading_phase(provider, image: str, limits: TaskLimits, task: TerminalTask,
                   work: list, cancel) -> RunResult:
    kept = confine(work, task.workdir)
    box = provider.start_task_container(image, limits)
    box.cancel = cancel  # a given-up run's container is killed at once
    try:
        _root(box, ["sh", "-c", _PREPARE, "sh", task.workdir])
        try:
            if kept.entries:
                box.put_tar(str(PurePosixPath(task.workdir).parent), kept.data,
                            timeout=box.transfer_timeout(entries=kept.entries,
                                                         components=kept.components,
                                                         data_bytes=kept.data_bytes))
            box.put("/tests", task.tests, mode=0o755)
            ran = box.exec(["bash", "/tests/test.sh"], user="0",
                           timeout=task.verifier_timeout, workdir=task.workdir)
        except TransferTimedOut as exc:
            return _judged(contract.POLICY_SANDBOX_FAILURE, f"the script's work: {exc}")
        # The tests have executed the agent's work (see the module docstring).
        if ran.timed_out:
            return _judged(contract.SOLUTION_TIMEOUT, f"the tests ran past the verifier's "
                           f"limit of {task.verifier_timeout:g}s on the script's work")
        if box.disk_exceeded:
            return _judged(contract.POLICY_SANDBOX_FAILURE, f"the tests {box.overrun} on the "
                           "script's work")
        reward, problem = _reward(box)
    finally:
        provider.end_task_container(box)
    output = ran.stdout.decode("utf-8", "replace")[-1500:].strip()
    if problem is not None:
        return _judged(contract.SOLUTION_ERROR, f"the tests ran on the script's work and left "
                       f"no reward to use: {problem}\n{output}")
    note = (f"; dropped from the work directory: {', '.join(kept.dropped[:5])}"
            if kept.dropped else "")
    return RunResult(score=reward, passed=reward >= 1.0, exit_code=0 if reward >= 1.0 else 1,
                     details=f"reward {reward:g}{note}\n{output}")


def _reward(box) -> tuple[float, str | None]:
    """Harbor's rule: reward.json's ``reward`` when there is one, else reward.txt; and what
    is wrong with them when there is no reward to use (the score is then 0)."""
    try:
        found = box.read_file(f"{LOGS}/reward.json", REWARD_LIMIT)
        if found is not None:
            try:
                parsed = json.loads(found)
            except ValueError as exc:
                return 0.0, f"reward.json is not JSON: {exc}"
            if not isinstance(parsed, dict):
                return 0.0, "reward.json does not hold a JSON object"
            if "reward" in parsed:
                return _number(parsed["reward"], "reward.json's reward")
        found = box.read_file(f"{LOGS}/reward.txt", REWARD_LIMIT)
    except ArchiveTooLarge as exc:
        return 0.0, str(exc)
    if found is None:
        return 0.0, f"no reward file ({LOGS}/reward.json or reward.txt)"
    text = found.decode("utf-8", "replace").strip()
    try:
        return _number(float(text), "reward.txt")
    except ValueError:
        return 0.0, f"reward.txt does not hold a number: {text[:80]!r}"


def _number(value: object, where: str) -> tuple[float, str | None]:
    problem = contract.check_score(value)
    if problem is not None:
        return 0.0, f"{where}: {problem}"
    return contract.clamp_score(float(value)), None


def _root(box, argv: list[str]) -> None:
    done = box.exec(argv, user="0", timeout=SETUP_TIMEOUT)
    if done.exit_code != 0:
        raise SandboxError(f"{' '.join(argv)} failed in the grading container: "
                           f"{done.stdout[-500:].decode('utf-8', 'replace')}")


def _judged(error_type: str, details: str) -> RunResult:
    return RunResult(score=0.0, passed=False, exit_code=1, error_type=error_type,
                     details=details)
