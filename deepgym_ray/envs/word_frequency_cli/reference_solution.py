import re
import sys
from collections import Counter


def main() -> None:
    k = int(sys.argv[1])
    counts = Counter(word.lower() for word in re.findall(r"[A-Za-z]+", sys.stdin.read()))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    for word, count in ranked[:k]:
        print(word, count)


if __name__ == "__main__":
    main()
