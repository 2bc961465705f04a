"""What ``deepgym-ray eval`` does: pick the environments, pair them with answers, score them
with results streamed to the ``--out`` file, and resume from it.

The code of each answer is taken out once, when its job is made; the ``DeepGym`` client scores
it on its backend (the Ray pool, or threads), and each result is written the moment it is
known, in whatever order results finish.

Example:
    envs = resolve_environments("humaneval")
    jobs = reference_jobs(envs)
    result = run_jobs(DeepGym(mode="local"), jobs, out=None)
    result.pass_rate
    # 1.0
"""

from __future__ import annotations

import collections
import difflib
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepgym_ray import contract
from deepgym_ray.cli.results_file import ResultsFile, ResultsFileError, record_for
from deepgym_ray.cli.solutions_file import SolutionsFileError, read_solutions
from deepgym_ray.completions import completion_to_code
from deepgym_ray.models import Environment, EvalResult, RunResult

if TYPE_CHECKING:  # pragma: no cover
    from deepgym_ray.client import DeepGym

__all__ = [
    "Job",
    "check_resumable",
    "check_same_environments",
    "reference_jobs",
    "run_jobs",
    "solution_jobs",
]

EVAL_CHUNK = 8  # answers per actor call when an eval runs on a pool (see run_jobs)


@dataclass(frozen=True)
class Job:
    """One answer to score: ``(task_id, sample)`` is its key in the results file.

    ``task_id`` is the task id exactly as the solutions file gave it (``HumanEval/0``; the
    environment's name when it gave none), ``completion`` the answer as given there (what the
    results file keeps), ``code`` what is sent to be scored (taken out of the answer once, here;
    None when the answer holds none, and ``problem`` says why).
    """

    task_id: str
    sample: int
    env: Environment
    code: str | None
    answer_sha: str
    completion: Any = None
    problem: str | None = None

    @property
    def key(self) -> tuple[str, int]:
        return self.task_id, self.sample


# --- which answers ------------------------------------------------------------------------

