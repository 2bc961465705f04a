#!/usr/bin/env python3
"""Run the security battery and the infrastructure fault tests, and write RELIABILITY.md.

Runs pytest on ``tests/security`` (every attack against every provider of
``tests/security/providers_under_test.py``, alone and in a batch) and ``tests/faults``, reads
its JUnit report, and writes a table: attack or fault | tags | provider | outcome (held, BROKEN
with what went wrong, or skipped with the reason) | the command that reproduces it.

Usage:
    .venv/bin/python scripts/reliability.py                 # everything (e2e faults too)
    .venv/bin/python scripts/reliability.py --no-e2e        # without the multi-node/CLI ones
    .venv/bin/python scripts/reliability.py --junit a.xml b.xml   # only render reports
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECURITY, FAULTS = ROOT / "tests" / "security", ROOT / "tests" / "faults"
PYTHON = ".venv/bin/python"
# An attack a provider runs in the batch only, by design (the session attacks on Daytona,
# where running each alone checks nothing the batch does not: tests/security/session_attacks.py)
BATCH_ONLY = "held in the batch (run only there on this provider)"


@dataclass
class Row:
    """One attack or fault against one provider (its alone and batch runs folded together)."""

    kind: str  # attack | fault
    name: str
    path: str
    provider: str
    tags: str = ""
    outcomes: dict[str, str] = field(default_factory=dict)  # test name -> held/BROKEN/skip
    reasons: list[str] = field(default_factory=list)
    node_ids: list[str] = field(default_factory=list)

    def outcome(self) -> str:
        values = list(self.outcomes.values())
        if any(v == "BROKEN" for v in values):
            ways = ", ".join(k for k, v in self.outcomes.items() if v == "BROKEN")
            return f"**BROKEN** ({ways}): " + " / ".join(dict.fromkeys(self.reasons))
        missed = [v for v in values if v.startswith(("skipped", "not run"))]
        if values and len(missed) == len(values):
            return values[0]
        if missed:
            return "held where it ran; " + missed[0]
        if self.kind == "attack" and set(self.outcomes) == {"batch"}:
            return BATCH_ONLY
        if self.kind == "attack" and set(self.outcomes) < {"alone", "batch"}:
            return "held " + "/".join(self.outcomes) + " (the other way was not run)"
        return "held"

    def command(self) -> str:
        ids = " ".join(f"'{node}'" for node in self.node_ids)
        return f"`{PYTHON} -m pytest {ids}`"


def run_pytest(junit: Path, e2e: bool, extra: list[str]) -> int:
    command = [sys.executable, "-m", "pytest", str(SECURITY), str(FAULTS), "-q",
               "-p", "no:cacheprovider", f"--junitxml={junit}", "-o", "junit_family=xunit1"]
    if not e2e:
        command += ["-m", "not e2e"]
    print("running:", " ".join(command), flush=True)
    return subprocess.run(command + extra, cwd=ROOT).returncode


def attack_info(path: Path) -> tuple[str, str | None]:
    """The tags the attack file declares (its ATTACK, or its TAGS), and the provider it runs
    on when it declares one (``PROVIDER``: an attack on a surface other than a sandbox, such
    as the HTTP service, whose tests are not parametrized by provider), read by importing it."""
    for folder in (SECURITY.parent, SECURITY):  # as conftest.py puts them: the shared helpers
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(f"reliability_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the report still lists it, with why its tags are unknown
        return f"(cannot import: {type(exc).__name__})", None
    attack = getattr(module, "ATTACK", None)  # a repository-task attack declares TAGS only
    tags = ", ".join(attack.tags if attack is not None else getattr(module, "TAGS", ()))
    return tags, getattr(module, "PROVIDER", None)


def _reason(element: ET.Element) -> str:
    text = element.get("message") or element.text or ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and "succeeded:" in lines[0]:
        lines = lines[1:]
    reason = "; ".join(lines)[:400]
    return reason.replace("|", "\\|") or "failed"


def read_report(junit: Path) -> list[Row]:
    rows: dict[tuple[str, str], Row] = {}
    infos: dict[Path, tuple[str, str | None]] = {}  # an attack file's tags and provider
    for case in ET.parse(junit).getroot().iter("testcase"):
        classname = case.get("classname", "")
        module = classname.split(".")[-1]
        folder_name = classname.split(".")[-2] if classname.count(".") >= 2 else ""
        if module == "test_harness_checks" or folder_name not in ("security", "faults"):
            continue  # the harness's own tests, the rest of the suite, pytest's own records
        # pytest-xdist's --dist loadgroup appends the test's group to its id: "...@group"
        raw = case.get("name", "")
        name, _, group = raw.rpartition("@")
        if not name or "]" in group:  # no group: an "@" of the test's own parameters
            name = raw
        base, _, param = name.partition("[")
        param = param.rstrip("]")
        kind = "attack" if folder_name == "security" else "fault"
        folder = SECURITY if kind == "attack" else FAULTS
        rel = (folder / f"{module}.py").relative_to(ROOT)
        if kind == "attack" and folder / f"{module}.py" not in infos:
            infos[folder / f"{module}.py"] = attack_info(folder / f"{module}.py")
        tags, declared = infos.get(folder / f"{module}.py", ("fault", None))
        # A battery attack's parameter is its provider; a surface attack names its own.
        provider = (declared or param) if kind == "attack" else "local"
        label = module.removeprefix("test_") if kind == "attack" else (
            f"{module.removeprefix('test_')}: {base.removeprefix('test_')}"
            + (f" [{param}]" if param else ""))
        key = (label, provider)
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(kind, label, str(rel), provider, tags)
        row.node_ids.append(f"{rel}::{name}")
        way = base.removeprefix("test_").replace("in_batch", "batch")
        failure = case.find("failure")
        error = case.find("error")
        skipped = case.find("skipped")
        if failure is None and error is not None and \
                (error.get("message") or "").startswith("failed on setup"):
            # The test never ran (its fixture failed: no Ray, no provider): not a finding.
            row.outcomes[way] = "not run: " + _reason(error)[:200]
        elif failure is not None or error is not None:
            failure = failure if failure is not None else error
            row.outcomes[way] = "BROKEN"
            row.reasons.append(_reason(failure))
        elif skipped is not None and skipped.get("type") == "pytest.xfail":
            # A strict xfail: an attack the provider is known not to hold yet (see its reason).
            row.outcomes[way] = "BROKEN"
            row.reasons.append(_reason(skipped))
        elif skipped is not None:
            row.outcomes[way] = "skipped: " + _reason(skipped).removeprefix("Skipped: ")
        else:
            row.outcomes[way] = "held"
    return sorted(rows.values(), key=lambda r: (r.kind, r.name, r.provider))


def render(rows: list[Row], junit_source: str) -> str:
    # every attack against every provider setup, those CI runs a part of included
    full = "DEEPGYM_FULL_BATTERY=1 " if os.environ.get("DEEPGYM_FULL_BATTERY") == "1" else ""
    broken = [r for r in rows if r.outcome().startswith("**BROKEN")]
    held = [r for r in rows if r.outcome() == "held"]
    batch_only = [r for r in rows if r.outcome() == BATCH_ONLY]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# Reliability: the security battery and the infrastructure faults",
        "",
        f"Generated by `{full}{PYTHON} scripts/reliability.py` on {now} ({platform.node()}, "
        f"Python {platform.python_version()}), from {junit_source}.",
        "",
        "Each attack (`tests/security/test_<name>.py`) runs against each provider twice: alone "
        "(`DeepGym.run`) and in a batch on the Ray pool between right answers (one pool map "
        "carries every attack's batch of a provider). It is "
        "**held** when both ended as a judged 0 (or, for a neighbour attack, the innocent "
        "right answer still scored 1.0), every right answer beside it scored 1.0, and the host "
        "was clean (no process of the run's sandbox uid, none of its directories, none of the "
        "files it tried to drop). Each fault (`tests/faults/`) is held when every input got "
        "exactly one result, no right answer was judged 0 and no wrong one passed. An attack on a "
        "surface other than a sandbox (`test_http_*`: the HTTP service's episodes; the lm-eval "
        "filter's and `score_dataset`'s rows) is one row, on the provider its pool runs: held "
        "when every test of it held (the hostile client got a 4xx naming its mistake, no "
        "traceback, and no other client's episode or row changed).",
        "",
        f"Totals: {len(rows)} rows, {len(held)} held, {len(batch_only)} held in the batch "
        f"(which their provider runs them in only), {len(broken)} BROKEN, "
        f"{len(rows) - len(held) - len(batch_only) - len(broken)} skipped or partly skipped.",
        "",
        "| attack / fault | tags | provider | outcome | reproduce |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        out.append(f"| {row.name} | {row.tags} | {row.provider} | {row.outcome()} | "
                   f"{row.command()} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--junit", type=Path, nargs="+",
                        help="render these JUnit reports; run nothing")
    parser.add_argument("--no-e2e", action="store_true", help="leave out e2e-marked faults")
    parser.add_argument("--out", type=Path, default=ROOT / "RELIABILITY.md")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.junit:
        reports = args.junit
        source = "the reports " + ", ".join(path.name for path in reports)
    else:
        reports = [Path(tempfile.mkdtemp(prefix="reliability-")) / "report.xml"]
        run_pytest(reports[0], e2e=not args.no_e2e, extra=args.pytest_args)
        source = "a fresh run"
    rows = [row for path in reports for row in read_report(path)]
    args.out.write_text(render(rows, source))
    broken = [r for r in rows if r.outcome().startswith("**BROKEN")]
    print(f"wrote {args.out}: {len(rows)} rows, {len(broken)} BROKEN")
    for row in broken:
        print(f"  BROKEN {row.name} [{row.provider}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
