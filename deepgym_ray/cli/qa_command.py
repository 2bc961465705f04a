"""``deepgym-ray qa ENV|FOLDER|SUITE``: can this environment's verifier be trusted to train on?

Every environment's probes (:mod:`deepgym_ray.cli.qa_probes`: the reference, several times;
stubs; the visible examples by heart; mutants of the reference) are scored in one map on the
client's backend, and each environment is checked:

- the reference scores 1.0 every time (else: *flaky*, or *reference fails*);
- every stub and the hard-coded answer score below 0.5 (else: *gameable*, naming the answer);
- at least ``--threshold`` of the judged mutants score below 1.0 (else: *mutants survive*,
  with the surviving changes listed).

A probe without a verdict (an outage, a verifier that never ran) proves nothing either way: it
is counted apart and left out. An environment whose answers are not one program (an agent
episode, a patch, a terminal task) is skipped, and says so.

Exit codes: 0 every environment passed; 1 one did not; 2 bad input; 3 nothing was judged.

Example:
    $ deepgym-ray qa coin_change
    coin_change  ok   reference 3/3, stubs 0 of 4 at >= 0.5, hard-coded 0.00, mutants 19/20 caught
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from deepgym_ray.cli.errors import EXIT_FAILED, EXIT_NO_VERDICT, EXIT_OK, BadInput
from deepgym_ray.cli.options import (
    add_client_options,
    client_for,
    load_target,
    positive_number,
    rate,
    settings_from,
)
from deepgym_ray.cli.qa_probes import Probe, hardcoded, mutants, stubs

__all__ = ["add_parser", "check_environments", "plan_probes", "run"]

GAMED = 0.5  # a stub or a memorised answer scoring this much games the verifier


def add_parser(commands: Any) -> argparse.ArgumentParser:
    qa = commands.add_parser(
        "qa", help="check that an environment's verifier cannot be gamed",
        description="Score each environment's reference (several times), do-nothing answers, "
                    "its visible examples by heart and mutants of its reference, in one map; "
                    "report what a verifier lets through.")
    qa.add_argument("target", metavar="ENV|FOLDER|SUITE",
                    help="an environment, a folder of one (or of many), or a suite")
    qa.add_argument("--repeats", type=positive_number, default=3,
                    help="runs of the reference (default 3)")
    qa.add_argument("--mutants", type=int, default=20, metavar="N",
                    help="mutants of the reference per environment (default 20; 0: none)")
    qa.add_argument("--threshold", type=rate, default=0.8,
                    help="share of judged mutants the verifier must catch (default 0.8)")
    qa.add_argument("--seed", type=int, default=0, help="which mutants, when there are more")
    qa.add_argument("--time-limit", type=float, metavar="SECONDS",
                    help="at most this much time per mutant run and per case (default: the "
                         "environment's own limits): a mutant that loops runs to its limit; "
                         "the reference and the stubs keep the environment's limits")
    qa.add_argument("--json", action="store_true", help="print the report as JSON")
    qa.add_argument("--out", metavar="REPORT.json", help="also write the JSON report here")
    qa.add_argument("--backend", choices=("auto", "ray", "threads"), default="auto",
                    help="the Ray pool, or this process's threads (default: the pool when a "
                         "cluster is running)")
    qa.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_client_options(qa)
    return qa


@dataclass
class EnvReport:
    """What the probes of one environment found."""

    name: str
    skipped: str | None = None
    reference: list[float | None] = field(default_factory=list)
    gamed: list[dict[str, Any]] = field(default_factory=list)  # stubs/hard-coded >= GAMED
    stubs: int = 0
    hardcoded: float | None = None
    mutants: int = 0
    caught: int = 0
    survivors: list[dict[str, str]] = field(default_factory=list)
    no_verdict: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.skipped is None and not self.problems

    def as_dict(self) -> dict[str, Any]:
        judged = self.mutants
        return {"name": self.name, "ok": self.ok, "skipped": self.skipped,
                "problems": self.problems, "reference_scores": self.reference,
                "stubs": self.stubs, "gamed_by": self.gamed, "hardcoded_score": self.hardcoded,
                "mutants": {"judged": judged, "caught": self.caught,
                            "share": None if not judged else self.caught / judged,
                            "survivors": self.survivors},
                "no_verdict": self.no_verdict}


def plan_probes(envs: list[Any], *, repeats: int = 3, count: int = 20,
                seed: int = 0) -> list[list[Probe] | str]:
    """Each environment's probes, or why it has none (in the order of ``envs``)."""
    return [_probes(env, repeats, count, seed) for env in envs]


def _probes(env: Any, repeats: int, count: int, seed: int) -> list[Probe] | str:
    if env.multi_turn is not None or env.patch_task is not None or env.terminal_task is not None:
        return "not a single-program environment (an agent episode, a patch or a terminal task)"
    if not env.reference_solution:
        return "no reference solution"
    try:
        made = [Probe("reference", f"reference #{i + 1}", env.reference_solution)
                for i in range(repeats)]
        made += stubs(env.reference_solution)
        memorised = hardcoded(env.reference_solution, env.task)
        if memorised is not None:
            made.append(memorised)
        made += mutants(env.reference_solution, limit=count, seed=seed) if count else []
    except SyntaxError as exc:
        return f"its reference solution is not Python: {exc}"
    return made


