"""Runs one attack against one provider: alone, and in a batch on the Ray pool.

Alone: ``DeepGym(mode=..., backend="threads").run`` (for a neighbour attack, with an innocent
right answer run at the same moment). In a batch: ``run_batch`` on the shared Ray pool, the
attack between right answers that must each still score 1.0. Either way the attack must end
as a judged 0 (a verdict, score 0) without ``run`` raising (or, for an attack whose
``expect`` says so, as the verifier's error without a verdict), a follow-up run must not profit
from it, and the host must be clean right after: no process of the run's sandbox uid, none of
its directories, none of the files it tried to drop. Everything is checked and recorded
before anything is cleaned up, and the cleanup (of this run's leftovers only) happens even when
a check failed, so one broken attack does not spoil the next.
"""

from __future__ import annotations

import os
import threading
import uuid
from typing import Any

from harness import Attack
from providers_under_test import ProviderCase, read_ledger, remove_tree

from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig, PoolConfig
from deepgym_ray.exceptions import VerifierError
from deepgym_ray.models import RunResult

BATCH_SLOTS = 4  # two actors x two runs: the attack and three right answers all at once


def describe(result: RunResult | None) -> str:
    if result is None:
        return "no result"
    details = str(result.details)
    if len(details) > 600:  # a traceback's end says what happened: keep both ends
        details = f"{details[:200]} [...] {details[-400:]}"
    return (f"score={result.score} has_verdict={result.has_verdict} "
            f"error_type={result.error_type} duration={result.duration:.1f}s "
            f"details={details!r}")


