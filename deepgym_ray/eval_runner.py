"""What ``deepgym-ray eval`` does: pick the environments, pair them with answers, score them
with results streamed to the ``--out`` file, and resume from it.

The work goes through the ``DeepGym`` client: its Ray pool (or its thread backend), with each
result written the moment it is known, in whatever order results finish.

Example:
    >>> envs = load_target("humaneval")                          # doctest: +SKIP
    >>> jobs = reference_jobs(envs)                              # doctest: +SKIP
    >>> result = run_jobs(DeepGym(mode="local"), jobs, out=None) # doctest: +SKIP
    >>> result.pass_rate                                         # doctest: +SKIP
    1.0
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepgym_ray.models import Environment, EvalResult, RunResult
from deepgym_ray.results_file import ResultsFile, ResultsFileError, record_for
from deepgym_ray.solutions_file import SolutionsFileError, read_solutions

__all__ = [
    "Job",
    "UnknownEnvironmentError",
    "check_resumable",
    "check_same_environments",
    "known_names",
    "load_target",
    "reference_jobs",
    "run_jobs",
    "solution_jobs",
    "verbatim",
]


class UnknownEnvironmentError(LookupError):
    """No environment or suite has this name; the message lists close names."""


@dataclass(frozen=True)
class Job:
    """One answer to score: ``(task_id, sample)`` is its key in the results file.

    ``task_id`` is the task id exactly as the solutions file gave it (``HumanEval/0``; the
    environment's name when it gave none), ``completion`` the answer as given there (what the
    results file keeps), ``answer`` what is sent to be scored.
    """

    task_id: str
    sample: int
    env: Environment
    answer: Any
    answer_sha: str
    completion: Any = None

    @property
    def key(self) -> tuple[str, int]:
        return self.task_id, self.sample


# --- which environments -------------------------------------------------------------------

def known_names() -> tuple[list[str], list[str]]:
    """(built-in environment names, suite names)."""
    from deepgym_ray.envs import builtin_names
    from deepgym_ray.importers import list_suites

    return builtin_names(), list_suites()


def _unknown(name: str, candidates: Sequence[str]) -> UnknownEnvironmentError:
    close = difflib.get_close_matches(name, candidates, n=5, cutoff=0.5)
    close += [c for c in candidates if name.lower() in c.lower() and c not in close][:5]
    hint = f"; close names: {', '.join(close[:5])}" if close else ""
    return UnknownEnvironmentError(f"unknown environment {name!r}{hint} "
                                   "(deepgym-ray envs lists them all)")


def load_target(name: str) -> list[Environment]:
    """The environments ``eval NAME`` scores: a suite's members, or one environment.

    ``NAME`` is a suite (``humaneval``), a suite member (``humaneval/3``), a built-in
    environment (``coin_change``) or an environment folder.
    """
    from deepgym_ray.envs import load_environment
    from deepgym_ray.importers import UnknownSuiteError, load_suite, load_suite_environment

    envs, suites = known_names()
    if name.lower() in suites:
        return load_suite(name.lower())
    suite, sep, _member = name.partition("/")
    if sep and suite.lower() in suites:
        try:
            return [load_suite_environment(name)]
        except UnknownSuiteError as exc:
            members = [env.name for env in load_suite(suite.lower())]
            raise _unknown(name, members) from exc
    if name in envs:
        return [load_environment(name)]
    folder = Path(name).expanduser()
    if folder.is_dir():
        from deepgym_ray.envs.registry import is_environment_folder, load_folder_suite

        # A folder of environment folders is a suite of the user's own.
        return [load_environment(folder)] if is_environment_folder(folder) \
            else load_folder_suite(folder)
    raise _unknown(name, envs + suites)


# --- which answers ------------------------------------------------------------------------

_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})")


def verbatim(code: str) -> str:
    """``code`` wrapped so the client's code extraction gives back exactly ``code``.

    Text without fence lines is already read as itself; otherwise it is put in a backtick fence
    longer than any it contains.
    """
    runs = [len(m.group(1)) for m in map(_FENCE_LINE.match, code.splitlines()) if m]
    if not runs:
        return code
    fence = "`" * max(3, max(runs) + 1)
    return f"{fence}\n{code}{'' if code.endswith(chr(10)) else chr(10)}{fence}\n"


def _sha(answer: Any) -> str:
    text = json.dumps(answer, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _job(task_id: str, sample: int, env: Environment, answer: Any, is_code: bool,
         completion: Any = None) -> Job:
    sent = verbatim(answer) if is_code else answer
    return Job(task_id, sample, env, sent, _sha(sent), answer if completion is None
               else completion)


def reference_jobs(envs: Sequence[Environment]) -> list[Job]:
    """Each environment's reference solution, one job each."""
    missing = [env.name for env in envs if not env.reference_solution]
    if missing:
        raise SolutionsFileError(f"no reference solution for {', '.join(missing[:5])}"
                                 f"{' ...' if len(missing) > 5 else ''}")
    return [_job(env.name, 0, env, env.reference_solution, True) for env in envs]


