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
    return (f"score={result.score} has_verdict={result.has_verdict} "
            f"error_type={result.error_type} details={str(result.details)[:300]!r}")


class Battery:
    """One provider's client, pool and host checks, shared by every attack of a session."""

    def __init__(self, case: ProviderCase, ledger_dir: str) -> None:
        self.case = case
        self.ledger = os.path.join(ledger_dir, f"ledger-{case.label}.jsonl")
        self.factory = case.factory(self.ledger)
        self.client = DeepGym(mode=case.mode, backend="threads", provider=self.factory)
        self._pool_client: DeepGym | None = None

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
        if self._pool_client is not None:
            from deepgym_ray.pool import get_pool

            get_pool(self._pool_client).shutdown()
        self.client.close()

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
        env = attack.environment()
        problems: list[str] = []
        start = self._ledger_size()
        right, right_env = attack.right_code(), attack.environment(for_right=True)
        outputs = [right, attack.code(), right, right]
        envs = [right_env, env, right_env, right_env]
        results = self.pool_client().eval(envs, outputs, max_parallel=BATCH_SLOTS).results
        if len(results) != len(outputs):
            problems.append(f"{len(results)} results for {len(outputs)} inputs")
        for i, result in enumerate(results):
            who = "the attack" if i == 1 else f"right answer #{i}"
            if i == 1:
                self._expect_end(attack, {"result": result}, who, problems)
            else:
                self._expect_right({"result": result}, who, problems)
        problems += self._host(start, attack, "after the batch")
        follow_up = attack.follow_up_code()
        if follow_up is not None:
            later = self.pool_client().run_batch(env, [right, follow_up, follow_up, right],
                                                 max_parallel=BATCH_SLOTS).results
            for i in (1, 2):
                self._expect_zero({"result": later[i]}, f"follow-up run #{i}", problems)
        self._finish(start, attack, problems)

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

    def _host(self, start: int, attack: Attack, when: str) -> list[str]:
        entries = read_ledger(self.ledger, start)
        problems = [f"{when}: {p}" for p in self.case.leftovers(entries)]
        for path in attack.drop_paths():
            if os.path.lexists(path):
                problems.append(f"{when}: the attack created {path} on the host")
        return problems

    def _finish(self, start: int, attack: Attack, problems: list[str]) -> None:
        self.case.clean_up(read_ledger(self.ledger, start))
        for path in attack.drop_paths():
            if os.path.lexists(path):
                remove_tree(path)
        assert not problems, f"attack {attack.name!r} succeeded:\n  " + "\n  ".join(problems)
