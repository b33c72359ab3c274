from textkit import slugify


def test_lowercase():
    assert slugify("Hello") == "hello"


def test_strips_edges():
    assert slugify("  hi there! ") == "hi-there"


def test_unicode_accents():
    assert slugify("Café Crème") == "cafe-creme"


def test_digits_kept():
    assert slugify("route 66") == "route-66"


def test_collapses_runs():
    assert slugify("Hello,  World!") == "hello-world"


def test_custom_separator_collapsed():
    assert slugify("a -- b", sep="_") == "a_b"
