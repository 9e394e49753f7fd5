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
        (["--frob=1"], r"option --frob=1 is not supported here"),
        (["-nu"], r"-u needs a value"),
        (["--name"], r"--name needs a value"),
    ],
)
def test_unknown_options_and_missing_values_are_refused(args: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read_options(args, VALUED, FLAGS, "see the docs")
