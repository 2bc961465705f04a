"""A Python traceback in a run's details, told the way a person reads it.

A verifier's or a solution's error reaches the details as Python prints it: the frames of the
judge's own files first, the exception on the last line, where a one-line cause cuts it off.
:func:`readable_error` puts the exception first, then only the frames of the user's own files
(the verifier, the solution, a suite's test), by file name and line, never the judge's files or
the standard library's; text without a traceback is left as it is.

Example:
    >>> print(readable_error('''VerifierError: could not judge: Traceback (most recent call last):
    ...   File "/x/deepgym_runner.py", line 3, in _verify
    ...     run()
    ...   File "/tmp/run-1/verifier.py", line 6, in verify
    ...     return sol.f()
    ... TimeoutError: the solution did not answer within 5s'''))
    VerifierError: could not judge: TimeoutError: the solution did not answer within 5s
      at verifier.py line 6, in verify: return sol.f()
"""

from __future__ import annotations

import re

__all__ = ["readable_error"]

_START = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+)(?:, in (?P<func>.+))?$')
_INTERNAL = re.compile(r"(?:^|/)deepgym_\w+\.py$|/lib/python3[\d.]*/|^<frozen ")
_CARETS = re.compile(r"^\s*[~^]+\s*$")


def readable_error(text: str) -> str:
    """``text`` with its (last) traceback as the exception, then the user's frames."""
    at = text.rfind(_START)
    if at < 0:
        return text
    head = text[:text.find(_START)].rstrip()
    frames: list[tuple[str, str, str | None, str]] = []  # file, line, function, code
    exception: list[str] = []
    for line in text[at + len(_START):].splitlines():
        frame = _FRAME.match(line)
        if frame is not None and not exception:
            frames.append((frame["file"], frame["line"], frame["func"], ""))
        elif exception or (line and not line[0].isspace()):
            exception.append(line)
        elif frames and not frames[-1][3] and line.strip() and not _CARETS.match(line):
            frames[-1] = (*frames[-1][:3], line.strip())
    message = "\n".join(exception).strip() or "an error (no message)"
    first = f"{head} {message}" if head else message
    shown = [_where(*frame) for frame in frames if not _INTERNAL.search(frame[0])]
    return "\n".join([first, *shown])


def _where(path: str, line: str, function: str | None, code: str) -> str:
    name = path.rsplit("/", 1)[-1]
    if name == "<unknown>":  # what ast.parse names a verifier's source it was not told of
        name = "the verifier's source"
    where = f"  at {name} line {line}" + (f", in {function}" if function and
                                          function != "<module>" else "")
    return where + (f": {code}" if code else "")
