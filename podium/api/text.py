"""Making user text safe to show on a terminal.

Job names, comments, reasons and paths come from users and may hold ANSI escape
sequences, carriage returns or bidirectional overrides that would repaint or disguise
what an operator sees. `printable` escapes them; JSON output keeps the raw text.
"""

from __future__ import annotations

# C0 controls, DEL, C1 controls, bidirectional overrides and isolates, lone surrogates.
UNSAFE = "[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"

TYPE_CHECKING = False  # typing itself is not loaded on the client's lean path
if TYPE_CHECKING:
    import re


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control, bidi-override and surrogate character written as an
    escape (`\\x1b`, `\\u202e`), so that it shows as one inert line on a terminal.
    Text without such characters is returned unchanged."""
    if text.isascii() and text.isprintable():  # the common case, in C
        return text
    import re  # only for text that needs it: not on the lean path's usual run

    return re.sub(UNSAFE, _escape, text)


__all__ = ["printable"]
