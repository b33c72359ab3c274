from intervals import merge, total_length


def test_touching_merged():
    assert merge([(1, 2), (2, 3)]) == [(1, 3)]


def test_total_length_touching():
    assert total_length([(0, 5), (5, 7), (7, 8)]) == 8
