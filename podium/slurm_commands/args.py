"""Command-line words of Slurm's tools, read the way they read them: `-x VALUE`,
`--long VALUE` or `--long=VALUE`, bare flags, and job ids."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from podium.api import selection
from podium.api.long_options import resolve_long


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


class InSlurmsWords(ValueError):
    """An error printed as Slurm prints it, without the tool's `TOOL: error:` prefix
    (`Partition x not found`, `slurm_load_jobs error: ...`)."""


def read_options(
    args: list[str],
    valued: Mapping[str, str],
    flags: Mapping[str, str],
    unsupported: str,
    optional: Collection[str] = (),
) -> tuple[list[tuple[str, str]], list[str]]:
    """`args` as (name, value) pairs in order, by the names `valued` (options that take
    a value) and `flags` (bare options, value "") map them to, and the other words;
    a repeated option gives a pair each time. Read as getopt_long reads Slurm's: `-x
    VALUE`, `-xVALUE`, `--long VALUE`, `--long=VALUE`, any unambiguous prefix of a long
    option (`--job` for `--jobs`), bundled short flags (`-nX`, `-nu NAME`), and `--`
    ending the options. An option in neither raises ValueError ending with
    `unsupported`; an ambiguous prefix raises it in getopt_long's words. Options
    whose meaning is in `optional` take a value only attached (`-j12`, `--jobs=12`),
    as getopt's optional arguments: bare, their value is ""."""
    grammar = _Grammar(valued, flags, unsupported, optional)
    given: list[tuple[str, str]] = []
    words: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            words.extend(args[i:])
            break
        if word.startswith("--") and len(word) > 2:
            i = _long_option(word, args, i, grammar, given)
        elif word in flags:
            given.append((flags[word], ""))
        elif word.startswith("-") and len(word) > 1:
            i = _short_options(word, args, i, grammar, given)
        else:
            words.append(word)
    return given, words


class _Grammar:
    """A tool's options: `valued` and `flags` map each spelling to its meaning;
    `unsupported` ends the error for any other; `optional` meanings take a value only
    attached (see read_options). A plain class: typing is not loaded on this path."""

    __slots__ = ("flags", "optional", "unsupported", "valued")

    def __init__(
        self,
        valued: Mapping[str, str],
        flags: Mapping[str, str],
        unsupported: str,
        optional: Collection[str],
    ) -> None:
        self.valued, self.flags, self.unsupported, self.optional = (
            valued, flags, unsupported, optional,
        )  # fmt: skip

    def parts(
        self,
    ) -> tuple[Mapping[str, str], Mapping[str, str], str, Collection[str]]:
        return self.valued, self.flags, self.unsupported, self.optional


def _long_option(
    word: str, args: list[str], i: int, grammar: _Grammar, given: list[tuple[str, str]]
) -> int:
    """Read one long option (`--name`, `--name=VALUE`, `--name VALUE`, or any
    unambiguous prefix of its name, as getopt_long reads it) into `given`; the index of
    the next word."""
    valued, flags, unsupported, optional = grammar.parts()
    key, eq, value = word.partition("=")
    longs = [n for n in (*valued, *flags) if n.startswith("--")]
    name = resolve_long(key, longs, lambda n: valued.get(n) or flags.get(n))
    if name is None:
        raise ValueError(f"option {key} is not supported here ({unsupported})")
    if name in valued:
        if not eq and valued[name] not in optional:
            value, i = _next_word(name, args, i)
        given.append((valued[name], value))
    elif eq:
        raise ValueError(f"option {name} takes no value (got {word!r})")
    else:
        given.append((flags[name], ""))
    return i


def _short_options(
    word: str, args: list[str], i: int, grammar: _Grammar, given: list[tuple[str, str]]
) -> int:
    """Read one word of short options (`-n`, `-nX`, `-j17`, `-nu` taking the next
    word) into `given`; the index of the next word."""
    valued, flags, unsupported, optional = grammar.parts()
    at = 1
    while at < len(word):
        option = "-" + word[at]
        at += 1
        if option in flags:
            given.append((flags[option], ""))
        elif option in valued:
            value = word[at:]
            if not value and valued[option] not in optional:
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
