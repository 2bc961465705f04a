import sys

PAIRS = {")": "(", "]": "[", "}": "{"}

for line in sys.stdin.read().split("\n"):
    stack = []
    ok = True
    for ch in line.strip():
        if ch in "([{":
            stack.append(ch)
        elif not stack or stack.pop() != PAIRS[ch]:
            ok = False
            break
    print("YES" if ok and not stack else "NO")
