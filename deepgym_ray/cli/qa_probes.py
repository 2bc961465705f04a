"""The answers ``deepgym-ray qa`` tries an environment's verifier with, made from its reference
solution and its task text (standard library only: ``ast`` and ``re``).

- ``reference``: the reference itself, run several times (a verifier that does not always give
  it 1.0 is flaky, or wrong);
- stubs: an empty answer, and the reference's public functions with bodies of ``pass``,
  ``raise NotImplementedError`` and ``return None``: each must score below 0.5;
- ``hardcoded``: the answers to the task's visible examples (``f(1, 2)`` is ``3``, in code
  spans), looked up in a table, and the first of them for anything else: below 0.5 too;
- mutants: the reference with one small change (an operator, a comparison, a constant off by
  one, a branch dropped), made with ``ast``: a verifier should catch most of them.

Example:
    >>> ref = "def add(a, b):\\n    return a + b\\n"
    >>> [p.label for p in stubs(ref)]
    ['empty answer', 'add: pass', 'add: raise NotImplementedError', 'add: return None']
    >>> [p.label for p in mutants(ref, limit=5)]
    ['line 2: + -> -']
"""

from __future__ import annotations

import ast
import copy
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["Probe", "entry_points", "examples", "hardcoded", "mutants", "stubs"]


@dataclass(frozen=True)
class Probe:
    """One answer to try: ``kind`` (reference, stub, hardcoded, mutant), what it is, its code."""

    kind: str
    label: str
    code: str


def entry_points(reference: str) -> list[ast.FunctionDef]:
    """The reference's public top-level functions (the names a verifier calls)."""
    tree = ast.parse(reference)
    return [node for node in tree.body
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")]


def stubs(reference: str) -> list[Probe]:
    """An empty answer, then each public function with a body that does nothing useful."""
    made = [Probe("stub", "empty answer", "")]
    functions = entry_points(reference)
    for body in ("pass", "raise NotImplementedError", "return None"):
        if not functions:  # a script: the whole program is the stub
            made.append(Probe("stub", f"program: {body}",
                              "None\n" if body == "return None" else f"{body}\n"))
            continue
        code = "".join(f"def {f.name}({ast.unparse(f.args)}):\n    {body}\n\n\n"
                       for f in functions)
        made.append(Probe("stub", " & ".join(f.name for f in functions) + f": {body}",
                          code.rstrip() + "\n"))
    return made


# `name(args)` is `value` (also: returns, gives, ->, ==, should return), in Markdown code spans.
_EXAMPLE = re.compile(
    r"`(?P<name>[A-Za-z_]\w*)\((?P<args>[^`]*)\)`\s*(?:is|returns|gives|should return|->|→|==)"
    r"\s*`(?P<value>[^`]+)`")


def examples(task: str, names: set[str]) -> list[tuple[str, tuple, object]]:
    """The task's visible examples for the functions ``names``: (name, args, value), the ones
    whose arguments and value are Python literals."""
    found = []
    for match in _EXAMPLE.finditer(task):
        if match["name"] not in names:
            continue
        try:
            args = ast.literal_eval(f"({match['args']},)") if match["args"].strip() else ()
            value = ast.literal_eval(match["value"])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        found.append((match["name"], args, value))
    return found


def hardcoded(reference: str, task: str) -> Probe | None:
    """An answer that knows only the task's visible examples (and gives the first one's value
    for anything else), or None when the task shows none."""
    functions = {f.name: f for f in entry_points(reference)}
    seen = examples(task, set(functions))
    if not seen:
        return None
    lines = []
    for name in dict.fromkeys(n for n, _, _ in seen):
        table = {repr(args): value for n, args, value in seen if n == name}
        default = next(value for n, _, value in seen if n == name)
        lines += [f"def {name}(*args):",
                  f"    return {table!r}.get(repr(args), {default!r})", "", ""]
    return Probe("hardcoded", f"the task's {len(seen)} visible example(s), by heart",
                 "\n".join(lines).rstrip() + "\n")


_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult, ast.Mod: ast.FloorDiv, ast.Lt: ast.LtE, ast.LtE: ast.Lt,
    ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.And: ast.Or, ast.Or: ast.And,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Div: "/",
            ast.Mod: "%", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
            ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in", ast.And: "and", ast.Or: "or",
            ast.Is: "is", ast.IsNot: "is not"}

