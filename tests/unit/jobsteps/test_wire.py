"""The client/relay protocol of interactive allocations: what goes in comes out."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podium.jobsteps.wire import decode, header, read_header

ARG = st.text(alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)))


@given(st.lists(ARG, max_size=6), st.booleans(), st.booleans())
def test_a_header_reads_back_as_written(args: list[str], pty: bool, step: bool) -> None:
    assert read_header(header(args, pty, step, [24, 80, 0, 0])) == (args, pty, step, [24, 80, 0, 0])


def test_arguments_that_are_not_utf8_survive() -> None:
    odd = os.fsdecode(b"caf\xe9")
    assert read_header(header(["echo", odd, "a\nb"], False, True, [1, 2, 3, 4]))[0] == [
        "echo", odd, "a\nb"]  # fmt: skip


@pytest.mark.parametrize("data", [b"", b"hello\0\n", b"podium-attach-1\0x\0\n"])
def test_anything_else_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        read_header(data)


def test_messages() -> None:
    assert decode(b"signal 2") == {"signal": 2}
    assert decode(b"winsize 24,80,0,0") == {"winsize": [24, 80, 0, 0]}
    assert decode(b"exit 130") == {"exit": 130}
    assert decode(b"exit x") is None and decode(b"rm -rf /") is None