def _sha(code: str | None, problem: str | None) -> str:
    text = json.dumps([code, problem], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _job(task_id: str, sample: int, env: Environment, answer: Any, is_code: bool,
         completion: Any = None) -> Job:
    code, problem = answer, None
    if not is_code:
        try:
            code = completion_to_code(answer, languages=env.answer_languages)
        except ValueError as exc:  # a conversation with no answer: its own no-verdict result
            code, problem = None, f"no code to run: {exc}"
    return Job(task_id, sample, env, code, _sha(code, problem),
               answer if completion is None else completion, problem)


def reference_jobs(envs: Sequence[Environment]) -> list[Job]:
    """Each environment's reference solution, one job each."""
    missing = [env.name for env in envs if not env.reference_solution]
    if missing:
        raise SolutionsFileError(f"no reference solution for {', '.join(missing[:5])}"
                                 f"{' ...' if len(missing) > 5 else ''}")
    return [_job(env.name, 0, env, env.reference_solution, True) for env in envs]


def solution_jobs(envs: Sequence[Environment], path: str | Path) -> list[Job]:
    """The answers of a solutions file (see :mod:`deepgym_ray.cli.solutions_file`), as jobs."""
    from deepgym_ray.suites import sample_to_task

    by_name = {env.name: env for env in envs}
    by_lower = {env.name.lower(): env for env in envs}
    # A suite's own task ids (SWE-bench's instance_id) name members SUITE/<id>.
    last_parts = collections.Counter(env.name.rsplit("/", 1)[-1] for env in envs)
    by_last = {env.name.rsplit("/", 1)[-1]: env for env in envs if "/" in env.name
               and last_parts[env.name.rsplit("/", 1)[-1]] == 1}
    single = envs[0] if len(envs) == 1 else None
    counts: dict[str, int] = {}
    jobs: list[Job] = []
    for line in read_solutions(path):
        where = f"{path} {line.unit} {line.line}"
        answer, is_code, given = line.answer, line.is_code, line.answer
        env: Environment | None
        if line.task_id is None:
            if single is None:
                raise SolutionsFileError(f"{where}: no task_id, and this eval has "
                                         f"{len(envs)} environments")
            env = single
        else:
            env = None
            if not is_code and isinstance(answer, str):
                # A suite's own sample format (HumanEval/3: the prompt and the completion)
                # comes first, whatever the id's case.
                try:
                    native = sample_to_task(line.task_id, answer)
                except ValueError:  # no task of the suite: the lookup below says so
                    native = None
                if native is not None and native[0] in by_name:
                    env, answer, is_code = by_name[native[0]], native[1], True
            if env is None:
                env = by_name.get(line.task_id) or by_lower.get(line.task_id.lower()) \
                    or by_last.get(line.task_id)
            if env is None:
                close = difflib.get_close_matches(line.task_id, list(by_name), n=3, cutoff=0.6)
                hint = f" (close: {', '.join(close)})" if close else ""
                scope = f"{envs[0].name}" if single else f"the {len(envs)} environments"
                raise SolutionsFileError(f"{where}: task_id {line.task_id!r} is not in this "
                                         f"eval ({scope}){hint}")
        sample = counts.get(env.name, 0)
        counts[env.name] = sample + 1
        jobs.append(_job(line.task_id or env.name, sample, env, answer, is_code, given))
    if not jobs:
        raise SolutionsFileError(f"solutions file {path} has no solutions")
    return jobs


# --- scoring ------------------------------------------------------------------------------

def check_resumable(jobs: Sequence[Job], done: dict[tuple[str, int], dict[str, Any]],
                    path: Any = None) -> None:
    """Refuse to resume from results that were scored on different answers."""
    for job in jobs:
        record = done.get(job.key)
        if record is not None and record.get("answer_sha") != job.answer_sha:
            raise ResultsFileError(
                f"results file {path or ''} holds a result for {job.task_id} sample "
                f"{job.sample} scored on a different answer; use another --out file"
            )


def check_same_environments(done: dict[tuple[str, int], dict[str, Any]],
                            envs: Sequence[Environment], path: Any = None) -> None:
    """Refuse a results file that holds results of environments outside this eval (another
    suite's file): resuming from it would mix two evals."""
    names = {env.name for env in envs}
    for record in done.values():
        name = record.get("env_name") or record.get("task_id")
        if name not in names:
            scope = envs[0].name if len(envs) == 1 else f"{len(envs)} environments"
            raise ResultsFileError(
                f"results file {path or ''} holds results for {name!r}, which is not in this "
                f"eval ({scope}): it is another eval's file; use another --out file")


def run_jobs(
    client: DeepGym,
    jobs: Sequence[Job],
    *,
    out: ResultsFile | None = None,
    max_parallel: int | None = None,
    progress: Callable[[RunResult], None] | None = None,
    done: dict[tuple[str, int], dict[str, Any]] | None = None,
) -> EvalResult:
    """Score ``jobs``, skipping those in ``done`` (records already in ``out``).

    Each new result is appended to ``out`` as soon as it is known. Returns the whole eval's
    result (earlier and new results together), in job order.
    """
    from deepgym_ray.cli.results_file import result_from_record

    start = time.monotonic()
    done = done or {}
    check_resumable(jobs, done, out.path if out is not None else None)
    results: dict[tuple[str, int], RunResult] = {
        job.key: result_from_record(done[job.key]) for job in jobs if job.key in done
    }
    pending = [job for job in jobs if job.key not in results]

    def on_result(index: int, result: RunResult) -> None:
        job = pending[index]
        if result.env_name is None:
            result = result.model_copy(update={"env_name": job.env.name})
        if job.key in results:  # never twice, whatever a backend does
            return
        results[job.key] = result
        if out is not None:
            out.append(record_for(job.task_id, job.sample, job.answer_sha, result,
                                  completion=job.completion))
        if progress is not None:
            progress(result)

    unsendable = [i for i, job in enumerate(pending) if job.code is None]
    for index in unsendable:
        job = pending[index]
        on_result(index, RunResult(error_type=contract.RUNTIME_ERROR, details=job.problem,
                                   env_name=job.env.name))
    sent = [i for i, job in enumerate(pending) if job.code is not None]
    if sent:
        # A few answers per actor call (on a pool): results reach the driver (and --out) a
        # chunk at a time, and a killed eval loses only the chunks in flight. One answer per
        # call cost the cluster path 3 to 5 ms a run on 2 cores (a round trip and a driver
        # turn each): 1.16 and 1.27 of the thread path's per-run cost on 1,640 HumanEval runs,
        # against 1.14 and 0.92 with chunks of 8 (bench/humaneval_vs_reference.py).
        client.score_code([pending[i].env for i in sent], [pending[i].code for i in sent],
                          max_parallel, on_result=lambda i, r: on_result(sent[i], r),
                          chunk_size=EVAL_CHUNK)
    lost = [job.key for job in pending if job.key not in results]
    if lost:  # a backend broke its promise of one result per input: say so, never guess
        raise RuntimeError(f"{len(lost)} runs got no result, e.g. {lost[0]}")
    return EvalResult(
        results=[results[job.key] for job in jobs],
        env_names=[job.env.name for job in jobs],
        duration=time.monotonic() - start,
    )


def iter_labels(jobs: Sequence[Job]) -> Iterator[str]:
    """Each job's label in the summary: the task id, with ``#sample`` when it has several."""
    multi = {job.task_id for job in jobs if job.sample > 0}
    for job in jobs:
        yield f"{job.task_id}#{job.sample}" if job.task_id in multi else job.task_id
