"""srun's command line as srun reads it."""

from __future__ import annotations

import pytest

from podium.jobsteps.srun_options import parse


def test_options_stop_at_the_command_and_take_every_spelling() -> None:
    opts = parse(["-n4", "-c", "2", "--gpus-per-task=1", "-lu", "--mpi=pmix", "-K", "python3",
                  "train.py", "-n", "9"])  # fmt: skip
    assert opts.argv == ["python3", "train.py", "-n", "9"]
    assert (opts.ntasks, opts.cpus_per_task, opts.gpus_per_task) == (4, 2, 1)
    assert opts.label and opts.unbuffered and opts.kill_on_bad_exit
    assert opts.accepted == ["--mpi"]


def test_values_and_separator() -> None:
    opts = parse(["--ntasks", "2", "--output", "o-%t", "--wait=5", "--kill-on-bad-exit=0",
                  "--", "-weird-command"])  # fmt: skip
    assert opts.argv == ["-weird-command"] and opts.output == "o-%t"
    assert opts.wait == 5 and not opts.kill_on_bad_exit
    assert parse(["--gpus=h100:2", "x"]).gpus == 2


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--bogus", "x"], ["unrecognized option '--bogus'"]),
        (["-n", "0", "x"], ["--ntasks", ">= 1"]),
        (["-n", "two", "x"], ["--ntasks", "'two'"]),
        (["--multi-prog", "conf"], ["--multi-prog", "SLURM_PROCID"]),
        (["--label=yes", "x"], ["--label takes no value"]),
        (["-n"], ["--ntasks needs a value"]),
        (["-n", "2"], ["no command"]),
        (["--open-mode=sideways", "x"], ["append or truncate"]),
    ],
)
def test_bad_command_lines_say_what_is_wrong(args: list[str], words: list[str]) -> None:
    with pytest.raises(ValueError) as err:
        parse(args)
    for word in words:
        assert word in str(err.value)
