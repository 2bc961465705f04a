"""Balanced brackets: a script verifier. Runs the solution once as a program on every case
(stdin in, stdout out) and prints its JSON result."""

import json
import random
import sys

from deepgym_cases import summarize
from deepgym_solution import run_solution

FIXED = ["()", "([]{})", "(]", "([)]", "", "((((", "{[()()]}", "}{", "[", "(()[]{}){[]}"]


def balanced(text):
    # Repeatedly delete innermost pairs: a different method from a stack.
    previous = None
    while previous != text:
        previous = text
        for pair in ("()", "[]", "{}"):
            text = text.replace(pair, "")
    return text == ""


def cases():
    rng = random.Random(7)
    out = list(FIXED)
    for _ in range(20):
        size = rng.randint(1, 12)
        if rng.random() < 0.5:  # build a balanced one so both answers are common
            text = ""
            for _ in range(size):
                opening, closing = rng.choice(["()", "[]", "{}"])
                cut = rng.randint(0, len(text))
                text = text[:cut] + opening + closing + text[cut:]
            out.append(text)
        else:
            out.append("".join(rng.choice("()[]{}") for _ in range(size)))
    return out


def main():
    solution_path = sys.argv[1]
    inputs = cases()
    expected = ["YES" if balanced(t) else "NO" for t in inputs]
    run = run_solution(solution_path, stdin="\n".join(inputs))
    lines = run.stdout.splitlines()
    results = []
    for i, want in enumerate(expected):
        got = lines[i].strip() if i < len(lines) else None
        results.append({"id": f"line_{i}", "passed": got == want, "score": float(got == want),
                        "input": inputs[i], "expected": want, "got": got})
    result = summarize(results)
    if run.timed_out:
        result["details"] += "; the program timed out"
    elif run.exit_code != 0:
        result["details"] += f"; the program exited with {run.exit_code}: {run.stderr[-300:]}"
    print(json.dumps(result))


if __name__ == "__main__":
    main()
