"""Slurm's command lines read as its getopt_long reads them (issue 27, item 7)."""

from __future__ import annotations

import pytest

from podium.slurm_commands.args import read_options

VALUED = {"-j": "jobs", "--jobs": "jobs", "-u": "user", "-S": "start", "--name": "name"}
FLAGS = {"-n": "noheader", "-X": "alloc", "--json": "json"}


@pytest.mark.parametrize(
    ("args", "given", "words"),
    [
        (["-j17"], [("jobs", "17")], []),
        (["-S1970-01-01-00:00:01"], [("start", "1970-01-01-00:00:01")], []),
        (["-nu", "alice"], [("noheader", ""), ("user", "alice")], []),
        (["-nXj", "3"], [("noheader", ""), ("alloc", ""), ("jobs", "3")], []),
        (["-nXj3"], [("noheader", ""), ("alloc", ""), ("jobs", "3")], []),
        (["--jobs=4", "--name", "x"], [("jobs", "4"), ("name", "x")], []),
        (["-j", "1", "-j", "2"], [("jobs", "1"), ("jobs", "2")], []),  # each kept
        (["--", "-n"], [], ["-n"]),
        (["12", "-n"], [("noheader", "")], ["12"]),
    ],
)
def test_options_as_getopt_reads_them(
    args: list[str], given: list[tuple[str, str]], words: list[str]
) -> None:
    assert read_options(args, VALUED, FLAGS, "see the docs") == (given, words)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-nq"], r"option -q \(in -nq\) is not supported here \(see the docs\)"),
        (["-q"], r"option -q is not supported here"),
        (["--frob=1"], r"option --frob is not supported here"),
        (["--json=1"], r"option --json takes no value"),
        (["-nu"], r"-u needs a value"),
        (["--name"], r"--name needs a value"),
    ],
)
def test_unknown_options_and_missing_values_are_refused(args: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read_options(args, VALUED, FLAGS, "see the docs")


@pytest.mark.parametrize(
    ("args", "given"),
    [
        (["--job", "3"], [("jobs", "3")]),  # issue 45: sacct --job 3, squeue --job=1
        (["--job=1"], [("jobs", "1")]),
        (["--na=x", "--js"], [("name", "x"), ("json", "")]),
        (["--jobs=2"], [("jobs", "2")]),  # the whole name, of course
    ],
)
def test_long_options_by_any_unambiguous_prefix(
    args: list[str], given: list[tuple[str, str]]
) -> None:
    assert read_options(args, VALUED, FLAGS, "see the docs") == (given, [])


def test_an_ambiguous_prefix_is_refused_in_getopts_words() -> None:
    valued = {"--jobs": "jobs", "--json-out": "out"}
    with pytest.raises(
        ValueError, match="option '--j' is ambiguous; possibilities: '--jobs' '--json-out'"
    ):
        read_options(["--j=1"], valued, {}, "see the docs")
    # aliases of one option are one option
    assert read_options(["--us=a"], {"--user": "user", "--users": "user"}, {}, "x")[0] == [
        ("user", "a")
    ]
