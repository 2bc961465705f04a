"""Turn one completion, as a trainer passes it, into the code that runs.

A completion is a string, or a conversation: a list of message dicts (``role``, ``content``) as
TRL passes them, where ``content`` may be a string, None (a tool-calling turn), or a list of
parts (``{"type": "text", "text": ...}``). The answer is the last assistant turn; the code is the
last fenced block of the answer (``` or ~~~, with or without a language tag), or the whole answer
when it has no fenced block.

Rules for the edge cases:
- A fence is a line that starts (after indentation) with three or more backticks or tildes. It
  closes on a line of the same character, at least as long, with nothing else on it or with
  prose after a space (models close a block and go on: ```` ``` then ```python ````, and that
  prose may open the next block, so several blocks on one line of prose give the last). A line with
  backticks inside code (``x = "```"``) is not a fence, and an opening backtick fence whose info
  string holds a backtick is inline code, not a fence.
- A fence may also open at the end of a line of prose (``Here it is: ```python``) when a
  language follows it or the prose ends with a colon, and the prose holds no fence itself.
- An unterminated fence runs to the end of the answer: a completion cut off at the length limit
  runs what it wrote.
- Content indented with its fence loses that indentation.
- A model's special tokens around the answer are not part of it. Text decoded with
  ``skip_special_tokens=False`` (OpenRLHF, and many rollout loops) ends in the end-of-turn
  token, often right after the closing fence (```` ```<|im_end|> ````): a run of special
  tokens at either end of the answer is dropped, and a closing fence may be followed by special
  tokens on its line. Which text is a special token: :data:`SPECIAL_TOKEN_PATTERNS` (the
  common chat templates' forms), plus any literal ``special_tokens`` given (a tokenizer's own
  list, as the reward service takes with ``--tokenizer``).
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
from functools import lru_cache
from typing import Any

__all__ = [
    "SPECIAL_TOKEN_PATTERNS",
    "answer_text",
    "check_completion",
    "check_completions",
    "completion_to_code",
    "extract_code",
    "strip_special_tokens",
]

# The special tokens of the common chat templates, as regular expressions: ChatML, Llama 3,
# Phi and GPT-style ``<|...|>`` (``<|im_end|>``, ``<|eot_id|>``, ``<|endoftext|>``, ``<|end|>``),
# DeepSeek's full-width ``<｜end▁of▁sentence｜>``, Llama 2 / Mistral ``</s>``, Gemma
# ``<end_of_turn>`` and ``<eos>``, and ``<pad>``. Only a run of them at either end of an answer,
# or after a closing fence, is dropped: the same text inside the code is left alone.
SPECIAL_TOKEN_PATTERNS: tuple[str, ...] = (
    r"<\|[A-Za-z0-9_.:/-]{1,40}\|>",
    r"<｜[^｜<>\s]{1,40}｜>",
    r"</s>",
    r"<s>",
    r"<eos>",
    r"<bos>",
    r"<pad>",
    r"<end_of_turn>",
    r"<start_of_turn>",
)
_DEFAULT_SPECIAL = "|".join(f"(?:{p})" for p in SPECIAL_TOKEN_PATTERNS)

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


# The longest text one of SPECIAL_TOKEN_PATTERNS matches ("<|" + 40 characters + "|>").
_LONGEST_DEFAULT = 44


@lru_cache(maxsize=64)
def _special_run(tokens: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str], int]:
    """A pattern for a run of special tokens (and whitespace) at the start, one for a single
    token at the end, and the longest text a token can be."""
    literal = "|".join(re.escape(t) for t in sorted(set(tokens), key=len, reverse=True) if t)
    one = _DEFAULT_SPECIAL + (f"|{literal}" if literal else "")
    longest = max([_LONGEST_DEFAULT, *(len(t) for t in tokens)])
    return re.compile(rf"\A(?:\s*(?:{one}))+"), re.compile(rf"(?:{one})\Z"), longest


def _strip_end_run(text: str, one_at_end: re.Pattern[str], longest: int) -> str:
    """``text`` without the run of special tokens (and the whitespace between and after them)
    at its end, taken token by token from the end, each looked for only in the last
    ``longest`` characters: linear in the text. (One search for the whole run took time
    quadratic in a run that stops short of the end: half a megabyte of ``<|a|>`` before a
    last ``>`` held its caller for hours.)"""
    cut = end = len(text)
    while True:
        while end and text[end - 1].isspace():  # what \s matches
            end -= 1
        match = one_at_end.search(text, max(0, end - longest), end)
        if match is None:
            return text[:cut]
        cut = end = match.start()


def strip_special_tokens(text: str, special_tokens: Sequence[str] = ()) -> str:
    """``text`` without a run of special tokens at its start or end (see the module docstring).

    Example:
        >>> strip_special_tokens("```python\\nx = 1\\n```<|im_end|><|endoftext|>")
        '```python\\nx = 1\\n```'
    """
    # (Cheap checks first: this runs on every completion, nearly always with no token.)
    if special_tokens or text.rstrip().endswith(">"):
        _, one_at_end, longest = _special_run(tuple(special_tokens))
        text = _strip_end_run(text, one_at_end, longest)
    if special_tokens or text.lstrip().startswith("<"):
        text = _special_run(tuple(special_tokens))[0].sub("", text, count=1)
    return text


def _closing(line: str, char: str, length: int, special_tokens: tuple[str, ...]) -> str | None:
    """None if ``line`` does not close the block; else the prose after the closing fence
    ("" for a fence alone). Models close a block and go on on the same line ("``` and then
    ```python"), so a fence followed by a space and text closes too (unlike CommonMark);
    "```python" inside a block (a docstring's example) does not."""
    stripped = line.strip()
    if "<" in stripped or special_tokens:  # a closing fence followed by the end-of-turn token
        stripped = strip_special_tokens(stripped, special_tokens).strip()
    fence = len(stripped) - len(stripped.lstrip(char))
    if fence < length:
        return None
    rest = stripped[fence:]
    if not rest:
        return ""
    return rest.strip() if rest[0] in " \t" else None


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


def extract_code(text: str, special_tokens: Sequence[str] = (),
                 languages: Sequence[str] = ()) -> str:
    """The last fenced block of ``text``, or ``text`` itself when it has no fenced block
    (either way without a run of special tokens at its ends, see the module docstring).
    With ``languages`` (``("diff", "patch")``), the last block whose info string names one of
    them wins over a later block of another language."""
    special_tokens = tuple(special_tokens)
    text = strip_special_tokens(text, special_tokens)
    lines = text.splitlines(keepends=True)
    last_block: list[str] | None = None
    last_wanted: list[str] | None = None
    wanted = {language.lower() for language in languages}
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
        rest = None
        while i < len(lines):
            rest = _closing(lines[i], char, length, special_tokens)
            if rest is not None:
                break
            block.append(_dedent(lines[i], indent))
            i += 1
        last_block = block
        if wanted and (match["info"].strip().split() or [""])[0].lower() in wanted:
            last_wanted = block
        if rest:  # prose after the closing fence may open the next block
            lines[i] = rest
        else:
            i += 1  # past the closing fence (or the end)
    if last_wanted is not None:
        last_block = last_wanted
    if last_block is None:
        return text
    code = "".join(last_block)
    if code and not code.endswith("\n"):
        code += "\n"
    return code


def completion_to_code(completion: Any, index: int | None = None,
                       special_tokens: Sequence[str] = (),
                       languages: Sequence[str] = ()) -> str:
    """The code to run for one completion (see the module docstring for the rules);
    ``special_tokens``: a tokenizer's own special tokens, besides the common ones;
    ``languages``: the fence languages preferred (an environment's ``answer_languages``)."""
    return extract_code(answer_text(completion, index), special_tokens, languages)


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
