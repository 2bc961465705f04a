"""StopAsyncIteration crossing the proxy ends a verifier's async iteration early."""

from harness import Attack

VERIFIER = '''
import asyncio
from deepgym_solution import load_solution


class Answers:
    def __init__(self, sol, inputs):
        self.sol, self.inputs = sol, iter(inputs)

    def __aiter__(self):
        return self

    async def __anext__(self):
        for x in self.inputs:
            return x, self.sol.double(x)
        raise StopAsyncIteration


async def check(sol):
    async for x, got in Answers(sol, [1, 2, 3]):
        if got != 2 * x:
            return False
    return True


def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    try:
        ok = asyncio.run(check(sol))
    except Exception:
        ok = False
    return 1.0 if ok else 0.0
'''

ATTACK = Attack(
    name="stopasynciteration_through_proxy",
    tags=("control-flow",),
    tries="to end a verifier's async for over its answers before the first comparison by "
          "raising StopAsyncIteration in the call",
    solution="def double(x):\n    raise StopAsyncIteration\n",
    verifier=VERIFIER,
    right="def double(x):\n    return 2 * x\n",
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
