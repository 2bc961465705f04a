_VALUES = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
    (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]


def to_roman(number: int) -> str:
    out = []
    for value, symbol in _VALUES:
        count, number = divmod(number, value)
        out.append(symbol * count)
    return "".join(out)


def from_roman(numeral: str) -> int:
    single = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for ch, nxt in zip(numeral, numeral[1:] + " ", strict=False):
        value = single[ch]
        # A symbol before a larger one is subtracted (the IV, IX, ... pairs).
        total += -value if nxt != " " and single[nxt] > value else value
    return total
