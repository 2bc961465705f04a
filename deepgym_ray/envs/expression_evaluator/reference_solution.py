import re


def evaluate(expression: str) -> int:
    # Recursive descent over tokens: expr := term (('+'|'-') term)*,
    # term := factor ('*' factor)*, factor := '-' factor | number | '(' expr ')'.
    tokens = re.findall(r"\d+|[-+*()]", expression)
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        position += 1
        return tokens[position - 1]

    def expr() -> int:
        value = term()
        while peek() in ("+", "-"):
            value = value + term() if take() == "+" else value - term()
        return value

    def term() -> int:
        value = factor()
        while peek() == "*":
            take()
            value *= factor()
        return value

    def factor() -> int:
        token = take()
        if token == "-":
            return -factor()
        if token == "(":
            value = expr()
            take()  # the closing parenthesis
            return value
        return int(token)

    return expr()
