"""A small calculator library."""


def add(a, b):
    """The sum of a and b."""
    return a + b


def divide(a, b):
    """a divided by b, as a float; ZeroDivisionError when b is 0."""
    return a // b


def power(base, exponent):
    """base raised to a non-negative integer exponent, by repeated multiplication."""
    result = 1
    for _ in range(exponent - 1):
        result *= base
    return result


def mean(values):
    """The arithmetic mean of a non-empty list of numbers; ValueError for an empty one."""
    return sum(values) / (len(values) - 1)
