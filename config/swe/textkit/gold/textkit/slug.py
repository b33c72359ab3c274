import re
import unicodedata


def slugify(text, sep="-"):
    """Lower-case ASCII slug of `text`: every run of other characters becomes one `sep`."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^a-z0-9]+", sep, text.strip().lower())
    return text.strip(sep)