class Battery:
    """One provider's client, pool and host checks, shared by every attack of a session."""

    def __init__(self, case: ProviderCase, ledger_dir: str) -> None:
        self.case = case
        self.ledger = os.path.join(ledger_dir, f"ledger-{case.label}.jsonl")
        self.factory = case.factory(self.ledger)
        self.client = DeepGym(mode=case.mode, backend="threads", provider=self.factory)
        self._pool_client: DeepGym | None = None
        # The attacks whose batch case this session runs (conftest.py sets them from the
        # collected tests): all in one pool map, on the first ``in_batch``.
        self.batch_attacks: list[Attack] = []
        self._batch_findings: dict[str, list[str]] | None = None

    def pool_client(self) -> DeepGym:
        if self._pool_client is None:
            pool = PoolConfig(name=f"security-{self.case.label}-{uuid.uuid4().hex[:6]}",
                              actors=2, actor_concurrency=2, num_cpus_per_actor=0,
                              max_retries=1)
            config = DeepGymConfig(mode=self.case.mode, backend="ray", pool=pool,
                                   max_parallel=BATCH_SLOTS)
            self._pool_client = DeepGym(config=config, provider=self.factory)
        return self._pool_client

    def close(self) -> None:
        self._stop_pool()
        self.client.close()

    def _stop_pool(self) -> None:
        if self._pool_client is not None:
            from deepgym_ray.pool import get_pool

            get_pool(self._pool_client).shutdown()
            self._pool_client = None

    # -- the two ways every attack runs ------------------------------------------------------

    def alone(self, attack: Attack) -> None:
        env = attack.environment()
        problems: list[str] = []
        start = self._ledger_size()
        innocent: dict[str, Any] = {}
        thread = None
        if attack.neighbour:
            thread = threading.Thread(target=self._run_into, args=(
                attack.environment(for_right=True), attack.right_code(), innocent))
            thread.start()
        attacked: dict[str, Any] = {}
        self._run_into(env, attack.code(), attacked)
        if thread is not None:
            thread.join()
            self._expect_right(innocent, "the innocent concurrent right answer", problems)
        self._expect_end(attack, attacked, "the attack", problems)
        problems += self._host(start, attack, "after the attack's run")
        follow_up = attack.follow_up_code()
        if follow_up is not None:
            later: dict[str, Any] = {}
            self._run_into(env, follow_up, later)
            self._expect_zero(later, "the follow-up run", problems)
        self._finish(start, attack, problems)

    def in_batch(self, attack: Attack) -> None:
        """The attack's batch, from the one pool map that carries every batch case of the
        session (see :meth:`_batch_all`); an attack outside that list gets a map of its own."""
        if self._batch_findings is None:
            self._batch_findings = self._batch_all(self.batch_attacks)
            self._stop_pool()  # its work is done: idle actors still cost CPU all session
        problems = self._batch_findings.get(attack.name)
        if problems is None:
            problems = self._batch_all([attack])[attack.name]
        assert not problems, f"attack {attack.name!r} succeeded:\n  " + "\n  ".join(problems)

    def _batch_all(self, attacks: list[Attack]) -> dict[str, list[str]]:
        """One pool map for every attack's batch case: each attack between three right answers
        that must each still score 1.0, all of them in flight beside the other attacks' runs.

        An attack's results and host are checked as soon as its four runs are in (not when the
        map ends, so a process that outlives its run but dies soon after is still seen), and
        its leftovers cleaned at once, unless a follow-up run must first show that a later run
        does not profit from them: those run in a second map, after the first.
        """
        problems: dict[str, list[str]] = {a.name: [] for a in attacks}
        envs, outputs, owners = [], [], []
        for attack in attacks:
            right, right_env, env = attack.right_code(), attack.environment(for_right=True), \
                attack.environment()
            for position, (e, code) in enumerate(
                    ((right_env, right), (env, attack.code()), (right_env, right),
                     (right_env, right))):
                envs.append(e)
                outputs.append(code)
                owners.append((attack, position))
        start = self._ledger_size()
        pending = {a.name: 4 for a in attacks}
        lock = threading.Lock()

        def heard(index: int, result: RunResult) -> None:
            attack, position = owners[index]
            mine = problems[attack.name]
            with lock:
                pending[attack.name] -= 1
                finished = pending[attack.name] == 0
            try:
                if position == 1:
                    self._expect_end(attack, {"result": result}, "the attack", mine)
                else:
                    self._expect_right({"result": result}, f"right answer #{position}", mine)
                if finished:
                    mine += self._host_of(start, attack, "after its batch")
                    if attack.follow_up is None:
                        self._clean(start, attack)
            except Exception as exc:  # a check that broke: this attack's finding, not the map's
                mine.append(f"checking it raised {type(exc).__name__}: {exc}")

        results = self.pool_client().score_outputs(envs, outputs, BATCH_SLOTS,
                                                   on_result=heard)
        for attack in attacks:
            if pending[attack.name]:
                problems[attack.name].append(
                    f"{pending[attack.name]} of its 4 runs were never heard of "
                    f"({len(results)} results for {len(outputs)} inputs)")
        self._follow_ups([a for a in attacks if a.follow_up is not None], problems, start)
        return problems

    def _follow_ups(self, attacks: list[Attack], problems: dict[str, list[str]],
                    start: int) -> None:
        """Each attack's follow-up, twice between right answers (all in one map), then the
        attack's leftovers cleaned."""
        if not attacks:
            return
        envs, outputs, owners = [], [], []
        for attack in attacks:
            env, right = attack.environment(), attack.right_code()
            for position, code in enumerate((right, attack.follow_up_code(),
                                             attack.follow_up_code(), right)):
                envs.append(env)
                outputs.append(code)
                owners.append((attack, position))
        later = self.pool_client().score_outputs(envs, outputs, BATCH_SLOTS)
        for (attack, position), result in zip(owners, later, strict=True):
            if position in (1, 2):
                self._expect_zero({"result": result}, f"follow-up run #{position}",
                                  problems[attack.name])
        for attack in attacks:
            self._clean(start, attack)

    # -- checks ------------------------------------------------------------------------------

    def _run_into(self, env: Any, code: str, out: dict[str, Any]) -> None:
        try:
            out["result"] = self.client.run(env, code)
        except Exception as exc:  # a raise is itself a finding: recorded, not propagated
            out["error"] = f"DeepGym.run raised {type(exc).__name__}: {str(exc)[:300]}"
            out["raised"] = exc

    @classmethod
    def _expect_end(cls, attack: Attack, out: dict[str, Any], who: str,
                    problems: list[str]) -> None:
        """The attack ended as it must (``attack.expect``)."""
        if attack.expect == "zero":
            cls._expect_zero(out, who, problems)
            return
        raised, result = out.get("raised"), out.get("result")
        if raised is not None:
            ok = isinstance(raised, VerifierError) and "load_solution" in str(raised)
            got = out["error"]
        else:
            ok = (result is not None and not result.has_verdict and not result.passed
                  and result.error_type == "verifier_error" and result.score == 0.0
                  and "load_solution" in str(result.details))
            got = describe(result)
        if not ok:
            problems.append(f"{who}: expected the verifier's error naming load_solution, "
                            f"got {got}")

    @staticmethod
    def _expect_zero(out: dict[str, Any], who: str, problems: list[str]) -> None:
        if "error" in out:
            problems.append(f"{who}: {out['error']} (expected a judged 0)")
            return
        result = out.get("result")
        if result is None or not result.has_verdict or result.score != 0.0 or result.passed:
            problems.append(f"{who}: expected a judged 0, got {describe(result)}")

    @staticmethod
    def _expect_right(out: dict[str, Any], who: str, problems: list[str]) -> None:
        if "error" in out:
            problems.append(f"{who}: {out['error']} (expected 1.0)")
            return
        result = out.get("result")
        if result is None or not result.has_verdict or result.score != 1.0:
            problems.append(f"{who}: expected 1.0, got {describe(result)}")

    def _ledger_size(self) -> int:
        try:
            return os.path.getsize(self.ledger)
        except FileNotFoundError:
            return 0

    def _host(self, start: int, attack: Attack, when: str,
              entries: list[dict[str, Any]] | None = None) -> list[str]:
        entries = read_ledger(self.ledger, start) if entries is None else entries
        problems = [f"{when}: {p}" for p in self.case.leftovers(entries)]
        for path in attack.drop_paths():
            if os.path.lexists(path):
                problems.append(f"{when}: the attack created {path} on the host")
        return problems

    def _own_entries(self, start: int, attack: Attack) -> list[dict[str, Any]]:
        """The ledger's sandboxes since ``start`` that ran this attack's environment."""
        name = attack.environment().name
        return [e for e in read_ledger(self.ledger, start) if e.get("env") == name]

    def _host_of(self, start: int, attack: Attack, when: str) -> list[str]:
        return self._host(start, attack, when, self._own_entries(start, attack))

    def _clean(self, start: int, attack: Attack,
               entries: list[dict[str, Any]] | None = None) -> None:
        """Remove what the attack's runs left (``entries``: default, its own since ``start``)."""
        self.case.clean_up(self._own_entries(start, attack) if entries is None else entries)
        for path in attack.drop_paths():
            if os.path.lexists(path):
                remove_tree(path)

    def _finish(self, start: int, attack: Attack, problems: list[str]) -> None:
        self._clean(start, attack, read_ledger(self.ledger, start))
        assert not problems, f"attack {attack.name!r} succeeded:\n  " + "\n  ".join(problems)
