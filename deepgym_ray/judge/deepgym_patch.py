"""Applying a unified diff to files held in memory, for verifiers of patch answers (stdlib only).

:func:`apply_patch` takes the patch text and a tree (relative path -> text) and returns a new
tree; the tree given is never changed. It reads plain unified diffs and ``git diff`` output
(``a/``/``b/`` prefixes, paths quoted the way git quotes them), creates a file from
``/dev/null`` and deletes one to it. What a tree of texts cannot hold is refused with a
:class:`PatchError` naming it: git's file modes (``new file mode``, ``deleted file mode``,
``old mode``/``new mode``), renames, copies and binary patches. A hunk whose lines are not in
the file (at its line, or shifted) is refused too: nothing is applied by halves.

Example (inside a verifier):
    patch = "--- a/m.py\\n+++ b/m.py\\n@@ -1 +1 @@\\n-x = 1\\n+x = 2\\n"
    apply_patch(patch, {"m.py": "x = 1\\n"})   # {"m.py": "x = 2\\n"}
"""

from deepgym_spawn import mark_in_play

__all__ = ["PatchError", "PatchNotApplied", "apply_patch"]

# Git's extended header lines that a tree of texts cannot represent.
_REFUSED = (("new file mode", "a new file with a git file mode"),
            ("deleted file mode", "a deleted file with a git file mode"),
            ("old mode", "a change of file mode"), ("new mode", "a change of file mode"),
            ("rename from", "a rename"), ("rename to", "a rename"),
            ("copy from", "a copy"), ("copy to", "a copy"),
            ("GIT binary patch", "a binary patch"), ("Binary files", "a binary patch"))
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


class PatchError(ValueError):
    """The patch is malformed or asks for what a tree of texts cannot hold. Uncaught in a
    verifier, it is the answer's failure under the contract: ``invalid_patch``."""

    _deepgym_origin = "invalid_patch"  # (the runner's name for the failure)


class PatchNotApplied(PatchError):
    """The patch is well formed but does not apply to the files: ``patch_apply_failed``."""

    _deepgym_origin = "patch_apply_failed"


def _unquote(text):
    """A path as git writes it: C-quoted (``"a/x y.py"``, octal bytes of UTF-8) or plain."""
    if not text.startswith('"'):
        return text
    out, i = bytearray(), 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return out.decode("utf-8", "surrogateescape")
        if c == "\\":
            nxt = text[i + 1:i + 2]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            digits = text[i + 1:i + 4]
            if len(digits) == 3 and all(d in "01234567" for d in digits):
                out.append(int(digits, 8))
                i += 4
                continue
            raise PatchError(f"a quoted path with an unknown escape: {text}")
        out.extend(c.encode("utf-8"))
        i += 1
    raise PatchError(f"a quoted path without its closing quote: {text}")


def _header_path(line):
    """The path of a ``---``/``+++`` line (None for /dev/null), its date or tab dropped."""
    rest = line[4:]
    if rest.startswith('"'):
        path = _unquote(rest)  # up to its closing quote
    else:
        path = rest.split("\t", 1)[0].rstrip()
    return None if path == "/dev/null" else path


def _strip(old, new):
    """Drop git's ``a/`` and ``b/`` prefixes when the patch uses them."""
    if (old is None or old.startswith("a/")) and (new is None or new.startswith("b/")):
        return (old and old[2:]), (new and new[2:])
    return old, new


def _hunk_header(line):
    try:
        ranges = line.split("@@")[1].split()
        old, new = ranges[0][1:].split(","), ranges[1][1:].split(",")
        return (int(old[0]), int(old[1]) if len(old) > 1 else 1,
                int(new[0]), int(new[1]) if len(new) > 1 else 1)
    except (IndexError, ValueError):
        raise PatchError(f"a malformed hunk header: {line!r}") from None


