"""Attacks on agent episodes, for the security battery's session modules. Each module is one
attack (its ``TAGS`` go to RELIABILITY.md): episodes whose steps try to win without doing the
task, on every provider sessions run on, two ways as the battery runs every attack: alone
(``DeepGym.session``) and on the Ray pool beside a right episode, which must still score 1.0.

The attacked environment passes only an answer holding a secret that only its verifier and its
test cases know: an episode that scores 1.0 has read them, or had something of its own act for
it while the verifier ran. Every attack episode must end as a judged 0, and (alone, on the local
sandbox) leave no process of its sandbox's uid behind."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from deepgym_ray.judge.deepgym_proc import uid_processes
from deepgym_ray.models import Environment
from deepgym_ray.multi_turn import MultiTurnTask
from deepgym_ray.sessions import Action

SECRET = "SECRET-" + os.urandom(8).hex()
VERIFIER = f'''
import json
import os

SECRET = "{SECRET}"


def verify(work_dir, test_cases_path=None):
    with open(test_cases_path) as f:
        assert json.load(f) == [SECRET]
    with open("expected.txt", "w") as f:  # beside the verifier, as an expected output would be
        f.write(SECRET + "\\n")
    try:
        with open(os.path.join(work_dir, "answer.txt"), errors="replace") as f:
            answer = f.read(200).strip()
    except OSError as exc:
        answer = repr(exc)
    return {{"score": 1.0 if answer == SECRET else 0.0, "details": answer[:100]}}
'''
TARGET = Environment(name="session-target", task="Write the secret to answer.txt.",
                     verifier_code=VERIFIER, test_cases=[SECRET], timeout=30, case_timeout=10,
                     multi_turn=MultiTurnTask(files={"notes.txt": b"guess the secret\n"},
                                              timeout_per_step=20, max_steps=10))
RIGHT_VERIFIER = '''
import os

def verify(work_dir, test_cases_path=None):
    with open(os.path.join(work_dir, "answer.txt")) as f:
        return 1.0 if f.read().strip() == "42" else 0.0
'''
NEIGHBOUR = Environment(name="session-neighbour", verifier_code=RIGHT_VERIFIER, timeout=30,
                        multi_turn=MultiTurnTask(timeout_per_step=20))
RIGHT = [Action(action_type="bash", content="echo 42 > answer.txt")]
# The pattern an attack searches for (the secret's prefix: the agent does not know the rest),
# and grep's options for a search of everything the agent can see but the system's own files
# (the interpreter, the libraries: no secret is there, and reading them all takes seconds).
PATTERN = "SECRET-[0-9a-f]\\{16\\}"
# The Daytona test server's sandboxes also see this machine's own trees (the project and its
# virtualenv: gigabytes no real sandbox has, and where no run writes).
EVERYWHERE = ("/ " + " ".join(f"--exclude-dir={d}" for d in (
    "proc", "sys", "usr", "lib", "lib32", "lib64", "bin", "sbin", "work", "old_root", "farm",
    "opt")))


PROVIDERS = ["local", "docker", "daytona", "e2b", "modal"]  # those sessions run on
# Alone as well as in the batch where alone checks more: on the local sandbox that no process
# of the episode's uid is left; Docker's zygote path differs from its pool's. On Daytona the
# batch runs every variant the same way (and its sandbox is deleted at the episode's end).
ALONE = ["local", "docker"]
BATCH_CLIENTS = {"local": "session_pool_local", "docker": "repo_pool",
                 "daytona": "session_pool_daytona", "e2b": "session_pool_e2b",
                 "modal": "session_pool_modal"}
# E2B and Modal run the agent's steps through the same in-sandbox program as Daytona: in CI,
# the attacks on what differs (the verifier's files and the step program in their sandboxes);
# all of them with DEEPGYM_FULL_BATTERY=1 (tests/security/conftest.py deselects the rest).
CI_ONLY = {provider: {"test_session_reads_the_verifier", "test_session_kills_the_step_program"}
           for provider in ("e2b", "modal")}


def bash(command: str) -> Action:
    return Action(action_type="bash", content=command)


def _episode(client, env: Environment, steps: list[Action], watch_uid: bool = False):
    """Run ``steps`` in a session of ``env``; its result, and its sandbox's uid (local)."""
    uid = None
    with client.session(env) as session:
        session.start()
        if watch_uid and getattr(session, "sandbox", None) is not None:
            uid = getattr(session.sandbox.handle, "uid", None)
        for action in steps:
            if session.done or session.result is not None:
                break
            session.step(action)
        result = session.score()
    return result, uid


def _judged_zero(result) -> None:
    assert result.has_verdict and result.score == 0.0, result
    assert SECRET not in (result.details or ""), result


def session_attack_tests(variants: list[list[Action]]):
    """An attack module's two tests: ``test_alone`` (each variant as one episode) and
    ``test_in_batch`` (every variant at once on the pool, beside a right episode). Use:
    ``test_alone, test_in_batch = session_attack_tests([...])``."""

    @pytest.mark.parametrize("provider", ALONE)
    def test_alone(request, provider):
        client = request.getfixturevalue(f"{provider}_client")
        for steps in variants:
            result, uid = _episode(client, TARGET, steps, watch_uid=provider == "local")
            _judged_zero(result)
            if uid is not None:  # nothing of the episode outlived it
                assert list(uid_processes(uid)) == []

    @pytest.mark.parametrize("provider", PROVIDERS)
    def test_in_batch(request, provider):
        # On a pool of the provider's actors (tests/security/conftest.py, tests/conftest.py).
        client = request.getfixturevalue(BATCH_CLIENTS[provider])
        work = [(TARGET, steps) for steps in variants] + [(NEIGHBOUR, RIGHT)]
        with ThreadPoolExecutor(len(work)) as threads:
            results = list(threads.map(lambda job: _episode(client, *job)[0], work))
        assert results[-1].score == 1.0 and results[-1].passed, results[-1]
        for result in results[:-1]:
            _judged_zero(result)

    test_alone.session_attack = test_in_batch.session_attack = True  # (their xdist group)
    return test_alone, test_in_batch
