"""A client of the HTTP service sends bodies larger than the service takes: a step whose action is
megabytes, a body whose Content-Length announces gigabytes, a chunked body with no length that
goes on past the limit, the same on /score. Each is a 413 naming the limit, answered from the
announced length or as soon as the limit is passed (the service never holds more than its
limit of one body), and the episode goes on: the refused bodies were no steps of it. Under the
default limit a megabytes action reaches the episode, which refuses it as too long."""

import socket
from urllib.parse import urlsplit

from service_attacks import PROVIDER, refused, service_attack, service_fixture, serving  # noqa: F401 - RELIABILITY.md, fixture

TAGS = ("http", "sessions", "memory")
LIMIT_MB = 1


def _raw_request(url: str, head: str, chunks) -> tuple[int, str]:
    """Send ``head`` then ``chunks`` (stopping when the server closes), then read the answer:
    ``(status, body text)``."""
    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=60) as sock:
        sock.sendall(head.encode())
        try:
            for chunk in chunks:
                sock.sendall(chunk)
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server answered and closed: what it said is still to be read
            pass
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except ConnectionResetError:  # it closed with our body unread: its answer came first
            pass
    status_line, _, rest = answer.decode("utf-8", "replace").partition("\r\n")
    return int(status_line.split()[1]), rest.partition("\r\n\r\n")[2]


@service_attack
def test_bodies_past_the_limit_are_refused_before_they_are_read(session_pool_local, tmp_path):
    with serving(session_pool_local.config, tmp_path, max_body_mb=LIMIT_MB) as service:
        sid = service.open()
        step = f"/v1/sessions/{sid}/step"
        big = {"action_type": "write_file", "path": "big.txt", "content": "x" * (2 << 20)}
        status, answer = service.post(step, big)
        refused(status, answer, 413, f"{LIMIT_MB} MB")
        status, answer = service.post("/score", {"completions": ["x" * (2 << 20)]})
        refused(status, answer, 413, f"{LIMIT_MB} MB")
        path = urlsplit(service.url + step).path
        announced = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {10 << 30}\r\n\r\n")
        status, text = _raw_request(service.url, announced, [b"{" + b" " * 65536] * 4)
        assert status == 413 and f"{LIMIT_MB} MB" in text, (status, text)
        chunked = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n")
        piece = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
        status, text = _raw_request(service.url, chunked, [piece] * 64)  # 4 MB, no end
        assert status == 413 and f"{LIMIT_MB} MB" in text, (status, text)
        status, answer = service.step(sid, "echo after")
        assert status == 200 and answer["observation"]["step"] == 1, answer


@service_attack
def test_a_megabytes_action_under_the_limit_is_the_episodes_to_refuse(service):
    sid = service.open()
    status, answer = service.step(sid, "echo " + "x" * (20 << 20))
    assert status == 200, answer
    assert answer["observation"]["metadata"]["error"] == "action_refused", answer
    assert answer["done"] is False
