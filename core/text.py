"""Text cut to fit a list cell or a title: at a word's end, with an ellipsis."""

from __future__ import annotations

from django.utils.text import Truncator

ELLIPSIS = "\u2026"
_TRAILING = " \t,;:.-\u2013\u2014([\u201c"  # left dangling before the ellipsis by a cut
_ENDS_A_WORD = frozenset(",.;:!?)]\u201d\"'")  # a cut before one of these keeps the whole word


def excerpt(text: str, limit: int) -> str:
    """``text`` on one line (runs of whitespace as one space), at most ``limit`` characters:
    whole words followed by an ellipsis when it is longer, never a word cut in two ("Sent an
    e-mail (A quick idea fo" reads as a typo). A first word longer than ``limit`` alone is cut
    where the limit falls (Django's Truncator: it counts a combining accent with its letter)."""
    flat = " ".join(text.split())
    cut = Truncator(flat).chars(limit, truncate=ELLIPSIS)
    if cut == flat:
        return flat
    kept = cut.removesuffix(ELLIPSIS)
    following = flat[len(kept)]
    inside_a_word = not following.isspace() and following not in _ENDS_A_WORD
    if inside_a_word and " " in kept:
        kept = kept.rsplit(" ", 1)[0]
    return kept.rstrip(_TRAILING) + ELLIPSIS