def solution_jobs(envs: Sequence[Environment], path: str | Path) -> list[Job]:
    """The answers of a solutions file (see :mod:`deepgym_ray.solutions_file`), as jobs."""
    from deepgym_ray.importers import sample_to_task

    by_name = {env.name: env for env in envs}
    by_lower = {env.name.lower(): env for env in envs}
    single = envs[0] if len(envs) == 1 else None
    counts: dict[str, int] = {}
    jobs: list[Job] = []
    for line in read_solutions(path):
        where = f"{path} line {line.line}"
        answer, is_code, given = line.answer, line.is_code, line.answer
        env: Environment | None
        if line.task_id is None:
            if single is None:
                raise SolutionsFileError(f"{where}: no task_id, and this eval has "
                                         f"{len(envs)} environments")
            env = single
        else:
            env = by_name.get(line.task_id)
            if env is None and not is_code and isinstance(answer, str):
                # A suite's own sample format (HumanEval/3: prompt + completion) comes first.
                try:
                    native = sample_to_task(line.task_id, answer)
                except ValueError as exc:
                    raise SolutionsFileError(f"{where}: {exc}") from None
                if native is not None and native[0] in by_name:
                    env, answer, is_code = by_name[native[0]], native[1], True
            if env is None:
                env = by_lower.get(line.task_id.lower())
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

OnResult = Callable[[int, RunResult], None]


def _stream_threads(client: Any, jobs: Sequence[Job], max_parallel: int,
                    on_result: OnResult) -> None:
    """The thread backend: ``client.run_safe`` on at most ``max_parallel`` threads."""
    with ThreadPoolExecutor(max_workers=max(1, max_parallel),
                            thread_name_prefix="deepgym-eval") as pool:
        pending = {}
        it = iter(enumerate(jobs))
        for index, job in it:
            pending[pool.submit(client.run_safe, job.env, job.answer)] = index
            if len(pending) >= max_parallel:
                break
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                on_result(pending.pop(future), future.result())
                nxt = next(it, None)
                if nxt is not None:
                    pending[pool.submit(client.run_safe, nxt[1].env, nxt[1].answer)] = nxt[0]


def _stream_pool(client: Any, jobs: Sequence[Job], max_parallel: int,
                 on_result: OnResult) -> None:
    """The Ray backend: the client's shared verifier pool, results as each one settles."""
    from deepgym_ray.pool import get_pool

    pool = get_pool(client)
    # One answer per actor call: each result reaches the driver (and --out) the moment it is
    # done, and a killed eval loses only the runs in flight. A run costs tens of milliseconds
    # or more, so the extra calls cost nothing measurable (measured: no slower on HumanEval).
    run = pool.map([job.env for job in jobs], [job.answer for job in jobs],
                   max_parallel=max_parallel, on_result=on_result, chunk_size=1)
    for _ in run:  # drives the map; results were already handed to on_result
        pass


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


def _backend(client: Any) -> str:
    config = getattr(client, "config", None)
    return getattr(client, "backend", None) or getattr(config, "backend", "ray")


def run_jobs(
    client: Any,
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
    from deepgym_ray.results_file import result_from_record

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

    if pending:
        limit = max_parallel or getattr(getattr(client, "config", None), "max_parallel", 32)
        stream = _stream_threads if _backend(client) == "threads" else _stream_pool
        stream(client, pending, limit, on_result)
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
