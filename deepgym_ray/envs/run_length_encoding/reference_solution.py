from itertools import groupby


def encode(text: str) -> str:
    return "".join(f"{len(list(run))}{letter}" for letter, run in groupby(text))


def decode(encoded: str) -> str:
    out = []
    digits = ""
    for ch in encoded:
        if ch.isdigit():
            digits += ch
        else:
            out.append(ch * int(digits))
            digits = ""
    return "".join(out)
