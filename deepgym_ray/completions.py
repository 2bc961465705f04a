"""Turn one completion, as a trainer passes it, into the code that runs.

A completion is a string, or a conversation: a list of message dicts (``role``, ``content``) as
TRL passes them, where ``content`` may be a string, None (a tool-calling turn), or a list of
parts (``{"type": "text", "text": ...}``). The answer is the last assistant turn; the code is the
last fenced block of the answer (``` or ~~~, with or without a language tag), or the whole answer
when it has no fenced block.

Rules for the edge cases:
- A fence is a line that starts (after indentation) with three or more backticks or tildes. It
  closes on a line of the same character, at least as long, with nothing else on it. A line with
  backticks inside code (``x = "```"``) is not a fence, and an opening backtick fence whose info
  string holds a backtick is inline code, not a fence.
- A fence may also open at the end of a line of prose (``Here it is: ```python``) when a
  language follows it or the prose ends with a colon, and the prose holds no fence itself.
- An unterminated fence runs to the end of the answer: a completion cut off at the length limit
  runs what it wrote.
- Content indented with its fence loses that indentation.
- Empty or None content gives empty code, which a verifier judges as a wrong answer.
- A conversation with no assistant turn raises ValueError naming the completion's index.

Example:
    >>> completion_to_code("Here:\\n```python\\nprint(1)\\n```\\nDone.")
    'print(1)\\n'
    >>> completion_to_code([{"role": "user", "content": "hi"},
    ...                     {"role": "assistant", "content": "~~~\\nx = 1\\n~~~"}])
    'x = 1\\n'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "answer_text",
    "check_completion",
    "check_completions",
    "completion_to_code",
    "extract_code",
]

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
# A fence opened at the end of a line of prose ("Here it is: ```python"), as models often write.
_FENCE_AFTER_TEXT = re.compile(r"^(?P<text>.*\S)[ \t]*(?P<fence>`{3,}|~{3,})"
                               r"(?P<info>[A-Za-z0-9_+#.-]*)[ \t]*$")


def _content_text(content: Any, index: int | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            # Images, tool calls and other non-text parts carry no code.
        return "".join(texts)
    raise TypeError(f"{_where(index)}message content must be a string, a list of parts or None, "
                    f"got {type(content).__name__}")


def _where(index: int | None) -> str:
    return f"completion {index}: " if index is not None else ""


def answer_text(completion: Any, index: int | None = None) -> str:
    """The text of the answer: the string itself, or the last assistant turn's content.

    ``index`` only serves error messages, so they can say which completion was wrong.
    """
    if isinstance(completion, str):
        return completion
    if completion is None:
        return ""
    if isinstance(completion, Mapping):  # a single message
        completion = [completion]
    if not isinstance(completion, Sequence):
        raise TypeError(f"{_where(index)}a completion must be a string or a list of messages, "
                        f"got {type(completion).__name__}")
    roles = []
    for message in reversed(completion):
        if not isinstance(message, Mapping):
            raise TypeError(f"{_where(index)}each message must be a dict with 'role' and "
                            f"'content', got {type(message).__name__}")
        role = message.get("role")
        roles.append(role)
        if role == "assistant":
            return _content_text(message.get("content"), index)
    seen = ", ".join(sorted({str(r) for r in roles})) or "none"
    label = f"completion {index}" if index is not None else "the completion"
    raise ValueError(f"{label} has no assistant turn (roles seen: {seen})")


def _is_closing(line: str, char: str, length: int) -> bool:
    stripped = line.strip()
    return len(stripped) >= length and set(stripped) == {char}


def _dedent(line: str, indent: int) -> str:
    removable = len(line) - len(line.lstrip(" \t"))
    return line[min(indent, removable):]


def _opening_after_text(line: str) -> re.Match[str] | None:
    match = _FENCE_AFTER_TEXT.match(line)
    if match is None or match["fence"][0] * 3 in match["text"]:
        return None
    if not match["info"] and not match["text"].endswith(":"):
        return None
    return match


def extract_code(text: str) -> str:
    """The last fenced block of ``text``, or ``text`` itself when it has no fenced block."""
    lines = text.splitlines(keepends=True)
    last_block: list[str] | None = None
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i].rstrip("\r\n"))
        if match is None:
            match = _opening_after_text(lines[i].rstrip("\r\n"))
        if match is None or (match["fence"][0] == "`" and "`" in match["info"]):
            i += 1
            continue
        char, length = match["fence"][0], len(match["fence"])
        indent = len(match["indent"]) if "indent" in match.groupdict() else 0
        block: list[str] = []
        i += 1
        while i < len(lines) and not _is_closing(lines[i], char, length):
            block.append(_dedent(lines[i], indent))
            i += 1
        last_block = block
        i += 1  # past the closing fence (or the end)
    if last_block is None:
        return text
    code = "".join(last_block)
    if code and not code.endswith("\n"):
        code += "\n"
    return code


def completion_to_code(completion: Any, index: int | None = None) -> str:
    """The code to run for one completion (see the module docstring for the rules)."""
    return extract_code(answer_text(completion, index))


def check_completion(completion: Any, where: str = "the completion") -> None:
    """Raise TypeError, naming ``where``, when ``completion`` is not a completion at all.

    A string, None and a conversation are completions (None and "" are answers that get
    their judged 0); an int, bytes or an object is a mistake in the caller's code.
    """
    if completion is None or isinstance(completion, str):
        return
    if isinstance(completion, (bytes, bytearray)):
        raise TypeError(f"{where}: a completion must be a string or a list of messages, got "
                        f"{type(completion).__name__} (decode it first)")
    try:
        answer_text(completion)
    except TypeError as exc:
        raise TypeError(f"{where}: {exc}") from None
    except ValueError:  # a well-typed conversation without an answer: judged later, as a 0
        pass


def check_completions(completions: Any, what: str = "completions") -> list[Any]:
    """``completions`` as a list, once every item is a completion (see
    :func:`check_completion`); TypeError up front, naming the first bad index, otherwise.

    A single string or message passed where a list belongs is refused rather than read as a
    sequence of characters (one run per character).
    """
    if isinstance(completions, (str, bytes, bytearray, Mapping)):
        raise TypeError(f"{what} must be a list of completions, got one "
                        f"{type(completions).__name__} (for a single answer, pass [answer])")
    try:
        items = list(completions)
    except TypeError:
        raise TypeError(f"{what} must be a list of completions, got "
                        f"{type(completions).__name__}") from None
    for index, completion in enumerate(items):
        check_completion(completion, f"{what}[{index}]")
    return items
