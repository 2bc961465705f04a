"""Verifier for topological_order: any valid order is accepted; cycles must give [].

The verifier decides whether a cycle exists with its own depth-first search, then checks the
returned order's properties (a permutation of the tasks that respects every dependency).
"""

import random

from deepgym_cases import score_cases


def _has_cycle(n, dependencies):
    successors = [[] for _ in range(n)]
    for a, b in dependencies:
        successors[a].append(b)
    state = [0] * n  # 0 unseen, 1 on the current path, 2 finished
    for root in range(n):
        if state[root]:
            continue
        stack = [(root, iter(successors[root]))]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state[child] == 1:
                return True
            elif state[child] == 0:
                state[child] = 1
                stack.append((child, iter(successors[child])))
    return False


def _problem(n, dependencies, cyclic, got):
    """Why ``got`` is not an acceptable answer (None when it is)."""
    if type(got) is not list or any(type(t) is not int for t in got):
        return "expected a list of int"
    if cyclic:
        return None if got == [] else "the dependencies have a cycle, expected []"
    if sorted(got) != list(range(n)):
        return "not every task exactly once"
    position = {task: i for i, task in enumerate(got)}
    for a, b in dependencies:
        if position[a] >= position[b]:
            return f"dependency [{a}, {b}] is broken"
    return None


def _random_dag(rng, n, m):
    ranks = list(range(n))
    rng.shuffle(ranks)  # a hidden order every dependency follows
    deps = []
    for _ in range(m):
        a, b = rng.sample(range(n), 2)
        deps.append([a, b] if ranks[a] < ranks[b] else [b, a])
    return deps


def _cases():
    cases = [
        ("no_tasks", 0, []),
        ("one_task", 1, []),
        ("no_dependencies", 3, []),
        ("example_diamond", 4, [[0, 1], [0, 2], [1, 3], [2, 3]]),
        ("two_cycle", 2, [[0, 1], [1, 0]]),
        ("self_loop", 3, [[0, 1], [2, 2]]),
        ("repeated_dependency", 3, [[2, 0], [2, 0], [0, 1]]),
        ("chain_backwards", 5, [[4, 3], [3, 2], [2, 1], [1, 0]]),
        ("cycle_off_to_the_side", 5, [[0, 1], [2, 3], [3, 4], [4, 2]]),
    ]
    rng = random.Random(1234)
    for i in range(12):
        n = rng.randint(2, 40)
        deps = _random_dag(rng, n, rng.randint(0, 3 * n))
        if i % 3 == 2 and deps:  # reverse one dependency of a chain to plant a cycle
            a, b = deps[0]
            deps += [[b, a]]
        cases.append((f"random_{i:02d}", n, deps))
    cases.append(("large_dag", 2000, _random_dag(rng, 2000, 8000)))
    big = _random_dag(rng, 2000, 8000)
    cases.append(("large_with_cycle", 2000, big + [[big[0][1], big[0][0]]]))
    return cases


def _check(got, expected):
    n, deps, cyclic = expected
    return _problem(n, deps, cyclic, got) or True


def verify(solution_path, test_cases_path=None):
    # The solution gets copies: the check reads the dependencies after the call.
    cases = [(cid, (n, [d[:] for d in deps]), (n, deps, _has_cycle(n, deps)))
             for cid, n, deps in _cases()]
    return score_cases(solution_path, "topological_order", cases, check=_check)