def _parse(patch):
    """[(old path, new path, [(old start, old lines, new lines)])] in the patch's order."""
    lines = patch.splitlines(keepends=True)
    files, i = [], 0
    while i < len(lines):
        line = lines[i].rstrip("\r\n")
        for prefix, what in _REFUSED:
            if line.startswith(prefix):
                raise PatchError(f"the patch asks for {what} ({line!r}), which apply_patch "
                                 "cannot represent")
        if not (line.startswith("--- ") and i + 1 < len(lines)
                and lines[i + 1].startswith("+++ ")):
            i += 1
            continue
        old, new = _strip(_header_path(line), _header_path(lines[i + 1].rstrip("\r\n")))
        i += 2
        hunks = []
        while i < len(lines) and lines[i].startswith("@@"):
            start, old_count, _new_start, new_count = _hunk_header(lines[i])
            i += 1
            before, after, last = [], [], None
            while (old_count > 0 or new_count > 0) and i < len(lines):
                line, kind = lines[i], lines[i][:1]
                if kind in (" ", "\n", "\r"):  # context (an empty one may lose its space)
                    text = line[1:] if kind == " " else line
                    before.append(text)
                    after.append(text)
                    old_count, new_count = old_count - 1, new_count - 1
                elif kind == "-":
                    before.append(line[1:])
                    old_count -= 1
                elif kind == "+":
                    after.append(line[1:])
                    new_count -= 1
                else:
                    raise PatchError(f"a hunk of {new or old} ends early at {line!r}")
                last, i = kind, i + 1
                if i < len(lines) and lines[i].startswith("\\"):  # no newline at end of file
                    for side in ((before,) if last == "-" else (after,) if last == "+"
                                 else (before, after)):
                        side[-1] = side[-1].rstrip("\r\n")
                    i += 1
            if old_count > 0 or new_count > 0:
                raise PatchError(f"a hunk of {new or old} is cut short")
            hunks.append((start, before, after))
        if not hunks and old is not None and new is not None:
            raise PatchError(f"no hunk for {new}")
        files.append((old, new, hunks))
    if not files:
        raise PatchError("no file changes found in the patch (a unified diff has '--- ' and "
                         "'+++ ' lines, then hunks)")
    return files


def _apply_hunks(path, text, hunks):
    lines = text.splitlines(keepends=True)
    offset = 0  # how far the file has moved from the patch's line numbers so far
    for number, (start, before, after) in enumerate(hunks, 1):
        at = max(0, (start - 1 if before else start) + offset)
        found = None
        # Where the hunk says, or the nearest place its lines are (the file moved on).
        for shift in range(len(lines) + 1):
            for place in (at - shift, at + shift) if shift else (at,):
                if 0 <= place <= len(lines) - len(before) and \
                        lines[place:place + len(before)] == before:
                    found = place
                    break
            if found is not None:
                break
        if found is None:
            raise PatchNotApplied(f"hunk {number} of {path} does not apply: its lines are not in "
                             "the file")
        lines[found:found + len(before)] = after
        offset += found - at + len(after) - len(before)
    return "".join(lines)


def apply_patch(patch, files):
    """Apply the unified diff ``patch`` to ``files`` (path -> text); returns the new tree."""
    if not isinstance(patch, str):
        raise TypeError(f"patch must be text, not {type(patch).__name__}")
    mark_in_play()  # the patch is the policy's output: failures from here are the answer's
    tree = dict(files)
    for old, new, hunks in _parse(patch):
        if old is None and new is None:
            raise PatchError("a change from /dev/null to /dev/null")
        if old is None:
            if new in tree:
                raise PatchNotApplied(f"the patch creates {new}, which already exists")
            tree[new] = _apply_hunks(new, "", hunks)
            continue
        if old not in tree:
            raise PatchNotApplied(f"the patch changes {old}, which is not among the files")
        if old != new and new is not None:
            raise PatchError(f"the patch renames {old} to {new}, which apply_patch cannot "
                             "represent")
        result = _apply_hunks(old, tree[old], hunks)
        if new is None:
            if result:
                raise PatchNotApplied(f"the patch deletes {old} but leaves lines in it")
            del tree[old]
        else:
            tree[old] = result
    return tree
