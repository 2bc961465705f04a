"""The verifier's captured stdout: bounded whatever is printed, every character counted, and
the result line found (or refused) by the rules in ``deepgym_result.Capture``."""

from __future__ import annotations

import pytest

from deepgym_ray.judge import deepgym_result
from deepgym_ray.judge.deepgym_result import CAPTURE_HEAD, CAPTURE_TAIL, Capture, VerifierFailed


def kept(capture: Capture) -> int:
    return capture.head_size + capture.blocks_size + capture.partial_size


def test_many_small_prints_stay_bounded_and_counted():
    capture = Capture()
    for i in range(200_000):
        print("progress", i, "x" * 60, file=capture)
    print('{"score": 0.5}', file=capture)
    assert capture.size > 14_000_000
    assert kept(capture) <= CAPTURE_HEAD + CAPTURE_TAIL + 100
    assert capture.printed_result() == {"score": 0.5}


def test_one_write_of_many_lines_is_kept_as_its_tail():
    capture = Capture()
    capture.write("line\n" * 4_000_000 + '{"score": 1}\nlog after the result\n')
    assert len(capture.blocks) == 1 and capture.blocks_size <= CAPTURE_TAIL
    assert capture.blocks[0].startswith("line\n")  # cut at a line boundary
    assert capture.printed_result() == {"score": 1}


def test_a_huge_last_line_is_kept_whole():
    capture = Capture()
    capture.write('{"score": 0}\n')
    capture.write('{"score": 1, "details": "' + "d" * (CAPTURE_TAIL + 5) + '"}')
    capture.write("\n")
    assert capture.printed_result()["score"] == 1


def test_an_earlier_result_is_never_taken_for_a_lost_last_line(monkeypatch):
    monkeypatch.setattr(deepgym_result, "LINE_LIMIT", 1000)
    capture = Capture()
    capture.write('{"score": 1}\n')
    capture.write('{"score": 0, "details": "' + "d" * 2000 + '"}\n')
    with pytest.raises(VerifierFailed, match="longer than"):
        capture.printed_result()


def test_no_result_and_stdout_buffer():
    capture = Capture()
    capture.buffer.write(b"caf\xc3\xa9 \xff\n")
    capture.write("1.0 is not the last line\n")
    assert capture.printed_result() is None
    assert "it printed" in capture.summary() and "caf\u00e9" in capture.summary()
    capture.write("NaN\n")
    value = capture.printed_result()
    assert value != value  # NaN: the host turns it into invalid_score
