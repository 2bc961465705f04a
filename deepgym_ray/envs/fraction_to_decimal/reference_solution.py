def fraction_to_decimal(numerator: int, denominator: int) -> str:
    sign = "-" if (numerator < 0) != (denominator < 0) and numerator != 0 else ""
    n, d = abs(numerator), abs(denominator)
    whole, remainder = divmod(n, d)
    if remainder == 0:
        return f"{sign}{whole}"
    digits: list[str] = []
    seen: dict[int, int] = {}  # remainder -> index of the digit it produced
    while remainder and remainder not in seen:
        seen[remainder] = len(digits)
        digit, remainder = divmod(remainder * 10, d)
        digits.append(str(digit))
    if remainder:
        start = seen[remainder]
        fraction = "".join(digits[:start]) + "(" + "".join(digits[start:]) + ")"
    else:
        fraction = "".join(digits)
    return f"{sign}{whole}.{fraction}"
