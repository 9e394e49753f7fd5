"""`podium submit --help`: every option the table knows is listed once, in groups."""

from __future__ import annotations

from podium.cli.submit_help import GROUPS, submit_help
from podium.jobspec.options import OPTIONS, SLURM_ONLY


def test_every_option_is_listed_once() -> None:
    listed = [long for entries in GROUPS.values() for long, _, _ in entries]
    assert sorted(listed) == sorted(set(OPTIONS) - set(SLURM_ONLY))  # none missing, none unknown
    assert len(listed) == len(set(listed))


def test_the_text_reads_like_sbatchs() -> None:
    text = submit_help()
    for line in (
        "Parallel run options:",
        "GPU scheduling options:",
        "  -G, --gpus=n                count of GPUs required for the job",
        "  -H, --hold                  submit job in held state",
        "      --nice[=value]          decrease scheduling priority by value",
        "  -h, --help                  show this help message",
    ):
        assert line in text.splitlines() or line in text, line
    assert "--reservation" in text  # engine-only options are named too
