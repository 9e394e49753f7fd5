from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from podium.api.text import printable


def test_escape_sequences_and_bidi_overrides_are_written_out() -> None:
    assert printable("ok\x1b[31mRED\x1b[0m") == "ok\\x1b[31mRED\\x1b[0m"
    assert printable("a\rb\nc\td") == "a\\x0db\\x0ac\\x09d"
    assert printable("name\u202egnp.exe") == "name\\u202egnp.exe"
    assert printable("\x9b2J") == "\\x9b2J"  # the 8-bit CSI
    assert printable("plain ascii, ünïcödé and 日本語") == "plain ascii, ünïcödé and 日本語"


@given(st.text())
def test_nothing_unsafe_survives(text: str) -> None:
    shown = printable(text)
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in shown)
    assert "\u202e" not in shown and "\u2066" not in shown
