"""shelfdep: small text helpers for shop software.

2.0 (breaking): `slugify(text, sep)` is now `make_slug(text, *, separator)`; the old name is
gone. Slugs are capped at `max_length` characters (default 64).
"""
import re
import unicodedata

__version__ = "2.0"
__all__ = ["make_slug"]


def make_slug(text, *, separator="-", max_length=64):
    """Lower-case ASCII words of `text` joined by `separator`, at most `max_length` long."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    return separator.join(words)[:max_length].rstrip(separator)
