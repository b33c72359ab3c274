from ratio import Rational


def test_reduces():
    assert str(Rational(6, 8)) == "3/4"


def test_add():
    assert Rational(1, 2) + Rational(1, 3) == Rational(5, 6)


def test_integer_str():
    assert str(Rational(4, 2)) == "2"


def test_zero_denominator_rejected():
    try:
        Rational(1, 0)
    except ZeroDivisionError:
        return
    raise AssertionError("no ZeroDivisionError")


def test_hashable():
    assert len({Rational(1, 2), Rational(2, 4)}) == 1
