"""Command-line words of Slurm's tools, read the way they read them: `-x VALUE`,
`--long VALUE` or `--long=VALUE`, bare flags, and job ids."""

from __future__ import annotations

from collections.abc import Mapping

from podium.api import selection


def job_ids(text: str) -> list[int]:
    """Job ids separated by commas; an array task's `12_3` names job 12's task."""
    ids = []
    for part in text.split(","):
        base = part.strip().split("_", 1)[0]
        if not base.isascii() or not base.isdigit():
            raise ValueError(f"invalid job id {part!r}: expected numbers like 12 or 12,13")
        ids.append(int(base))
    return ids


def job_refs(words: list[str]) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """Job ids and array tasks ("12_3") from words, as scancel and scontrol read them;
    raises ValueError in their words."""
    try:
        return selection.job_refs(words)
    except selection.BadJobId as exc:
        raise ValueError(
            f"invalid job id {exc.text!r}: expected numbers like 12, 12_3 or 12,13"
        ) from None


def read_options(
    args: list[str], valued: Mapping[str, str], flags: Mapping[str, str], unsupported: str
) -> tuple[list[tuple[str, str]], list[str]]:
    """`args` as (name, value) pairs in order, by the names `valued` (options that take
    a value) and `flags` (bare options, value "") map them to, and the other words;
    a repeated option gives a pair each time. Read as getopt_long reads Slurm's: `-x
    VALUE`, `-xVALUE`, `--long VALUE`, `--long=VALUE`, bundled short flags (`-nX`,
    `-nu NAME`), and `--` ending the options. An option in neither raises ValueError
    ending with `unsupported`."""
    given: list[tuple[str, str]] = []
    words: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            words.extend(args[i:])
            break
        key, eq, value = word.partition("=")
        if key.startswith("--") and key in valued:
            if not eq:
                value, i = _next_word(key, args, i)
            given.append((valued[key], value))
        elif word in flags:
            given.append((flags[word], ""))
        elif word.startswith("-") and not word.startswith("--") and len(word) > 1:
            i = _short_options(word, args, i, valued, flags, unsupported, given)
        elif word.startswith("-") and len(word) > 1:
            raise ValueError(f"option {word} is not supported here ({unsupported})")
        else:
            words.append(word)
    return given, words


def _short_options(
    word: str,
    args: list[str],
    i: int,
    valued: Mapping[str, str],
    flags: Mapping[str, str],
    unsupported: str,
    given: list[tuple[str, str]],
) -> int:
    """Read one word of short options (`-n`, `-nX`, `-j17`, `-nu` taking the next
    word) into `given`; the index of the next word."""
    at = 1
    while at < len(word):
        option = "-" + word[at]
        at += 1
        if option in flags:
            given.append((flags[option], ""))
        elif option in valued:
            value = word[at:]
            if not value:
                value, i = _next_word(option, args, i)
            given.append((valued[option], value))
            return i
        else:
            shown = option if at == 2 else f"{option} (in {word})"
            raise ValueError(f"option {shown} is not supported here ({unsupported})")
    return i


def _next_word(option: str, args: list[str], i: int) -> tuple[str, int]:
    """The value of `option` given as the next word, `args[i]`, and the index after it."""
    if i == len(args):
        raise ValueError(f"{option} needs a value")
    return args[i], i + 1
