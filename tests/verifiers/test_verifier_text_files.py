"""Environment files that are not UTF-8, or start with a UTF-8 byte order mark.

Loading a folder whose ``verifier.py`` (or ``task.md``, ``metadata.json``, ...) is not UTF-8
raises ValueError naming the file and the bad byte. An Environment built in memory meets the
same problem at run time: ``run`` raises VerifierError naming the file, a batch records
``verifier_error`` (no verdict). A BOM at the start of any of these files is dropped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from verifier_shapes import GOOD, expect, judged, raises

from deepgym_ray.exceptions import VerifierError
from deepgym_ray.models import Environment
from deepgym_ray.suites import load_environment

BOM = b"\xef\xbb\xbf"
VERIFIER = ("from deepgym_solution import load_solution\n"
            "def verify(solution_path, test_cases_path=None):\n"
            "    import json\n"
            "    cases = json.load(open(test_cases_path))\n"
            "    return 1.0 if load_solution(solution_path).f() == cases[0] else 0.0\n")


def write_folder(folder: Path, **overrides: bytes) -> Path:
    files = {"verifier.py": VERIFIER.encode(), "task.md": b"Write f().\n",
             "metadata.json": json.dumps({"name": "textfiles", "timeout": 20}).encode(),
             "reference_solution.py": GOOD.encode(), "test_cases.json": b"[1]"}
    files.update(overrides)
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


@pytest.mark.parametrize("name", ["verifier.py", "task.md", "metadata.json",
                                  "reference_solution.py", "test_cases.json"])
def test_a_file_that_is_not_utf8_is_named(tmp_path, name):
    folder = write_folder(tmp_path / "env", **{name: b"# caf\xe9 \xff\n" + b"x = 1\n"})
    with pytest.raises(ValueError) as info:
        load_environment(folder)
    message = str(info.value)
    assert str(folder / name) in message and "UTF-8" in message and "0xe9" in message
    assert "line 1" in message


def test_bom_in_every_file_is_dropped(tmp_path, local_client):
    folder = write_folder(tmp_path / "env", **{
        "verifier.py": BOM + VERIFIER.encode(), "task.md": BOM + b"Write f().\n",
        "metadata.json": BOM + json.dumps({"name": "bom", "timeout": 20}).encode(),
        "reference_solution.py": BOM + GOOD.encode(), "test_cases.json": BOM + b"[1]"})
    env = load_environment(folder)
    assert env.task == "Write f().\n" and env.timeout == 20 and env.test_cases == [1]
    assert not env.verifier_source().startswith("\ufeff")
    expect(local_client.run(env, env.reference_solution), score=1.0, passed=True,
           has_verdict=True, error_type=None)


def test_in_memory_environment_with_a_non_utf8_verifier_path(tmp_path, local_client):
    path = tmp_path / "verifier.py"
    path.write_bytes(b"def verify(p, t=None):\n    return 1.0  # \xff\xfe\n")
    env = Environment(name="bytes", verifier_path=path, timeout=20)
    error = raises(local_client, env, VerifierError)
    assert str(path) in str(error) and "UTF-8" in str(error) and "line 2" in str(error)
    result = judged(local_client, env)
    expect(result, score=0.0, passed=False, has_verdict=False, error_type="verifier_error")
    assert str(path) in result.details
    batch = local_client.run_batch(env, [GOOD, GOOD])
    assert [r.error_type for r in batch.results] == ["verifier_error"] * 2
    assert batch.no_verdict == 2


def test_in_memory_verifier_path_with_a_bom(tmp_path, local_client):
    path = tmp_path / "verifier.py"
    path.write_bytes(BOM + b"def verify(p, t=None):\n    return 1.0\n")
    env = Environment(name="bom", verifier_path=path, timeout=20)
    expect(local_client.run(env, GOOD), score=1.0, passed=True, has_verdict=True,
           error_type=None)


def test_in_memory_verifier_code_that_is_not_text(local_client):
    env = Environment(name="surrogate", verifier_code="def verify(p, t=None):\n    return 1.0"
                      "  # \ud800\n", timeout=20)
    error = raises(local_client, env, VerifierError)
    assert "verifier.py" in str(error) and "surrogate" in str(error)
    expect(judged(local_client, env), score=0.0, passed=False, has_verdict=False,
           error_type="verifier_error")


@pytest.mark.slow
def test_in_memory_support_file_that_is_not_text(local_client):
    env = Environment(name="support", verifier_code="def verify(p, t=None):\n    return 1.0\n",
                      support_files={"data/x.txt": "a\udcffb"}, timeout=20)
    error = raises(local_client, env, VerifierError)
    assert "data/x.txt" in str(error)
    expect(judged(local_client, env), score=0.0, passed=False, has_verdict=False,
           error_type="verifier_error")
