"""A client of the HTTP service sends many steps of one episode at once (more than a pool actor
has threads for episodes, and more than the service has threads), and many scores at once.
Another client's episode on the same actor must not wait behind them: its step is answered
before the flood's second step. The flooded episode still has one result, whatever the order:
every score that answered gives the same one, and so does a score afterwards."""

import threading
from concurrent.futures import ThreadPoolExecutor

from service_attacks import PROVIDER, judged_right, service_attack, service_fixture  # noqa: F401 - RELIABILITY.md, fixture

TAGS = ("http", "sessions", "concurrency", "neighbours")
FLOOD = 48  # more than an actor's threads for episodes (32) and the service's own


def _same_actor_pair(service):
    """Two episodes on one actor: the attacker's and the victim's."""
    opened = [service.open()]
    while True:
        sid = service.open()
        match = [o for o in opened if o.partition(".")[0] == sid.partition(".")[0]]
        if match:
            return match[0], sid
        opened.append(sid)


@service_attack
def test_a_flood_of_steps_on_one_episode_holds_up_no_other(service):
    attacker, victim = _same_actor_pair(service)
    arrived = threading.Event()  # the flood has reached the service: an answer came back
    answered: list[int] = []  # the flood's steps that ran (200), in the order they answered

    def flood_step(_):
        status, answer = service.step(attacker, "sleep 1; echo flood")
        if status == 200:
            answered.append(answer["observation"]["step"])
        arrived.set()
        return status, answer

    with ThreadPoolExecutor(FLOOD) as threads:
        flood = threads.map(flood_step, range(FLOOD))
        arrived.wait()
        status, answer = service.step(victim, "echo victim")
        ran_before = len(answered)
        statuses = [status for status, _ in flood]
    assert status == 200 and "victim" in answer["observation"]["content"], answer
    assert ran_before <= 2, f"the victim's step waited for {ran_before} of the flood's steps"
    assert set(statuses) <= {200, 409}, statuses
    assert sorted(answered) == list(range(1, len(answered) + 1)), answered  # one at a time

    with ThreadPoolExecutor(16) as threads:
        scores = list(threads.map(lambda _: service.post(f"/v1/sessions/{attacker}/score"),
                                  range(16)))
    results = [answer for status, answer in scores if status == 200]
    assert results and all(r == results[0] for r in results), scores
    assert all(status in (200, 409) for status, _ in scores), scores
    assert service.post(f"/v1/sessions/{attacker}/score") == (200, results[0])
    judged_right(service.right_episode(victim))
