"""A client of the HTTP service calls episodes it did not open: ids guessed from its own (same
pool, another random part), its own episode's id sent to the other actor, malformed ids (no
actor part, digits that are not ASCII, an index past the pool, path tricks, control and
non-ASCII characters, thousands of characters). Each call is a 404 or 410 naming the id, never
a 500 or a traceback, and the other client's episode goes on untouched to its right result."""

import uuid

from service_attacks import PROVIDER, judged_right, refused, service_attack, service_fixture  # noqa: F401 - RELIABILITY.md, fixture

TAGS = ("http", "sessions", "neighbours")


@service_attack
def test_ids_of_other_sessions_reach_nothing(service):
    victim = service.open()
    mine = service.open()
    index, _, sid = mine.partition(".")
    pool_part = sid.rpartition("-")[0]
    other_actor = "1" if index == "0" else "0"
    ids = [
        f"{index}.{pool_part}-{uuid.uuid4().hex}",  # guessed: the pool's name, a new uuid
        f"{other_actor}.{sid}",  # its own id, on the other actor
        f"9999.{sid}", "99999999999999999999.x", "-1.x", "x.y", "0.", "x", ".x",
        f"\u00b2.{sid}", f"\u0663.{sid}",  # digits Python calls digits, not ASCII ones
        "0.%00", "0.%0a", "0.caf\u00e9-\u4e2d", "0." + "a" * 4000, "0.%2e%2e",
    ]
    for bad in ids:
        for method, path, body in (("POST", f"/v1/sessions/{bad}/step", {"action_type": "done"}),
                                   ("POST", f"/v1/sessions/{bad}/score", None),
                                   ("DELETE", f"/v1/sessions/{bad}", None)):
            status, answer = service.call(method, path, body)
            assert status in (404, 410), (bad, method, path, status, answer)
            refused(status, answer, status, "no session")
            if status == 410:  # the actor holds no such episode: no verdict, said plainly
                assert answer["result"]["has_verdict"] is False, answer
    # The episodes the ids were taken from are whole: their first step is step 1.
    for sid in (victim, mine):
        status, answer = service.step(sid, "echo still mine")
        assert status == 200 and answer["observation"]["step"] == 1, answer
    judged_right(service.right_episode(victim))
