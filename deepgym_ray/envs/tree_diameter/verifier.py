"""Verifier for tree_diameter: edge cases, seeded random trees, and a long path.

The expected diameter comes from a bottom-up pass (the two deepest child branches of every
node), a different method from the usual two sweeps; small trees are cross-checked with all
pairs of nodes.
"""

import random

from deepgym_cases import score_cases


def _diameter(n, edges):
    adjacency = [[] for _ in range(n)]
    for u, v, w in edges:
        adjacency[u].append((v, w))
        adjacency[v].append((u, w))
    parent, order, seen = [-1] * n, [0], [False] * n
    seen[0] = True
    for u in order:  # breadth-first order; reversed it visits children before parents
        for v, _ in adjacency[u]:
            if not seen[v]:
                seen[v], parent[v] = True, u
                order.append(v)
    depth, best = [0] * n, 0
    for u in reversed(order):
        branches = sorted((depth[v] + w for v, w in adjacency[u] if parent[v] == u), reverse=True)
        depth[u] = branches[0] if branches else 0
        best = max(best, sum(branches[:2]))
    return best


def _all_pairs(n, edges):
    adjacency = [[] for _ in range(n)]
    for u, v, w in edges:
        adjacency[u].append((v, w))
        adjacency[v].append((u, w))
    best = 0
    for start in range(n):
        dist, stack = {start: 0}, [start]
        while stack:
            u = stack.pop()
            for v, w in adjacency[u]:
                if v not in dist:
                    dist[v] = dist[u] + w
                    stack.append(v)
        best = max(best, max(dist.values()))
    return best


def _random_tree(rng, n, shape):
    edges = []
    for v in range(1, n):
        if shape == "path":
            u = v - 1
        else:  # "deep" trees attach near the newest node, "random" ones anywhere
            u = rng.randrange(max(0, v - 3) if shape == "deep" else 0, v)
        w = rng.randint(1, 1000)
        edges.append([u, v, w] if rng.random() < 0.5 else [v, u, w])
    labels = list(range(n))
    rng.shuffle(labels)  # hide the construction order
    edges = [[labels[u], labels[v], w] for u, v, w in edges]
    rng.shuffle(edges)
    return edges


def _cases():
    cases = [
        ("single_node", 1, []),
        ("two_nodes", 2, [[1, 0, 7]]),
        ("example", 4, [[0, 1, 3], [1, 2, 4], [1, 3, 5]]),
        ("star", 5, [[0, 1, 1], [0, 2, 10], [0, 3, 3], [0, 4, 10]]),
        ("diameter_avoids_root", 6, [[0, 1, 1], [1, 2, 5], [1, 3, 5], [0, 4, 1], [4, 5, 1]]),
        ("heavy_edge_beats_more_edges", 5, [[0, 1, 1], [1, 2, 1], [2, 3, 1], [1, 4, 50]]),
    ]
    rng = random.Random(1234)
    for i in range(12):
        n = rng.randint(2, 40)
        cases.append((f"random_{i:02d}", n, _random_tree(rng, n, "random" if i % 2 else "deep")))
    cases.append(("long_path", 5000, _random_tree(rng, 5000, "path")))
    cases.append(("large_random", 5000, _random_tree(rng, 5000, "random")))
    return cases


def _expected_cases():
    out = []
    for case_id, n, edges in _cases():
        expected = _diameter(n, edges)
        if n <= 40 and _all_pairs(n, edges) != expected:
            raise AssertionError(f"verifier self-check failed on case {case_id}")
        out.append((case_id, (n, edges), expected))
    return out


def verify(solution_path, test_cases_path=None):
    return score_cases(solution_path, "tree_diameter", _expected_cases())
