"""shelfdep: small text helpers for shop software."""
import re
import unicodedata

__version__ = "1.0"
__all__ = ["slugify"]


def slugify(text, sep="-"):
    """Lower-case ASCII words of `text` joined by `sep`: "Blue Mug!" -> "blue-mug"."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    return sep.join(words)