# Functions and methods whose twin does the opposite, or a different part of the job.
_TWINS = {"min": "max", "max": "min", "any": "all", "all": "any", "keys": "values",
          "values": "keys", "lower": "upper", "upper": "lower"}
# Calls whose argument alone is a plausible slip: sorted(x) -> x.
_UNWRAPPED = {"sorted", "reversed", "abs", "set", "len", "sum", "round", "int"}

Mutation = tuple[str, "Callable[[ast.AST], None] | str | None"]


def _mutations(node: ast.AST) -> Iterator[Mutation]:
    """The one-change mutations of ``node`` itself: (label, apply to a copy of the node)."""
    if isinstance(node, (ast.BinOp, ast.BoolOp)) and type(node.op) in _SWAPS:
        old, new = type(node.op), _SWAPS[type(node.op)]
        yield (f"{_SYMBOLS[old]} -> {_SYMBOLS[new]}", lambda n: setattr(n, "op", new()))
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _SWAPS:
                new = _SWAPS[type(op)]

                def swap(n, i=i, new=new):
                    n.ops[i] = new()
                yield (f"{_SYMBOLS[type(op)]} -> {_SYMBOLS[new]}", swap)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        for delta in (1, -1):
            yield (f"{node.value} -> {node.value + delta}",
                   lambda n, d=delta: setattr(n, "value", n.value + d))
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        yield (f"{node.value} -> {not node.value}", lambda n: setattr(n, "value", not n.value))
    if isinstance(node, ast.If):
        yield ("if-branch dropped", lambda n: setattr(n, "body", [ast.Pass()]))
        if node.orelse:
            yield ("else-branch dropped", lambda n: setattr(n, "orelse", []))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield ("not dropped", None)  # handled by the caller: the node is replaced
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name in _TWINS:
            yield (f"{name} -> {_TWINS[name]}",
                   lambda n: setattr(n.func, "id", _TWINS[n.func.id]))
        if name in _UNWRAPPED and len(node.args) == 1 and not node.keywords:
            yield (f"{name}(...) -> its argument", "unwrap")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in _TWINS and not node.args:
        yield (f".{node.func.attr}() -> .{_TWINS[node.func.attr]}()",
               lambda n: setattr(n.func, "attr", _TWINS[n.func.attr]))
    for name in ("body", "orelse"):  # a statement that changes state, dropped
        block = getattr(node, name, None)
        if isinstance(block, list) and len(block) > 1:
            for i, statement in enumerate(block):
                if isinstance(statement, (ast.Expr, ast.AugAssign)) and not (
                        isinstance(statement, ast.Expr) and isinstance(statement.value,
                                                                       ast.Constant)):
                    yield (f"statement on line {statement.lineno} dropped",
                           lambda n, name=name, i=i: getattr(n, name).__setitem__(i, ast.Pass()))


def mutants(reference: str, limit: int = 20, seed: int = 0) -> list[Probe]:
    """Up to ``limit`` distinct one-change mutants of ``reference`` that compile (a seeded
    sample when there are more), in source order."""
    tree = ast.parse(reference)
    sites = []
    for index, node in enumerate(ast.walk(tree)):
        for label, apply in _mutations(node):
            sites.append((index, getattr(node, "lineno", 0), label, apply))
    rng = random.Random(seed)
    rng.shuffle(sites)
    original = ast.unparse(tree)
    made: dict[str, Probe] = {}
    order: dict[str, tuple[int, int]] = {}
    for index, line, label, apply in sites:
        if len(made) >= limit:
            break
        copied = copy.deepcopy(tree)
        target = next(n for i, n in enumerate(ast.walk(copied)) if i == index)
        if apply is None:  # `not x` -> `x`
            _replace(copied, target, target.operand)
        elif apply == "unwrap":  # `f(x)` -> `x`
            _replace(copied, target, target.args[0])
        else:
            apply(target)
        try:
            code = ast.unparse(ast.fix_missing_locations(copied))
            compile(code, "<mutant>", "exec")
        except (SyntaxError, ValueError, TypeError):
            continue
        if code == original or code in made:
            continue
        where = label if label.startswith("statement") else f"line {line}: {label}"
        made[code] = Probe("mutant", where, code + "\n")
        order[code] = (line, len(order))
    return [made[c] for c in sorted(made, key=order.__getitem__)]


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                setattr(parent, field, [new if item is old else item for item in value])
                return
