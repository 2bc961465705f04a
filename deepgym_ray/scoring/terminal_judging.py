"""Judging a Terminal-Bench task (Harbor's format): the answer is a shell script.

Two phases, in two containers of the task's image, neither with network:

1. **Agent.** The script runs in the task's work directory as the agent's user, within the
   task's agent time limit. From its first line the answer is in play: running out of time is
   its 0 (``solution_timeout``). The tests are not in this container, and nothing is kept of it
   but the work directory (a tar archive, confined to the directory by
   :func:`~deepgym_ray.scoring.workdir_archive.confine`, at most ``WORKDIR_LIMIT`` bytes: more
   is the answer's 0).
2. **Grading.** A fresh container gets the work directory in place of the image's, then the
   tests in ``/tests`` and an empty ``/logs/verifier``, and runs ``bash /tests/test.sh`` as
   root within the verifier's time limit. The reward is read from ``reward.json`` (its
   ``reward`` key) or else ``reward.txt``, as Harbor's verifier does (its documentation names
   reward.txt first; its source reads reward.json first: the source is followed). No reward
   file is no verdict; a reward that is not a number in [0, 1] is ``invalid_score``.

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
from deepgym_ray.exceptions import SandboxError, VerifierError
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.repo_tasks import TerminalTask
from deepgym_ray.sandboxes.docker.task_container import ArchiveTooLarge, TaskLimits
from deepgym_ray.scoring.workdir_archive import confine

__all__ = ["judge_terminal"]

RUN_DIR = "/deepgym-run"
LOGS = "/logs/verifier"
WORKDIR_LIMIT = 256 << 20
SETUP_TIMEOUT = 300.0


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
                 script: str, cancel) -> tuple[bytes, RunResult | None]:
    """The work directory the script left, or the judged 0 that ended the run."""
    box = provider.start_task_container(image, limits)
    box.cancel = cancel  # a given-up run's container is killed at once
    try:
        box.put(RUN_DIR, {"solve.sh": script.encode("utf-8", "surrogateescape")}, mode=0o755,
                directory_mode=0o755)
        ran = box.exec(["bash", f"{RUN_DIR}/solve.sh"], user=task.agent_user,
                       timeout=task.agent_timeout, workdir=task.workdir)
        if ran.timed_out:
            return b"", _judged(contract.SOLUTION_TIMEOUT, f"the script ran past the agent's "
                                f"limit of {task.agent_timeout:g}s")
        if box.disk_exceeded:
            return b"", _judged(contract.POLICY_SANDBOX_FAILURE, f"the script wrote more than "
                                f"{limits.disk_mb} MB to the container's disk")
        try:
            data = box.archive(task.workdir, WORKDIR_LIMIT)
        except ArchiveTooLarge:
            return b"", _judged(contract.POLICY_SANDBOX_FAILURE, f"the script left more than "
                                f"{WORKDIR_LIMIT >> 20} MiB in {task.workdir}")
        return data or b"", None
    finally:
        provider.end_task_container(box)


def _grading_phase(provider, image: str, limits: TaskLimits, task: TerminalTask,
                   work: bytes, cancel) -> RunResult:
    top = PurePosixPath(task.workdir)
    box = provider.start_task_container(image, limits)
    box.cancel = cancel  # a given-up run's container is killed at once
    try:
        _root(box, ["rm", "-rf", "--", task.workdir])
        if work:
            confined, dropped = confine(work, top.name)
            box.put_tar(str(top.parent), confined)
        else:
            dropped = []
            _root(box, ["mkdir", "-p", task.workdir])
        box.put("/tests", task.tests, mode=0o755)
        _root(box, ["sh", "-c", f"rm -rf /logs && mkdir -p {LOGS}"])
        ran = box.exec(["bash", "/tests/test.sh"], user="0", timeout=task.verifier_timeout,
                       workdir=task.workdir)
        if ran.timed_out:
            return _judged(contract.SOLUTION_TIMEOUT, f"the tests ran past the verifier's "
                           f"limit of {task.verifier_timeout:g}s on the script's work")
        if box.disk_exceeded:
            return _judged(contract.POLICY_SANDBOX_FAILURE, f"the tests wrote more than "
                           f"{limits.disk_mb} MB to the container's disk on the script's work")
        rewards = box.archive(LOGS, 1 << 20)
    finally:
        provider.end_task_container(box)
    reward = _reward(rewards)
    output = ran.stdout.decode("utf-8", "replace")[-1500:].strip()
    note = f"; dropped from the work directory: {', '.join(dropped[:5])}" if dropped else ""
    return RunResult(score=reward, passed=reward >= 1.0, exit_code=0 if reward >= 1.0 else 1,
                     details=f"reward {reward:g}{note}\n{output}")


def _reward(data: bytes | None) -> float:
    """Harbor's rule: reward.json's ``reward`` when there is one, else reward.txt."""
    files: dict[str, bytes] = {}
    if data:
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            for member in archive:
                name = PurePosixPath(member.name).name
                if member.isfile() and name in ("reward.json", "reward.txt"):
                    files[name] = archive.extractfile(member).read()
    if "reward.json" in files:
        try:
            parsed = json.loads(files["reward.json"])
        except ValueError as exc:
            raise VerifierError(f"reward.json is not JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise VerifierError("reward.json must hold a JSON object")
        if "reward" in parsed:
            return _number(parsed["reward"], "reward.json's reward")
    if "reward.txt" in files:
        text = files["reward.txt"].decode("utf-8", "replace").strip()
        try:
            return _number(float(text), "reward.txt")
        except ValueError:
            raise VerifierError(f"reward.txt does not hold a number: {text[:80]!r}") from None
    raise VerifierError(f"the tests wrote no reward file ({LOGS}/reward.json or reward.txt)")


def _number(value: object, where: str) -> float:
    problem = contract.check_score(value)
    if problem is not None:
        raise _InvalidReward(f"{where}: {problem}")
    return contract.clamp_score(float(value))


class _InvalidReward(VerifierError):
    error_type = contract.INVALID_SCORE


def _root(box, argv: list[str]) -> None:
    done = box.exec(argv, user="0", timeout=SETUP_TIMEOUT)
    if done.exit_code != 0:
        raise SandboxError(f"{' '.join(argv)} failed in the grading container: "
                           f"{done.stdout[-500:].decode('utf-8', 'replace')}")


def _judged(error_type: str, details: str) -> RunResult:
    return RunResult(score=0.0, passed=False, exit_code=1, error_type=error_type,
                     details=details)
