"""Subtly wrong answers to the built-in environments, one per environment (test data).

Each is close to right: it passes the easy cases and fails on one rule of the task (an edge
case, a tie-break, a limit), so a verifier has to look closely to score it below 1.0. Kept here
rather than in the environment folders because every extra file in a folder is shipped into the
sandbox as a support file.
"""

SUBTLY_WRONG = {
    # Stack-free depth counting: right about counts, blind to the kind and order of brackets.
    "balanced_brackets": '''
import sys

for line in sys.stdin.read().split("\\n"):
    depth, ok = 0, True
    for ch in line.strip():
        depth += 1 if ch in "([{" else -1
        ok = ok and depth >= 0
    print("YES" if ok and depth == 0 else "NO")
''',
    # Greedy by the largest coin: wrong when a smaller coin leads to fewer coins.
    "coin_change": '''
def coin_change(coins, amount):
    count = 0
    for coin in sorted(coins, reverse=True):
        count += amount // coin
        amount %= coin
    return count if amount == 0 else -1
''',
    # Forgets multiplicities.
    "prime_factors": '''
def factorize(n):
    factors, d = [], 2
    while d * d <= n:
        if n % d == 0:
            factors.append(d)
            while n % d == 0:
                n //= d
        d += 1
    if n > 1:
        factors.append(n)
    return factors
''',
    # Longest common substring (contiguous), not subsequence.
    "longest_common_subsequence": '''
def lcs_length(a, b):
    best = 0
    previous = [0] * (len(b) + 1)
    for ch in a:
        current = [0]
        for j, other in enumerate(b):
            current.append(previous[j] + 1 if ch == other else 0)
        best = max(best, max(current))
        previous = current
    return best
''',
    # Capacities visited upwards: items get reused (the unbounded knapsack).
    "knapsack_01": '''
def knapsack(weights, values, capacity):
    best = [0] * (capacity + 1)
    for weight, value in zip(weights, values):
        for c in range(weight, capacity + 1):
            best[c] = max(best[c], best[c - weight] + value)
    return best[capacity]
''',
    # Non-decreasing instead of strictly increasing (bisect_right keeps equal values).
    "longest_increasing_subsequence": '''
from bisect import bisect_right


def longest_increasing_subsequence(nums):
    tails, tail_values, parent = [], [], [-1] * len(nums)
    for i, value in enumerate(nums):
        k = bisect_right(tail_values, value)
        if k > 0:
            parent[i] = tails[k - 1]
        if k == len(tails):
            tails.append(i)
            tail_values.append(value)
        else:
            tails[k], tail_values[k] = i, value
    out, i = [], tails[-1] if tails else -1
    while i != -1:
        out.append(nums[i])
        i = parent[i]
    return out[::-1]
''',
    # Counts modulo 10**9 + 7 (a habit from contest problems): only huge counts go wrong.
    "word_break_count": '''
def count_segmentations(s, words):
    ways = [1] + [0] * len(s)
    for i in range(1, len(s) + 1):
        for w in words:
            if s[:i].endswith(w):
                ways[i] = (ways[i] + ways[i - len(w)]) % (10**9 + 7)
    return ways[len(s)]
''',
    # encode is right; decode reads one digit per count.
    "run_length_encoding": '''
from itertools import groupby


def encode(text):
    return "".join(f"{len(list(run))}{letter}" for letter, run in groupby(text))


def decode(encoded):
    return "".join(encoded[i + 1] * int(encoded[i]) for i in range(0, len(encoded), 2))
''',
    # Groups by the set of letters, so "aab" and "abb" land together.
    "group_anagrams": '''
def group_anagrams(words):
    groups = {}
    for word in words:
        groups.setdefault("".join(sorted(set(word))), []).append(word)
    return list(groups.values())
''',
    # Kadane that allows the empty subarray: 0 for an all-negative list.
    "max_subarray_sum": '''
def max_subarray_sum(nums):
    best = current = 0
    for value in nums:
        current = max(0, current + value)
        best = max(best, current)
    return best
''',
    # Merges overlaps but not intervals that only touch.
    "merge_intervals": '''
def merge_intervals(intervals):
    merged = []
    for start, end in sorted(intervals):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged
''',
    # Reads the directed edges as undirected.
    "shortest_paths": '''
import heapq


def shortest_distances(n, edges, source):
    adjacency = [[] for _ in range(n)]
    for u, v, w in edges:
        adjacency[u].append((v, w))
        adjacency[v].append((u, w))
    dist = [-1] * n
    heap = [(0, source)]
    while heap:
        d, u = heapq.heappop(heap)
        if dist[u] != -1:
            continue
        dist[u] = d
        for v, w in adjacency[u]:
            if dist[v] == -1:
                heapq.heappush(heap, (d + w, v))
    return dist
''',
    # Kahn's algorithm without the final check: a cycle gives a partial order, not [].
    "topological_order": '''
def topological_order(n, dependencies):
    successors = [[] for _ in range(n)]
    waiting = [0] * n
    for a, b in dependencies:
        successors[a].append(b)
        waiting[b] += 1
    ready = [t for t in range(n) if waiting[t] == 0]
    order = []
    while ready:
        task = ready.pop()
        order.append(task)
        for nxt in successors[task]:
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                ready.append(nxt)
    return order
''',
    # One sweep only: the farthest distance from node 0, not between any two nodes.
    "tree_diameter": '''
def tree_diameter(n, edges):
    adjacency = [[] for _ in range(n)]
    for u, v, w in edges:
        adjacency[u].append((v, w))
        adjacency[v].append((u, w))
    dist = {0: 0}
    stack = [0]
    while stack:
        u = stack.pop()
        for v, w in adjacency[u]:
            if v not in dist:
                dist[v] = dist[u] + w
                stack.append(v)
    return max(dist.values())
''',
    # Strictly left to right: no precedence for "*".
    "expression_evaluator": '''
import re


def evaluate(expression):
    tokens = re.findall(r"\\d+|[-+*()]", expression)
    position = 0

    def operand():
        nonlocal position
        token = tokens[position]
        position += 1
        if token == "-":
            return -operand()
        if token == "(":
            value = chain()
            position += 1
            return value
        return int(token)

    def chain():
        nonlocal position
        value = operand()
        while position < len(tokens) and tokens[position] != ")":
            op = tokens[position]
            position += 1
            right = operand()
            value = value + right if op == "+" else value - right if op == "-" else value * right
        return value

    return chain()
''',
    # to_roman is right; from_roman adds every symbol and ignores the subtractive pairs.
    "roman_numerals": '''
_VALUES = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
           (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def to_roman(number):
    out = ""
    for value, symbol in _VALUES:
        count, number = divmod(number, value)
        out += symbol * count
    return out


def from_roman(numeral):
    single = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    return sum(single[ch] for ch in numeral)
''',
    # Right answers, but a loop over n steps: the huge cases run past their own time limit.
    "fibonacci_mod": '''
def fib_mod(n, m):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % m
    return a % m
''',
    # Ties keep the order of first appearance instead of alphabetical order.
    "word_frequency_cli": '''
import re
import sys
from collections import Counter

k = int(sys.argv[1])
counts = Counter(w.lower() for w in re.findall(r"[A-Za-z]+", sys.stdin.read()))
for word, count in counts.most_common(k):
    print(word, count)
''',
    # Ties go to the word met first in the given (unsorted) dictionary.
    "spelling_suggestions": '''
def _distance(a, b):
    previous = list(range(len(b) + 1))
    for i, ch in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (ch != other)))
        previous = current
    return previous[-1]


def suggest(word, dictionary):
    return min(dictionary, key=lambda candidate: _distance(word, candidate))
''',
    # Loses the sign when the integer part is 0 (-1/3 comes out as 0.(3)).
    "fraction_to_decimal": '''
def fraction_to_decimal(numerator, denominator):
    whole = int(numerator / denominator) if abs(numerator) < 2**53 else numerator // denominator
    n, d = abs(numerator), abs(denominator)
    remainder = n % d
    if remainder == 0:
        return str(whole)
    digits, seen = [], {}
    while remainder and remainder not in seen:
        seen[remainder] = len(digits)
        digit, remainder = divmod(remainder * 10, d)
        digits.append(str(digit))
    if remainder:
        start = seen[remainder]
        fraction = "".join(digits[:start]) + "(" + "".join(digits[start:]) + ")"
    else:
        fraction = "".join(digits)
    return f"{whole}.{fraction}"
''',
}
