"""Text the solution produced, as it reached the runner's process (stdlib only).

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

__all__ = ["BUDGET", "MIN_TEXT", "Produced", "watch"]

MIN_TEXT = 8  # shorter text cannot reach the runner's result channel
BUDGET = 16 << 20  # characters of noted text; past it any compiled text counts


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
