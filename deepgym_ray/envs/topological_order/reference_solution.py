from collections import deque


def topological_order(n: int, dependencies: list[list[int]]) -> list[int]:
    # Kahn's algorithm: repeatedly take a task with no unmet dependency.
    successors: list[list[int]] = [[] for _ in range(n)]
    waiting_on = [0] * n
    for a, b in dependencies:
        successors[a].append(b)
        waiting_on[b] += 1
    ready = deque(t for t in range(n) if waiting_on[t] == 0)
    order = []
    while ready:
        task = ready.popleft()
        order.append(task)
        for nxt in successors[task]:
            waiting_on[nxt] -= 1
            if waiting_on[nxt] == 0:
                ready.append(nxt)
    return order if len(order) == n else []
