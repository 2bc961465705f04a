"""What a verifier said, turned into one bounded, plain-JSON result (stdlib only).

Copied into every sandbox; the runner uses it for:
- :class:`Capture`: the verifier's ``sys.stdout``, in memory, linear in what is written and
  bounded (a head, the last complete lines, and the line being written; the rest is counted);
- :meth:`Capture.printed_result`: a script's result, the last JSON line it printed;
- :func:`normalise`: a returned or printed float, bool or dict as the result fields, checked
  and bounded (any problem is :class:`VerifierFailed`, the verifier's own failure); ``passed``
  and ``score`` made to agree (a pass needs full marks: ``passed`` with a lower score is not
  passed, the score kept; full marks with ``passed: false`` score 0), ``details`` saying so;
- :func:`reconcile_exit`: the rule between a verifier's exit code and its result.

Limits on what travels back (the verdict itself is never changed by them): ``details`` keeps
at most ``DETAILS_LIMIT`` characters (its head and tail, saying it was truncated); each case's
id at most ``CASE_ID_LIMIT``, each other value of a case at most ``CASE_TEXT_LIMIT``
characters of JSON, all cases' extra values together at most ``CASES_TEXT_BUDGET`` (further
extra values are dropped); at most ``MAX_CASES`` cases and ``MAX_COMPONENTS`` reward components
(the rest is left out, and ``details`` says so).

Example:
    >>> normalise({"score": 1, "details": "x" * 10})["passed"]
    True
    >>> reconcile_exit({"score": 1.0, "passed": True}, 1)["score"]
    0.0
    >>> normalise({"score": 0.5, "passed": True})["passed"]
    False
"""

import collections
import json
import math

DETAILS_LIMIT = 64 << 10
CASE_ID_LIMIT = 200
CASE_TEXT_LIMIT = 4 << 10
CASES_TEXT_BUDGET = 2 << 20
MAX_CASES = 10000
MAX_COMPONENTS = 1000
CAPTURE_HEAD = 64 << 10  # first characters printed, kept for diagnosis
CAPTURE_TAIL = 8 << 20  # last complete lines printed
LINE_LIMIT = 64 << 20  # the longest printed line still read as a result
FULL_MARKS = 1.0 - 1e-9


class VerifierFailed(Exception):
    """The verifier did not produce a usable result (no verdict, whenever it happened)."""


class _Bytes:
    """``sys.stdout.buffer`` for the capture: bytes written are captured as UTF-8 text."""

    def __init__(self, text):
        self._text = text

    def write(self, data):
        self._text.write(bytes(data).decode("utf-8", "replace"))
        return len(data)

    def flush(self):
        pass


class Capture:
    """A verifier's ``sys.stdout`` kept in memory: each write costs time linear in its size.

    Keeps the first ``CAPTURE_HEAD`` characters, the last complete lines up to
    ``CAPTURE_TAIL`` characters (always the very last one, up to ``LINE_LIMIT``), and the line
    being written; counts everything else. A write of many lines is kept as one block.
    """

    encoding = "utf-8"
    errors = "replace"

    def __init__(self):
        self.head, self.head_size, self.size = [], 0, 0
        self.blocks, self.blocks_size = collections.deque(), 0  # complete lines, "\n"-ended
        self.partial, self.partial_size, self.partial_overflow = [], 0, False
        self.buffer = _Bytes(self)

    def writable(self):
        return True

    def isatty(self):
        return False

    def flush(self):
        pass

    def write(self, text):
        text = str(text)
        self.size += len(text)
        if self.head_size < CAPTURE_HEAD:
            piece = text[: CAPTURE_HEAD - self.head_size]
            self.head.append(piece)
            self.head_size += len(piece)
        first = text.find("\n")
        if first < 0:
            self._extend(text)
            return len(text)
        self._extend(text[:first])
        self._end_line()
        last = text.rfind("\n")
        if last > first:
            self._push(text[first + 1: last + 1])
        self._extend(text[last + 1:])
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def _extend(self, piece):
        if not piece or self.partial_overflow:
            return
        if self.partial_size + len(piece) > LINE_LIMIT:
            self.partial, self.partial_size, self.partial_overflow = [], 0, True
            return
        self.partial.append(piece)
        self.partial_size += len(piece)

    def _end_line(self):
        line = None if self.partial_overflow else "".join(self.partial) + "\n"
        self.partial, self.partial_size, self.partial_overflow = [], 0, False
        self._push(line)

    def _push(self, block):
        """Keep ``block`` (complete lines, or None for a line too long to keep) at the end."""
        if block is not None and len(block) > CAPTURE_TAIL:
            start = block.rfind("\n", 0, len(block) - 1) + 1  # the block's last line
            if len(block) - start > LINE_LIMIT:
                block = None
            else:
                cut = len(block) - CAPTURE_TAIL
                if block[cut - 1] != "\n":
                    cut = block.find("\n", cut) + 1
                block = block[min(cut, start):]
        self.blocks.append(block)
        self.blocks_size += len(block or "")
        while self.blocks_size > CAPTURE_TAIL and len(self.blocks) > 1:
            self.blocks_size -= len(self.blocks.popleft() or "")

    def summary(self):
        """A short description of what was printed, for error messages."""
        head = "".join(self.head)[:300]
        return f"it printed {self.size} characters" + (f", starting {head!r}" if head else "")

    def printed_result(self):
        """The last line that is a JSON object, number or bool; None when there is none.

        Only the lines kept are read, from the end: a line too long to keep ends the search
        (an earlier line is not the result then).
        """
        blocks = list(self.blocks)
        if self.partial or self.partial_overflow:
            blocks.append(None if self.partial_overflow else "".join(self.partial))
        for block in reversed(blocks):
            if block is None:
                raise VerifierFailed(f"the verifier printed a line longer than {LINE_LIMIT} "
                                     "characters; it cannot be read as its result")
            for line in reversed(block.splitlines()):
                value = _json_result(line)
                if value is not None:
                    return value
        return None


