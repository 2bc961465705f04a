"""A client of the HTTP service sends what is not an action: bodies that are not JSON or not
UTF-8, JSON of the wrong shape, nested past the parser's depth, actions of the wrong types,
missing or extra fields, paths out of the work directory, a lone surrogate, a NUL byte; and
episodes of what is not an environment this service opens (a number, a list, a folder of the
server's by its path). Each is a 400 naming what was wrong, never a 500 or a traceback, and
the episode goes on: none of them was a step."""

import json

from service_attacks import PROVIDER, refused, service_attack, service_fixture  # noqa: F401 - RELIABILITY.md, fixture

TAGS = ("http", "sessions", "plain-data")

NOT_ACTIONS = [  # (body as sent, a word the error names)
    (b"{not json", "JSON"), (b"\xff\xfe\x00{", "JSON"), (b"[" * 100_000, "JSON"),
    (b"[1, 2]", "object"), (b"null", "object"), (b'"bash"', "object"), (b"7", "object"),
    (json.dumps({"action_type": 5}), "action_type"),
    (json.dumps({"action_type": "jump"}), "action_type"),
    (json.dumps({"content": "ls"}), "action_type"),
    (json.dumps({"action_type": "bash", "content": 5}), "content"),
    (json.dumps({"action_type": "bash", "content": ["ls"]}), "content"),
    (json.dumps({"action_type": "bash", "content": "ls", "extra": 1}), "extra"),
    (json.dumps({"action_type": "bash", "content": "ls", "path": "a"}), "path"),
    (json.dumps({"action_type": "write_file", "content": "x"}), "path"),
    (json.dumps({"action_type": "write_file", "path": "../x", "content": "x"}), "path"),
    (json.dumps({"action_type": "write_file", "path": "/etc/x", "content": "x"}), "path"),
    (json.dumps({"action_type": "bash", "content": "echo \ud800"}), "surrogate"),
]
NOT_ENVIRONMENTS = [  # (body of POST /v1/sessions, a word the error names)
    ({"env_name": 5}, "env_name"), ({"env_name": ["sales_report"]}, "env_name"),
    ({"env_name": "coin_change"}, "multi-turn"), ({"env_name": "no_such_env"}, "no_such_env"),
    ({"env_name": "/etc"}, "/etc"), ({"env_name": "../../etc"}, "../../etc"),
    ({"env_name": "~"}, "~"), ({"env_name": "sales_report", "extra": 1}, "extra"),
]


@service_attack
def test_what_is_not_an_action_is_a_400_and_no_step(service):
    from deepgym_ray.envs.registry import MULTI_TURN_DIR

    sid = service.open()
    for raw, named in NOT_ACTIONS:
        raw = raw if isinstance(raw, bytes) else raw.encode()
        status, answer = service.post(f"/v1/sessions/{sid}/step", raw=raw)
        refused(status, answer, 400, named)
    status, answer = service.post("/score", raw=b"[" * 100_000)
    refused(status, answer, 400, "JSON")
    # A folder of the server's that is an environment: opened only by name, never by path.
    folder = str(MULTI_TURN_DIR / "sales_report")
    for body, named in [*NOT_ENVIRONMENTS, ({"env_name": folder}, folder)]:
        status, answer = service.post("/v1/sessions", body)
        refused(status, answer, 400, named)
    status, answer = service.step(sid, "echo first")
    assert status == 200 and answer["observation"]["step"] == 1, answer
