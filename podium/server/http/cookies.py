"""Reading the dashboard's session cookie from a Cookie header."""

from __future__ import annotations

MAX_COOKIE_VALUES = 8  # values of one cookie name looked at (a tossed cookie or a few)


def cookie_values(header: bytes, name: str) -> list[str]:
    """Every value of cookie `name` in a Cookie header, in the order sent (at most
    MAX_COOKIE_VALUES). A browser sends one per (host, path) it holds, and cookies do
    not keep ports apart (RFC 6265 §8.5): a server on another port of the host can
    set one under the same name with a longer Path, which comes first. So a session
    is looked for in each, and such a tossed cookie cannot lock anyone out."""
    found = []
    for part in header.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            found.append(value)
            if len(found) == MAX_COOKIE_VALUES:
                break
    return found


__all__ = ["MAX_COOKIE_VALUES", "cookie_values"]
