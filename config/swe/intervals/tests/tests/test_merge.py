from intervals import merge, total_length


def test_overlapping():
    assert merge([(1, 4), (2, 6)]) == [(1, 6)]


def test_disjoint_kept_sorted():
    assert merge([(8, 9), (1, 2)]) == [(1, 2), (8, 9)]


def test_empty():
    assert merge([]) == []


def test_contained():
    assert merge([(1, 10), (3, 4)]) == [(1, 10)]


def test_touching_merged():
    assert merge([(1, 2), (2, 3)]) == [(1, 3)]


def test_total_length_touching():
    assert total_length([(0, 5), (5, 7), (7, 8)]) == 8
