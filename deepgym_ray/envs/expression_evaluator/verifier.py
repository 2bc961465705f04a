"""Verifier for expression_evaluator: hand-written cases from test_cases.json plus seeded random
expressions.

The verifier's own evaluator walks Python's syntax tree of the expression (the grammar is a
subset of Python's), allowing only integer literals, unary minus, +, - and *. The expected
values stored in test_cases.json are checked against it before the solution comes into play.
"""

import ast
import json
import random

from deepgym_cases import score_cases

_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b}


def _value(node):
    if isinstance(node, ast.Expression):
        return _value(node.body)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError(f"not part of the grammar: {ast.dump(node)[:80]}")


def _evaluate(expression):
    return _value(ast.parse(expression.strip(), mode="eval"))


def _random_expression(rng, depth):
    roll = rng.random()
    if depth <= 0 or roll < 0.25:
        return str(rng.choice([0, 1, 2, 3, 7, 10, 99, rng.randint(0, 10**6)]))
    if roll < 0.35:
        return "-" + _random_expression(rng, depth - 1)
    if roll < 0.5:
        return "(" + _random_expression(rng, depth - 1) + ")"
    op = rng.choice(["+", "-", "*", "-", "+"])
    space = rng.choice(["", " "])
    left, right = _random_expression(rng, depth - 1), _random_expression(rng, depth - 1)
    return f"{left}{space}{op}{space}{right}"


def _file_cases(test_cases_path):
    if not test_cases_path:
        return []
    with open(test_cases_path, encoding="utf-8") as f:
        entries = json.load(f)
    cases = []
    for entry in entries:
        expected = _evaluate(entry["expression"])
        if entry.get("expected") != expected:
            raise AssertionError(f"test case {entry['id']}: stored answer disagrees: {expected}")
        cases.append((str(entry["id"]), entry["expression"], expected))
    return cases


def _random_cases():
    rng = random.Random(1234)
    cases = []
    for i in range(12):
        expression = _random_expression(rng, rng.randint(2, 7))
        cases.append((f"random_{i:02d}", expression, _evaluate(expression)))
    nested = "(" * 50 + "1 + 2 * 3" + ")" * 50 + " - 4"
    cases.append(("nested_50", nested, _evaluate(nested)))
    terms = [f"{rng.randint(0, 999)} * -{rng.randint(0, 9)}" for _ in range(150)]
    long_sum = " + ".join(terms)
    cases.append(("long_flat", long_sum, _evaluate(long_sum)))
    return cases


def verify(solution_path, test_cases_path=None):
    cases = _file_cases(test_cases_path) + _random_cases()
    return score_cases(solution_path, "evaluate",
                       [(case_id, (text,), expected) for case_id, text, expected in cases])
