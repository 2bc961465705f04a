"""Two sum: a function, and a script that answers stdin in answer.txt."""

import sys


def two_sum(nums, target):
    seen = {}
    for j, value in enumerate(nums):
        if target - value in seen:
            return [seen[target - value], j]
        seen[value] = j
    return []


if __name__ == "__main__":
    numbers = [int(x) for x in sys.stdin.readline().split()]
    pair = two_sum(numbers, int(sys.stdin.readline()))
    line = " ".join(map(str, pair))
    with open("answer.txt", "w") as f:
        f.write(line + "\n")
    print(line)
