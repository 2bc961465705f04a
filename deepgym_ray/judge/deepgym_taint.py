"""Recognising the solution's text: its file's, and what it produced (stdlib only).

:class:`SolutionText` finds the solution file's code in source about to be compiled (the guard,
``deepgym_guard``, refuses it); :class:`OwnText` is the verifier's own text, which never counts.

A verifier that evaluates what the solution printed or returned (``eval(out)`` of
``run_solution``'s output, ``exec`` of a returned string) runs the solution's code in the
runner's process as surely as one that runs its file. :func:`watch` notes every string of at
least ``MIN_TEXT`` characters that arrives from a solution process (replies to
``load_solution``'s requests, before decoding; the output ``run_solution`` and error messages
read), and the guard (``deepgym_guard``) refuses compiling text that is such a string, holds
one, or lies within one. Strings the verifier's own source or test cases also hold do not count
(a right answer equal to an expected value the verifier writes into code of its own). Past
``BUDGET`` characters noted, any text compiled here from elsewhere counts (a flood of strings
must not hide one). ``ast.literal_eval`` and ``json.loads`` read values without running them.

Example (what the runner does):
    produced = Produced()
    watch(produced, deepgym_proxy, deepgym_proc)
    produced.holds("__import__('gc')...", own)  # True once a solution sent that text
"""

import json
import re
import sys

__all__ = ["BUDGET", "LONG_LINE", "MIN_TEXT", "OwnText", "Produced", "SolutionText", "as_text",
           "watch"]

MIN_TEXT = 8  # shorter text cannot reach the runner's result channel
BUDGET = 16 << 20  # characters of noted text; past it any compiled text counts
LONG_LINE = 40  # a single solution line this long, found in compiled source, is its code
TEXT_LIMIT = 32 << 20  # characters of the verifier's own texts read for the exclusions
# Lines that say nothing of whose code it is: imports, punctuation, a bare keyword.
_BARE = re.compile(r"(?:(?:import|from)\s[\w.\s,()*]*(?:import\s[\w.\s,()*]*)?|"
                   r"[\W\d_]*|(?:else|try|finally|except|pass|break|continue|return|"
                   r"raise|yield|None|True|False)\W*)\Z")


def as_text(source):
    """Source as compile() got it (str or bytes) as text."""
    if isinstance(source, str):
        return source
    return bytes(source).decode("utf-8", "replace").removeprefix("\ufeff")


def code_lines(text):
    """The code lines of ``text``: stripped, without blank and comment-only lines."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and line[0] != "#":
            out.append(line)
    return out


class SolutionText:
    """What marks compiled source as the solution's: all of its text (line ends and
    indentation aside), two consecutive lines of it, or one line of at least ``LONG_LINE``
    characters; lines that are bare (imports, keywords) or the verifier's own do not count."""

    def __init__(self, text):
        lines = code_lines(text)
        self.raw = text.strip()
        self.whole = "\n".join(lines)
        self.pairs = set(zip(lines, lines[1:], strict=False))
        self.long = {line for line in lines if len(line) >= LONG_LINE}

    @classmethod
    def of_file(cls, path, tree=False):
        """The solution file's (``tree``: as ``ast.unparse`` writes its tree); None if it
        cannot be read or parsed."""
        try:
            with open(path, "rb") as f:
                text = as_text(f.read())
            if tree:
                ast = sys.modules["ast"]
                text = ast.unparse(ast.parse(text))
            return cls(text)
        except (OSError, SyntaxError, ValueError, RecursionError):
            return None

    def found_in(self, text, own):
        """Does ``text`` hold it? ``own(piece)``: the piece is the verifier's own."""
        if not self.whole:
            return False
        lines = code_lines(text)
        joined = "\n" + "\n".join(lines) + "\n"
        whole = self.whole
        # All of it, unless it is the verifier's own text: stripped of indentation (as
        # ``whole``), or as it is (an answer that is a prompt the verifier embeds, no more).
        if "\n" + whole + "\n" in joined and not _BARE.match(whole) and not own(whole) \
                and not own(self.raw):
            return True
        for pair in zip(lines, lines[1:], strict=False):
            if pair in self.pairs and any(not _BARE.match(line) and not own(line)
                                          for line in pair):
                return True
        return any(line in self.long and not _BARE.match(line) and not own(line)
                   for line in lines)


class OwnText:
    """The verifier's own texts: its files (source, test cases) and the strings of its
    compiled code (``code``), read when first asked; ``own(piece)`` says one holds it."""

    def __init__(self, paths):
        self.paths, self.code, self.texts = paths, None, None

    def __call__(self, piece):
        if self.texts is None:
            texts = []
            for path in self.paths:
                try:
                    with open(path, encoding="utf-8", errors="replace") as f:
                        texts.append(f.read(TEXT_LIMIT))
                except (OSError, TypeError):
                    pass
            codes = [self.code] if self.code is not None else []
            while codes:
                for const in codes.pop().co_consts:
                    if isinstance(const, str) and len(const) >= MIN_TEXT:
                        texts.append(const)
                    elif hasattr(const, "co_consts"):
                        codes.append(const)
            self.texts = texts
        escaped = json.dumps(piece, ensure_ascii=False)[1:-1]  # as a JSON file holds it
        return any(piece in text or escaped in text for text in self.texts)


class Produced:
    """The strings solution processes sent to this process."""

    def __init__(self):
        self.texts, self.size, self.overflow = set(), 0, False

    def add(self, text):
        if type(text) is not str or len(text) < MIN_TEXT or text in self.texts:
            return
        if self.size + len(text) > BUDGET:
            self.overflow = True
            return
        self.texts.add(text)
        self.size += len(text)

    def add_tree(self, value):
        """Note every string in a decoded JSON value (lists and dicts of plain data)."""
        stack = [value]
        while stack:
            item = stack.pop()
            kind = type(item)
            if kind is str:
                self.add(item)
            elif kind is list:
                stack.extend(item)
            elif kind is dict:
                stack.extend(item.keys())
                stack.extend(item.values())

    def holds(self, text, own):
        """Is ``text`` (about to be compiled) one of the strings, or does it hold one or lie
        within one? ``own(piece)`` says a piece is the verifier's own (then it does not count)."""
        stripped = text.strip()
        if len(stripped) < MIN_TEXT or not (self.texts or self.overflow):
            return False
        if own(stripped):  # the verifier's own text, whoever sent it
            return False
        return self.overflow or stripped in self.texts or any(
            (sent in text or stripped in sent) and not own(sent) for sent in self.texts)


def watch(produced, proxy, proc):
    """Note what arrives through ``proxy.Connection._exchange`` (a solution process's replies)
    and ``proc.Drain.text`` (its output and error streams, read)."""
    exchange = proxy.Connection._exchange

    def _exchange(self, message):
        reply = exchange(self, message)
        produced.add_tree(reply)
        return reply

    proxy.Connection._exchange = _exchange
    text = proc.Drain.text

    def _text(self):
        out = text(self)
        produced.add(out)
        return out

    proc.Drain.text = _text
