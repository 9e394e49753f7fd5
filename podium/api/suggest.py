"""Did-you-mean suggestions for misspelt keys and options."""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not loaded on the lean path
if TYPE_CHECKING:
    from collections.abc import Iterable


def nearest(word: str, candidates: Iterable[str]) -> str | None:
    """Return the candidate closest to `word`, or None when nothing is close."""
    import difflib  # only on an error: not on the fast path

    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(
    word: str, candidates: Iterable[str], prefix: str = "", quote: bool = False
) -> str:
    """Return ' (did you mean PREFIXx?)' for the nearest candidate, or ''.

    With `quote`, the suggestion is in single quotes (for keys and command names).
    """
    best = nearest(word, candidates)
    if not best:
        return ""
    shown = f"'{prefix}{best}'" if quote else f"{prefix}{best}"
    return f" (did you mean {shown}?)"
