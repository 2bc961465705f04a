"""``load_solution`` behaves as the solution's module: verifiers written the way third-party
DeepGym environments are written judge their reference 1.0 and a near miss a judged 0.

One environment per behaviour (names, constants, LeetCode classes, stateful designs, handles
passed back, generators, in-place arguments, exception subclasses); every answer goes through the
real local sandbox in one batch.
"""

from __future__ import annotations

import pytest

from deepgym_ray.models import Environment

HEADER = "from deepgym_solution import load_solution\n"

ENVIRONMENTS = {
    "names": (HEADER + '''
import inspect


def verify(solution_path, test_cases_path=None):
    solution = load_solution(solution_path)
    if 'slugify' not in dir(solution):
        return {"score": 0.0, "passed": False, "details": "slugify is missing"}
    sig = inspect.signature(solution.slugify)
    checks = {
        "hasattr": hasattr(solution, "slugify") and not hasattr(solution, "unslugify"),
        "getattr default": getattr(solution, "unslugify", None) is None,
        "vars": "slugify" in vars(solution) and "helper_count" not in vars(solution),
        "module name": solution.__name__ == "solution",
        "module doc": "URL slugs" in (solution.__doc__ or ""),
        "function doc": "lowercase" in (solution.slugify.__doc__ or ""),
        "function name": solution.slugify.__name__ == "slugify",
        "callable": callable(solution.slugify) and not callable(solution.SEPARATORS),
        "parameters": list(sig.parameters) == ["title", "sep"],
        "default": sig.parameters["sep"].default == "-",
        "annotation": str(sig.parameters["title"].annotation) == "str",
        "shown": str(sig) == "(title: str, sep: str = '-') -> str",
        "calls": solution.slugify("Hello  World") == "hello-world"
                 and solution.slugify("A b", sep="_") == "a_b",
    }
    failed = [name for name, ok in checks.items() if not ok]
    return {"score": 0.0 if failed else 1.0, "passed": not failed, "details": repr(failed)}
''', '''"""Turn titles into URL slugs."""
SEPARATORS = ("-", "_")


def slugify(title: str, sep: str = "-") -> str:
    """The title's words in lowercase, joined by ``sep``."""
    return sep.join(title.lower().split())
''', '''"""Turn titles into URL slugs."""
SEPARATORS = ("-", "_")


def slugify(title: str, sep: str = "_") -> str:
    """The title's words in lowercase, joined by ``sep``."""
    return sep.join(title.lower().split())
'''),
    "constants": (HEADER + '''

def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    ok = (sol.MOD == 10 ** 9 + 7 and not callable(sol.MOD) and sol.DIGITS == "0123456789"
          and sol.fib_mod(10) == 55 and sol.fib_mod(100) == 687995182)
    return 1.0 if ok else 0.0
''', '''MOD = 10 ** 9 + 7
DIGITS = "0123456789"


def fib_mod(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % MOD
    return a
''', '''MOD = 10 ** 9 + 9
DIGITS = "0123456789"


def fib_mod(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % MOD
    return a
'''),
    "leetcode_class": (HEADER + '''
CASES = [([2, 7, 11, 15], 9, [0, 1]), ([3, 2, 4], 6, [1, 2]), ([3, 3], 6, [0, 1])]


def verify(solution_path, test_cases_path=None):
    solution = load_solution(solution_path)
    passed = 0
    for nums, target, expected in CASES:
        try:
            if sorted(solution.Solution().twoSum(nums, target)) == expected:
                passed += 1
        except Exception:
            pass
    return {"score": passed / len(CASES), "passed": passed == len(CASES)}
''', '''from typing import List


class Solution:
    def twoSum(self, nums: List[int], target: int) -> List[int]:
        seen = {}
        for i, x in enumerate(nums):
            if target - x in seen:
                return [seen[target - x], i]
            seen[x] = i
        return []
''', '''class Solution:
    def twoSum(self, nums, target):
        for i in range(len(nums)):
            for j in range(i + 1, len(nums)):
                if nums[i] + nums[j] == target:
                    return [i + 1, j + 1]
        return []
'''),
    "stateful_design": (HEADER + '''
OPS = [("put", 1, 1), ("put", 2, 2), ("get", 1, 1), ("put", 3, 3), ("get", 2, -1),
       ("put", 4, 4), ("get", 1, -1), ("get", 3, 3), ("get", 4, 4)]


def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    cache = sol.LRUCache(2)
    for op, key, value in OPS:
        if op == "put":
            cache.put(key, value)
        elif cache.get(key) != value:
            return {"score": 0.0, "passed": False, "details": f"get({key}) != {value}"}
    return {"score": 1.0, "passed": True}
''', '''from collections import OrderedDict


class LRUCache:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.items = OrderedDict()

    def get(self, key: int) -> int:
        if key not in self.items:
            return -1
        self.items.move_to_end(key)
        return self.items[key]

    def put(self, key: int, value: int) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        if len(self.items) > self.capacity:
            self.items.popitem(last=False)
''', '''class LRUCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self.items = {}

    def get(self, key):
        return self.items.get(key, -1)

    def put(self, key, value):
        self.items[key] = value
        if len(self.items) > self.capacity:
            del self.items[next(iter(self.items))]
'''),
    "handles_passed_back": (HEADER + '''

def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    head = None
    for value in reversed([1, 2, 3, 4]):
        node = sol.ListNode(value)
        node.next = head
        head = node
    out = sol.Solution().reverseList(head)
    values = []
    while out:
        values.append(out.val)
        out = out.next
    return 1.0 if values == [4, 3, 2, 1] and sol.length(head) == 1 else 0.0
''', '''class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next


class Solution:
    def reverseList(self, head):
        prev = None
        while head:
            head.next, prev, head = prev, head, head.next
        return prev


def length(node):
    count = 0
    while node:
        count, node = count + 1, node.next
    return count
''', '''class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next


class Solution:
    def reverseList(self, head):
        prev = None
        while head and head.next:
            head.next, prev, head = prev, head, head.next
        return prev


def length(node):
    count = 0
    while node:
        count, node = count + 1, node.next
    return count
'''),
    "generators": (HEADER + '''
import itertools


def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    primes = sol.primes()
    first = list(itertools.islice(primes, 10))
    following = next(primes)
    total = 0
    for value in sol.countdown(4):
        total += value
    ok = (first == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29] and following == 31 and total == 10
          and list(sol.countdown(3)) == [3, 2, 1] and sorted(iter(sol.Bag([3, 1]))) == [1, 3])
    return 1.0 if ok else 0.0
''', '''def primes():
    found, n = [], 2
    while True:
        if all(n % p for p in found):
            found.append(n)
            yield n
        n += 1


def countdown(n):
    while n:
        yield n
        n -= 1


class Bag:
    def __init__(self, items):
        self.items = list(items)

    def __iter__(self):
        return iter(self.items)
''', '''def primes():
    n = 1
    while True:
        if all(n % d for d in range(2, n)):
            yield n
        n += 1


def countdown(n):
    while n:
        yield n
        n -= 1


class Bag:
    def __init__(self, items):
        self.items = list(items)

    def __iter__(self):
        return iter(self.items)
'''),
    "in_place": (HEADER + '''

def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    nums = [0, 1, 0, 3, 12]
    returned = sol.moveZeroes(nums)
    matrix = [[1, 2], [3, 4]]
    sol.rotate(matrix)
    settings = {"b": 2}
    sol.add_defaults(settings)
    seen = {1, 2, 3}
    sol.drop_odd(seen)
    buffer = bytearray(b"abc")
    sol.upper(buffer)
    ok = (returned is None and nums == [1, 3, 12, 0, 0] and matrix == [[3, 1], [4, 2]]
          and settings == {"a": 1, "b": 2} and seen == {2} and buffer == bytearray(b"ABC"))
    return {"score": 1.0 if ok else 0.0, "details": repr((nums, matrix, settings, seen))}
''', '''def moveZeroes(nums):
    """Do not return anything, modify nums in-place instead."""
    kept = [x for x in nums if x != 0]
    nums[:] = kept + [0] * (len(nums) - len(kept))


def rotate(matrix):
    n = len(matrix)
    for i in range(n):
        for j in range(i + 1, n):
            matrix[i][j], matrix[j][i] = matrix[j][i], matrix[i][j]
    for row in matrix:
        row.reverse()


def add_defaults(settings):
    settings.setdefault("a", 1)


def drop_odd(values):
    values -= {v for v in values if v % 2}


def upper(buffer):
    buffer[:] = buffer.upper()
''', '''def moveZeroes(nums):
    kept = [x for x in nums if x != 0]
    nums = kept + [0] * (len(nums) - len(kept))
    return nums


def rotate(matrix):
    n = len(matrix)
    for i in range(n):
        for j in range(i + 1, n):
            matrix[i][j], matrix[j][i] = matrix[j][i], matrix[i][j]
    for row in matrix:
        row.reverse()


def add_defaults(settings):
    settings.setdefault("a", 1)


def drop_odd(values):
    values -= {v for v in values if v % 2}


def upper(buffer):
    buffer[:] = buffer.upper()
'''),
    "exception_subclass": (HEADER + '''

def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    results = []
    for text in ("-3", "abc"):
        try:
            sol.parse_age(text)
            results.append("returned")
        except ValueError as exc:
            results.append(type(exc).__name__)
        except Exception as exc:
            results.append("other " + type(exc).__name__)
    try:
        sol.parse_age("-1")
        caught_own = False
    except sol.InvalidAge:
        caught_own = True
    ok = (results == ["InvalidAge", "ValueError"] and caught_own and sol.parse_age("42") == 42
          and issubclass(sol.InvalidAge, ValueError))
    return {"score": 1.0 if ok else 0.0, "details": repr(results)}
''', '''class InvalidAge(ValueError):
    pass


def parse_age(text):
    age = int(text)
    if age < 0:
        raise InvalidAge("an age cannot be negative")
    return age
''', '''class InvalidAge(Exception):
    pass


def parse_age(text):
    age = int(text)
    if age < 0:
        raise InvalidAge("an age cannot be negative")
    return age
'''),
}


@pytest.fixture(scope="module")
def judged(local_client):
    """{(environment, 'reference' | 'near_miss'): RunResult}, one batch."""
    keys, envs, answers = [], [], []
    for name, (verifier, reference, near_miss) in ENVIRONMENTS.items():
        env = Environment(name=f"module_{name}", verifier_code=verifier, timeout=30,
                          case_timeout=5, reference_solution=reference)
        for kind, answer in (("reference", reference), ("near_miss", near_miss)):
            keys.append((name, kind))
            envs.append(env)
            answers.append(answer)
    batch = local_client.eval(envs, answers, max_parallel=4)
    return dict(zip(keys, batch.results, strict=True))


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_the_reference_scores_one(judged, name):
    result = judged[name, "reference"]
    assert result.has_verdict and result.score == 1.0 and result.passed, result


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_the_near_miss_is_a_judged_zero(judged, name):
    result = judged[name, "near_miss"]
    assert result.has_verdict and result.score == 0.0 and not result.passed, result
