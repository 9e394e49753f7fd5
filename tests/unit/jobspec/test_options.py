from __future__ import annotations

import pytest

from podium.errors import SpecError
from podium.jobspec.options import Given, parse_tokens, script_directives, split_command_line


def test_long_short_and_attached_forms() -> None:
    given, rest = parse_tokens(
        ["--job-name=a", "--ntasks", "2", "-G2", "-c", "3", "-J=b", "--exclusive", "--hold"], "x"
    )
    assert [(g.long, g.value) for g in given] == [
        ("job-name", "a"),
        ("ntasks", "2"),
        ("gpus", "2"),
        ("cpus-per-task", "3"),
        ("job-name", "b"),
        ("exclusive", None),
        ("hold", None),
    ]
    assert rest == []


def test_unknown_option_suggests_the_nearest() -> None:
    with pytest.raises(SpecError, match=r"x: unknown option --gpsu \(did you mean --gpus\?\)"):
        parse_tokens(["--gpsu=2"], "x")


def test_long_options_by_unambiguous_prefix_as_sbatch() -> None:
    """Issue 45: getopt_long takes any unambiguous prefix (`--job=x` is --job-name);
    a prefix of several options is refused as sbatch refuses it."""
    given, _ = parse_tokens(["--job=x", "--gpus-per-n=2", "--exclus"], "x")
    assert [(g.long, g.value) for g in given] == [
        ("job-name", "x"), ("gpus-per-node", "2"), ("exclusive", None)]  # fmt: skip
    with pytest.raises(SpecError, match=r"x: option '--gpu' is ambiguous; possibilities: "):
        parse_tokens(["--gpu=2"], "x")
    with pytest.raises(
        SpecError, match=r"'--tim' is ambiguous; possibilities: '--time' '--time-min'"
    ):
        parse_tokens(["--tim=5"], "x")


def test_engine_only_options_are_read_for_the_backend_to_judge() -> None:
    given, _ = parse_tokens(["--reservation=r1", "-M", "c2", "-s", "--x11"], "x")
    assert [(g.long, g.value) for g in given] == [
        ("reservation", "r1"),
        ("clusters", "c2"),
        ("oversubscribe", None),
        ("x11", None),
    ]


@pytest.mark.parametrize(
    "tokens,message",
    [
        (["--ntasks"], "--ntasks needs a value"),
        (["--hold=1"], "--hold takes no value"),
        (["-Q1"], "-Q takes no value"),
        (["stray"], "unexpected argument 'stray'"),
    ],
)
def test_malformed_tokens(tokens: list[str], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_tokens(tokens, "x")


def test_split_command_line_finds_script_and_its_arguments() -> None:
    given, script, args = split_command_line(["-n", "2", "train.sh", "--lr", "0.1"])
    assert [g.long for g in given] == ["ntasks"] and script == "train.sh"
    assert args == ["--lr", "0.1"]
    _, script, args = split_command_line(["--wrap", "echo hi"])
    assert script is None and args == []


def test_directives_are_read_until_the_first_command() -> None:
    script = (
        "#!/bin/bash\n"
        "# a comment\n"
        "#SBATCH --job-name=x  # trailing comment\n"
        "\n"
        "#PODIUM --checkpoint-dir=ckpt\n"
        "#SBATCHX --ignored\n"
        "  #SBATCH --indented-is-a-comment\n"
        "echo start\n"
        "#SBATCH --gpus=8\n"
    )
    given = script_directives(script)
    assert given == [
        Given("job-name", "x", "line 3 (#SBATCH --job-name=x  # trailing comment)"),
        Given("checkpoint-dir", "ckpt", "line 5 (#PODIUM --checkpoint-dir=ckpt)"),
    ]


def test_directive_errors_name_the_line() -> None:
    with pytest.raises(SpecError, match=r"^line 2 \(#SBATCH --bogus\): unknown option --bogus"):
        script_directives("#!/bin/sh\n#SBATCH --bogus\n")
    with pytest.raises(SpecError, match="only valid on the command line"):
        script_directives("#!/bin/sh\n#SBATCH --wait\n")
    with pytest.raises(SpecError, match="write it as #PODIUM"):
        script_directives("#!/bin/sh\n#SBATCH --checkpoint-dir=x\n")