def check_environments(client: Any, envs: list[Any], plan: list[list[Probe] | str], *,
                       threshold: float = 0.8, time_limit: float | None = None,
                       on_result: Any = None) -> list[EnvReport]:
    """Run ``plan`` (:func:`plan_probes` of ``envs``) in one map on ``client``'s backend; one
    report per environment. ``time_limit`` caps a mutant run's time limit and its per-case
    limit (a mutant may loop); the reference keeps the environment's own, or a loaded machine
    could pass for a failing reference."""
    reports = [EnvReport(env.name) for env in envs]
    capped = envs if time_limit is None else [
        env.model_copy(update={"timeout": min(env.timeout, time_limit),
                               "case_timeout": min(env.case_timeout, time_limit)})
        for env in envs]
    owners: list[tuple[EnvReport, Probe]] = []
    run_envs, codes = [], []
    for env, mutant_env, report, made in zip(envs, capped, reports, plan, strict=True):
        if isinstance(made, str):
            report.skipped = made
            continue
        for probe in made:
            owners.append((report, probe))
            run_envs.append(mutant_env if probe.kind == "mutant" else env)
            codes.append(probe.code)
    results = client.score_code(run_envs, codes, on_result=on_result) if codes else []
    for (report, probe), result in zip(owners, results, strict=True):
        score = float(result.reward) if result.has_verdict else None
        if probe.kind == "reference":
            report.reference.append(score)
        if score is None:
            report.no_verdict += 1
            continue
        if probe.kind == "stub":
            report.stubs += 1
        if probe.kind in ("stub", "hardcoded") and score >= GAMED:
            report.gamed.append({"kind": probe.kind, "answer": probe.label, "score": score})
        if probe.kind == "hardcoded":
            report.hardcoded = score
        if probe.kind == "mutant":
            report.mutants += 1
            if score < 1.0 or not result.passed:
                report.caught += 1
            else:
                report.survivors.append({"change": probe.label})
    for report in reports:
        if report.skipped is None:
            _judge(report, threshold)
    return reports


def _judge(report: EnvReport, threshold: float) -> None:
    judged = [s for s in report.reference if s is not None]
    if judged and any(s != 1.0 for s in judged):
        kind = "flaky" if any(s == 1.0 for s in judged) else "the reference fails"
        report.problems.append(f"{kind}: reference scored {judged}")
    for gamed in report.gamed:
        report.problems.append(f"gameable: {gamed['answer']} scored {gamed['score']:.2f}")
    if report.mutants and report.caught / report.mutants < threshold:
        report.problems.append(f"mutants survive: {report.caught}/{report.mutants} caught "
                               f"(under {threshold:.0%})")
    if not judged:
        report.problems.append("nothing judged: the reference never got a verdict")


def _line(report: EnvReport, width: int) -> str:
    if report.skipped:
        return f"{report.name:<{width}}  skip  {report.skipped}"
    judged = [s for s in report.reference if s is not None]
    parts = [f"reference {sum(s == 1.0 for s in judged)}/{len(report.reference)}",
             f"stubs {sum(g['kind'] == 'stub' for g in report.gamed)} of "
             f"{report.stubs} at >= {GAMED}"]
    if report.hardcoded is not None:
        parts.append(f"hard-coded {report.hardcoded:.2f}")
    if report.mutants:
        parts.append(f"mutants {report.caught}/{report.mutants} caught")
    if report.no_verdict:
        parts.append(f"{report.no_verdict} without a verdict")
    status = "ok  " if report.ok else "FAIL"
    text = f"{report.name:<{width}}  {status}  {', '.join(parts)}"
    return text + "".join(f"\n{'':<{width}}        - {p}" for p in report.problems)


def run(args: argparse.Namespace) -> int:
    """Probe, print the report (and write it), the exit code."""
    from deepgym_ray.cli.eval_command import progress_bar

    if args.mutants < 0:
        raise BadInput(f"--mutants must be 0 or more, got {args.mutants}")
    if args.time_limit is not None and not args.time_limit > 0:
        raise BadInput(f"--time-limit must be a positive number of seconds, got "
                       f"{args.time_limit}")
    config = settings_from(args)
    client = client_for(config)
    envs = load_target(args.target)
    try:
        plan = plan_probes(envs, repeats=args.repeats, count=args.mutants, seed=args.seed)
        total = sum(len(p) for p in plan if not isinstance(p, str))
        with progress_bar(total, 0, f"qa {args.target}", not args.no_progress) as bar:
            reports = check_environments(client, envs, plan, threshold=args.threshold,
                                         time_limit=args.time_limit,
                                         on_result=lambda i, r: bar.update(1))
    finally:
        client.close()
    report = {"target": args.target, "ok": all(r.ok or r.skipped for r in reports),
              "threshold": args.threshold, "environments": [r.as_dict() for r in reports]}
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as out:
                json.dump(report, out, indent=2)
        except OSError as exc:
            raise BadInput(f"cannot write --out {args.out}: {exc}") from None
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        width = max((len(r.name) for r in reports), default=0)
        for one in reports:
            print(_line(one, width))
        sys.stdout.flush()  # the count below, on stderr, comes after the table
        failed = sum(not r.ok and not r.skipped for r in reports)
        print(f"{len(reports) - failed} of {len(reports)} environments passed" +
              (f" ({sum(bool(r.skipped) for r in reports)} skipped)"
               if any(r.skipped for r in reports) else ""), file=sys.stderr)
    if not any(s is not None for r in reports for s in r.reference):
        return EXIT_NO_VERDICT
    return EXIT_OK if report["ok"] else EXIT_FAILED