def _json_result(line):
    line = line.strip()
    if not line or line[0] not in _JSON_STARTS:  # most printed lines: no parse attempted
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, (dict, int, float, bool)) else None


_JSON_STARTS = frozenset('{-0123456789tfNI')


def exit_status(code):
    """The process exit status Python gives ``sys.exit(code)``: None 0, an int itself, else 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code)
    return 1


def _number(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise VerifierFailed(f"the verifier's {what} is {type(value).__name__}, not a number")
    try:
        return float(value)
    except OverflowError:
        raise VerifierFailed(f"the verifier's {what} is too large for a float") from None


def _flag(value, what):
    """A pass flag: a bool, or the numbers 0 and 1 (scripts printing JSON write those too)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    raise VerifierFailed(f"{what} is {value!r:.100}, not a bool")


def _to_json(value, what):
    try:
        return json.dumps(value, default=repr)
    except (ValueError, TypeError, RecursionError) as exc:
        raise VerifierFailed(f"the verifier's result cannot be encoded ({what}): {exc}") from None
    except Exception as exc:  # a repr() of the verifier's own object raised
        raise VerifierFailed(f"the verifier's result cannot be encoded ({what}): "
                             f"{type(exc).__name__}: {exc}") from None


def cut_text(text, limit, what="details"):
    """``text`` kept to ``limit`` characters (head and tail), saying it was truncated."""
    if len(text) <= limit:
        return text
    half = limit // 2
    note = (f"\n[... {what} truncated: {len(text) - 2 * half} of {len(text)} characters "
            "left out ...]\n")
    return text[:half] + note + text[-half:]


def normalise(value):
    """Turn a verifier's float, bool or dict into the result fields, checked and bounded."""
    if isinstance(value, bool):
        return {"score": 1.0 if value else 0.0, "passed": value}
    if isinstance(value, (int, float)):
        score = _number(value, "result")
        return {"score": score, "passed": score >= FULL_MARKS}
    if not isinstance(value, dict):
        raise VerifierFailed(f"the verifier's result is {type(value).__name__}, expected a "
                             "float, a bool or a dict")
    out, notes = {}, []
    if "score" in value:
        out["score"] = _number(value["score"], "score")
    elif isinstance(value.get("passed"), bool):
        out["score"] = 1.0 if value["passed"] else 0.0
    else:
        raise VerifierFailed("the verifier's result has no 'score'")
    passed = value.get("passed")
    out["passed"] = (_flag(passed, "the verifier's 'passed'") if passed is not None
                     else out["score"] >= FULL_MARKS)
    # ``passed`` and ``score`` must agree, since the totals count one and trainers the other:
    # a pass needs full marks, and a verifier that says "not passed" never gives them.
    if out["passed"] and out["score"] < FULL_MARKS:
        out["passed"] = False
        notes.append(f"not passed: the verifier said passed with a score of {out['score']:g} "
                     "(a pass needs full marks)")
    elif not out["passed"] and out["score"] >= FULL_MARKS:
        out["score"] = 0.0
        notes.append("score 0: the verifier gave full marks but said not passed")
    components = value.get("reward_components")
    if components is not None:
        out["reward_components"] = _components(components, notes)
    cases = value.get("cases")
    if cases is not None:
        out["cases"] = _cases(cases, notes)
    details = value.get("details")
    if details is not None:
        text = details if isinstance(details, str) else _to_json(details, "details")
        out["details"] = text
    if notes or "details" in out:
        text = "; ".join(notes + ([out["details"]] if "details" in out else []))
        out["details"] = cut_text(text, DETAILS_LIMIT)
    return out


def _components(components, notes):
    if not isinstance(components, dict):
        raise VerifierFailed("the verifier's 'reward_components' is "
                             f"{type(components).__name__}, expected a dict of numbers")
    out = {}
    for name, value in components.items():
        if len(out) >= MAX_COMPONENTS:
            notes.append(f"{len(components) - MAX_COMPONENTS} reward components left out "
                         f"(at most {MAX_COMPONENTS} are kept)")
            break
        name = cut_text(str(name), CASE_ID_LIMIT, "name")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            value = cut_text(_to_json(value, f"reward component {name!r}"), CASE_ID_LIMIT)
        out[name] = value  # the host rejects a non-number or non-finite one (invalid_score)
    return out


