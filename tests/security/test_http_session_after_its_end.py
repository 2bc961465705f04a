"""A client of the HTTP service goes on calling an episode after its end: a step after its score,
a second score, a delete after the score and a second delete, a step and a score after a delete.
Every call after the end answers with the episode's one result (the first score's, or the
abandoned one), a step after the end is a 409 naming the end, and no answer holds a traceback."""

from service_attacks import PROVIDER, judged_right, refused, service_attack, service_fixture  # noqa: F401 - RELIABILITY.md, fixture

TAGS = ("http", "sessions")


@service_attack
def test_calls_after_the_end_get_the_one_result(service):
    scored = service.open()
    first = service.right_episode(scored)
    judged_right(first)
    base = f"/v1/sessions/{scored}"
    status, again = service.post(f"{base}/score")
    assert (status, again) == (200, first)
    status, late = service.step(scored, "echo 1 > report.json")
    refused(status, late, 409, "ended")
    assert late["result"] == first, late
    for _ in range(2):
        status, deleted = service.call("DELETE", base)
        assert (status, deleted) == (200, first)
    assert service.post(f"{base}/score") == (200, first)

    dropped = service.open()
    base = f"/v1/sessions/{dropped}"
    status, abandoned = service.call("DELETE", base)
    assert status == 200 and abandoned["error_type"] == "session_abandoned", abandoned
    assert abandoned["has_verdict"] is False and abandoned["reward"] is None, abandoned
    assert service.call("DELETE", base) == (200, abandoned)
    assert service.post(f"{base}/score") == (200, abandoned)
    status, late = service.step(dropped, "ls")
    refused(status, late, 409, "ended")
    assert late["result"] == abandoned, late
