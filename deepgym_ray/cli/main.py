"""The ``deepgym-ray`` command.

    deepgym-ray envs                              built-in environments and suites
    deepgym-ray run ENV FILE                      score one answer (FILE, or - for stdin)
    deepgym-ray eval SUITE_OR_ENV (--solutions FILE.jsonl | --reference) [options]
    deepgym-ray qa ENV|FOLDER|SUITE               can the verifier be gamed? (a report)

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
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from deepgym_ray import __version__
from deepgym_ray.cli import eval_command, pool_commands, qa_command, serve_command
from deepgym_ray.cli.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_VERDICT,
    EXIT_OK,
    BadInput,
)
from deepgym_ray.cli.options import add_client_options, client_for, load_target, settings_from

__all__ = ["build_parser", "main"]


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
    add_client_options(run)

    eval_command.add_parser(commands)
    qa_command.add_parser(commands)
    pool_commands.add_parser(commands)
    serve_command.add_parser(commands)
    return parser


# --- commands -----------------------------------------------------------------------------

def cmd_envs(args: argparse.Namespace) -> int:
    from deepgym_ray.envs import list_environments
    from deepgym_ray.suites import list_suites, load_suite

    envs, suites = list_environments(), list_suites()
    agents = list_environments(multi_turn=True)
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
        print(json.dumps({"environments": envs, "multi_turn": agents, "suites": sizes},
                         indent=2))
        return EXIT_OK
    print(f"Environments ({len(envs)}):")
    width = max((len(env["name"]) for env in envs), default=0)
    for env in envs:
        about = ", ".join(str(v) for v in (env.get("difficulty"), env.get("domain")) if v)
        print(f"  {env['name']:<{width}}  {about}".rstrip())
    print(f"Multi-turn environments, for agent episodes ({len(agents)}):")
    for env in agents:
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

    client = client_for(settings_from(args))
    envs = load_target(args.env)
    if len(envs) != 1:
        raise BadInput(f"{args.env!r} is a suite of {len(envs)} environments; "
                       "run scores one answer (use eval, or name one member)")
    result = client.run_safe(envs[0], _read_answer(args.file))
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        reasons = failure_reasons(result) if result.has_verdict else []
        # The reasons hold the details when there are any: shown once, not in the line too.
        print(f"{envs[0].name}: {run_line(result, details=not reasons)}")
        for reason in reasons:
            print(f"  {reason}")
    if not result.has_verdict:
        return EXIT_NO_VERDICT
    return EXIT_OK if result.passed else EXIT_FAILED


COMMANDS = {"envs": cmd_envs, "run": cmd_run, "eval": eval_command.run, "qa": qa_command.run,
            "pool": pool_commands.cmd_pool, "serve": serve_command.run}


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