def _cases(cases, notes):
    if not isinstance(cases, list):
        raise VerifierFailed(f"the verifier's 'cases' is {type(cases).__name__}, expected a "
                             "list of dicts")
    if len(cases) > MAX_CASES:
        notes.append(f"{len(cases) - MAX_CASES} cases left out (at most {MAX_CASES} are kept)")
    out, budget = [], [CASES_TEXT_BUDGET]
    for i, case in enumerate(cases[:MAX_CASES]):
        if not isinstance(case, dict):
            raise VerifierFailed(f"the verifier's case {i} is {type(case).__name__}, expected "
                                 "a dict")
        out.append(_case(i, case, budget, notes))
    return out


def _case(i, case, budget, notes):
    passed = case.get("passed")  # absent or None: not passed
    passed = passed is not None and _flag(passed, f"the verifier's case {i}: 'passed'")
    case_id = case.get("id", f"test_{i}")
    out = {"id": cut_text(case_id if isinstance(case_id, str) else _to_json(case_id, "case id"),
                          CASE_ID_LIMIT, "id"),
           "passed": passed}
    score = case.get("score", 1.0 if passed else 0.0)
    out["score"] = _number(score, f"case {i} score")
    for key, value in case.items():
        if key in ("id", "passed", "score"):
            continue
        text = value if isinstance(value, str) else _to_json(value, f"case {i}")
        if budget[0] <= 0:
            if budget[0] == 0:
                notes.append("further case values left out: the cases' text budget of "
                             f"{CASES_TEXT_BUDGET} characters is spent")
                budget[0] = -1
            continue
        if len(text) > CASE_TEXT_LIMIT:
            value = cut_text(text, CASE_TEXT_LIMIT, "case value")
        budget[0] = max(0, budget[0] - min(len(text), CASE_TEXT_LIMIT))
        out[cut_text(str(key), CASE_ID_LIMIT, "key")] = value
    return out


def reconcile_exit(fields, code):
    """Apply the exit code of a verifier that exited 0 or 1 to its (normalised) result.

    The exit code decides ``passed``: a pass needs exit 0 *and* a result that passed (exit 0
    with a result saying ``passed: false`` stays failed, its score as the verifier gave it).
    A run that exited 1 never keeps full marks: a score of 1 becomes 0 and ``details`` says the
    exit code contradicted the result; a partial score below 1 is kept.
    """
    fields = dict(fields)
    if code == 0:
        return fields
    fields["passed"] = False
    score = fields.get("score")
    if isinstance(score, float) and math.isfinite(score) and score >= FULL_MARKS:
        fields["score"] = 0.0
        note = (f"exit code 1 (failed) contradicted the printed result (score {score!r}): "
                "score set to 0")
        details = fields.get("details")
        fields["details"] = note + (f"; {details}" if details else "")
    return fields


def outcome(raw, status, message, capture, printed):
    """The result fields for what the verifier gave back and how it exited.

    ``message`` is None when the verifier did not exit (returned, or a script that ended),
    else what it exited with beyond its status ("" for none); ``printed`` says whether the
    result was to be printed (a script, or any shape that exited) rather than returned.

    Exit 0 or 1 needs a result: its fields, with the exit code applied (see
    ``deepgym_result.reconcile_exit``: a pass needs exit 0 and a result that passed; a failed
    exit never keeps full marks). Any other status is the verifier's own error (exit 2): no
    verdict, whatever it printed; its printed ``details`` are kept.
    """
    said = f"the verifier exited with code {status}" + (f" ({message})" if message else "")
    if raw is None and not printed:
        raise VerifierFailed("the verifier returned None, expected a float, a bool or a dict "
                             "as its result")
    if status not in (0, 1):
        details = raw.get("details") if isinstance(raw, dict) else None
        if details is not None and not isinstance(details, str):
            details = None
        return {"kind": "reported_error", "exit_code": 2, "error_type": "verifier_error",
                "score": 0.0, "passed": False, "details": cut_text(details or said, 4096)}
    if raw is None:
        where = ("printed no JSON result on sys.stdout (output written to stderr or straight "
                 f"to file descriptor 1 is not read); {capture.summary()}")
        if message is not None:
            raise VerifierFailed(f"{said} with no result: it {where}")
        raise VerifierFailed(f"the verifier {where}")
    try:
        fields = normalise(raw)
    except VerifierFailed:
        raise
    except Exception as exc:  # anything wrong with its result is the verifier's own failure
        raise VerifierFailed(f"the verifier's result cannot be read: "
                             f"{type(exc).__name__}: {exc}") from None
    return dict(reconcile_exit(fields, status), kind="verdict")
