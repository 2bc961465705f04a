def tree_diameter(n: int, edges: list[list[int]]) -> int:
    # Two sweeps: the farthest node from any node is one end of a diameter.
    adjacency: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for u, v, w in edges:
        adjacency[u].append((v, w))
        adjacency[v].append((u, w))

    def farthest(start: int) -> tuple[int, int]:
        dist = [-1] * n
        dist[start] = 0
        stack = [start]
        while stack:
            u = stack.pop()
            for v, w in adjacency[u]:
                if dist[v] < 0:
                    dist[v] = dist[u] + w
                    stack.append(v)
        best = max(range(n), key=dist.__getitem__)
        return best, dist[best]

    end, _ = farthest(0)
    _, length = farthest(end)
    return length
