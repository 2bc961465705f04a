"""A run the machine's load starved (the runner's ``starved`` note) is run again on the host,
in a fresh sandbox, a bounded number of times; the last try's verdict stands."""

from __future__ import annotations

import logging

import pytest
from helpers.pool_providers import ScriptedProvider, script

from deepgym_ray.exceptions import ProviderConnectionError
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.base import CommandResult
from deepgym_ray.scoring import judging

ENV = Environment(name="starved", verifier_code="return 1.0", timeout=5, case_timeout=2)


class CountingProvider(ScriptedProvider):
    """The scripted provider, counting the sandboxes the judge made."""

    def __init__(self, marker_dir):
        super().__init__(marker_dir)
        self.created = 0

    def create(self, env):
        self.created += 1
        return super().create(env)


@pytest.fixture
def provider(tmp_path, monkeypatch):
    monkeypatch.setattr(judging, "STARVED_BACKOFF", 0.0)
    return CountingProvider(tmp_path)


def test_a_right_answer_starved_once_is_run_again_and_passes(provider, caplog):
    with caplog.at_level(logging.INFO, logger=judging.__name__):
        result = judging.judge(provider, ENV, script(score=1.0, starved="once:a"))
    assert result.has_verdict and result.score == 1.0 and result.passed
    assert provider.created == 2  # a fresh sandbox for the second try
    assert "starved the run" in caplog.text and "running it again (1 of 2)" in caplog.text


def test_an_answer_starved_every_time_keeps_its_zero(provider):
    result = judging.judge(provider, ENV, script(score=1.0, starved="always"))
    assert provider.created == judging.STARVED_RETRIES + 1
    assert result.has_verdict and result.score == 0.0 and not result.passed
    assert result.error_type == "solution_timeout"


def test_a_zero_without_the_note_is_not_run_again(provider):
    result = judging.judge(provider, ENV, script(score=0.0))
    assert provider.created == 1 and result.has_verdict and result.score == 0.0


class FailingAgainProvider(CountingProvider):
    """Starved on the first try; every later try judges nothing, as ``how`` says."""

    def __init__(self, marker_dir, how):
        super().__init__(marker_dir)
        self.how = how

    def run(self, sandbox, command, **kwargs):
        if self.created == 1:
            return super().run(sandbox, command, **kwargs)
        if self.how == "raises":
            raise ProviderConnectionError("scripted provider: connection reset")
        return CommandResult(exit_code=None, stdout=b"", timed_out=True)  # nothing in play


@pytest.mark.parametrize("how", ["raises", "times-out-before-play"])
def test_a_try_again_that_judges_nothing_leaves_the_judged_zero(tmp_path, monkeypatch, how):
    # A wrong answer starved once must not swap its 0 for a later try's lack of a verdict.
    monkeypatch.setattr(judging, "STARVED_BACKOFF", 0.0)
    provider = FailingAgainProvider(tmp_path, how)
    result = judging.judge(provider, ENV, script(score=1.0, starved="always"))
    assert provider.created == 2
    assert result.has_verdict and result.score == 0.0
    assert result.error_type == "solution_timeout"
