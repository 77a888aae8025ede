"""A file with a syntax error on line 9: a stray closing parenthesis."""


def area(width: float, height: float) -> float:
    return width * height


def perimeter(width: float, height: float) -> float:
    return 2 * (width + height))


print(area(2, 3), perimeter(2, 3))
