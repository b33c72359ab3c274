from math import gcd


class Rational:
    """An exact fraction p/q in lowest terms."""

    def __init__(self, p, q=1):
        if q == 0:
            raise ZeroDivisionError("denominator is zero")
        g = gcd(p, q)
        self.p, self.q = p // g, q // g

    def __add__(self, other):
        other = other if isinstance(other, Rational) else Rational(other)
        return Rational(self.p * other.q + other.p * self.q, self.q * other.q)

    def __eq__(self, other):
        other = other if isinstance(other, Rational) else Rational(other)
        return (self.p, self.q) == (other.p, other.q)

    def __hash__(self):
        return hash((self.p, self.q))

    def __str__(self):
        return str(self.p) if self.q == 1 else f"{self.p}/{self.q}"

    __repr__ = __str__
