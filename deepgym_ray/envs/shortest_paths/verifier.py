"""Verifier for shortest_paths: edge cases plus seeded random graphs.

Expected distances come from Bellman-Ford style relaxation on small graphs and from an
independent Dijkstra on large ones, so a BFS that ignores weights or an undirected reading of
the edges fails.
"""

import heapq
import random

from deepgym_cases import score_cases


def _bellman_ford(n, edges, source):
    inf = float("inf")
    dist = [inf] * n
    dist[source] = 0
    for _ in range(n):
        changed = False
        for u, v, w in edges:
            if dist[u] + w < dist[v]:
                dist[v] = dist[u] + w
                changed = True
        if not changed:
            break
    return [d if d != inf else -1 for d in dist]


def _dijkstra(n, edges, source):
    adjacency = {}
    for u, v, w in edges:
        adjacency.setdefault(u, []).append((v, w))
    best = {source: 0}
    heap = [(0, source)]
    done = set()
    while heap:
        d, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        for v, w in adjacency.get(u, ()):
            if v not in best or d + w < best[v]:
                best[v] = d + w
                heapq.heappush(heap, (d + w, v))
    return [best.get(v, -1) for v in range(n)]


def _random_graph(rng, n, m, max_weight):
    return [[rng.randrange(n), rng.randrange(n), rng.randint(0, max_weight)] for _ in range(m)]


def _cases():
    cases = [
        ("single_node", 1, [], 0),
        ("no_edges", 3, [], 1),
        ("example", 4, [[0, 1, 4], [0, 2, 1], [2, 1, 2], [1, 3, 5]], 0),
        ("edge_points_away", 3, [[1, 0, 1]], 0),
        ("zero_weights", 3, [[0, 1, 0], [1, 2, 0]], 0),
        ("parallel_edges", 2, [[0, 1, 9], [0, 1, 2], [0, 1, 5]], 0),
        ("self_loop", 2, [[0, 0, 1], [0, 1, 3]], 0),
        ("more_hops_cheaper", 4, [[0, 3, 10], [0, 1, 1], [1, 2, 1], [2, 3, 1]], 0),
        ("source_not_zero", 5, [[4, 2, 7], [2, 0, 1], [0, 1, 2]], 4),
    ]
    rng = random.Random(1234)
    for i in range(12):
        n = rng.randint(2, 30)
        edges = _random_graph(rng, n, rng.randint(0, 3 * n), 20)
        cases.append((f"random_{i:02d}", n, edges, rng.randrange(n)))
    for i in range(2):
        n = 2000
        cases.append((f"large_{i}", n, _random_graph(rng, n, 10000, 10**6), rng.randrange(n)))
    return cases


def _expected_cases():
    out = []
    for case_id, n, edges, source in _cases():
        expected = _dijkstra(n, edges, source)
        if n <= 30 and _bellman_ford(n, edges, source) != expected:
            raise AssertionError(f"verifier self-check failed on case {case_id}")
        out.append((case_id, (n, edges, source), expected))
    return out


def verify(solution_path, test_cases_path=None):
    return score_cases(solution_path, "shortest_distances", _expected_cases())
