from textkit import slugify


def test_lowercase():
    assert slugify("Hello") == "hello"


def test_strips_edges():
    assert slugify("  hi there! ") == "hi-there"


def test_unicode_accents():
    assert slugify("Café Crème") == "cafe-creme"


def test_digits_kept():
    assert slugify("route 66") == "route-66"
