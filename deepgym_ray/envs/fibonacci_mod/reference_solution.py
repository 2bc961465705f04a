def fib_mod(n: int, m: int) -> int:
    # Fast doubling: F(2k) = F(k) * (2F(k+1) - F(k)), F(2k+1) = F(k)^2 + F(k+1)^2.
    a, b = 0, 1  # F(0), F(1)
    for bit in bin(n)[2:]:
        a, b = a * ((2 * b - a) % m) % m, (a * a + b * b) % m
        if bit == "1":
            a, b = b, (a + b) % m
    return a % m
