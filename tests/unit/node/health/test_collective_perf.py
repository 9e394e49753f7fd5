"""Podium's nccl-tests runner: its table is nccl-tests' own, cell for cell, and its
sizes, counts and options follow nccl-tests' rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from podium.node.health.check_results import Status
from podium.node.health.collective_perf import (
    element_count,
    parse_args,
    parse_size,
    row,
    sizes,
    table_head,
    time_text,
)
from podium.node.health.nccl import NcclBandwidthCheck, parse_nccl_tests

# Lines of a real all_reduce_perf run (nccl-tests 2.x, 16 H100s on two hosts).
REAL_HEAD = [
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
    "     (us)  (GB/s)  (GB/s)       ",
]
REAL_ROWS = [
    "           8             2     float     sum      -1    135.8    0.00    0.00      0"
    "    123.5    0.00    0.00      0",
    "  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0"
    "    47743  179.92  337.35      0",
    "      131072         32768     float     sum      -1    159.3    0.82    1.54      0"
    "    169.0    0.78    1.45      0",
]


def test_the_header_is_nccl_tests_header() -> None:
    head = table_head()
    assert head[2] == REAL_HEAD[0]
    assert head[3] == REAL_HEAD[1]
    assert head[1].split() == ["#", "out-of-place", "in-place"]


@pytest.mark.parametrize(
    ("count", "cells", "real"),
    [
        (2, [(135.8, 0.0, 0.0, 0), (123.5, 0.0, 0.0, 0)], REAL_ROWS[0]),
        (2147483648, [(47535, 180.71, 338.82, 0), (47743, 179.92, 337.35, 0)], REAL_ROWS[1]),
        (32768, [(159.3, 0.82, 1.54, 0), (169.0, 0.78, 1.45, 0)], REAL_ROWS[2]),
    ],
)
def test_a_row_is_nccl_tests_row(
    count: int, cells: list[tuple[float, float, float, int]], real: str
) -> None:
    assert row("all_reduce", count, cells) == real


def test_rows_of_collectives_without_an_op_or_with_a_root() -> None:
    assert row("all_gather", 3, [(1.0, 0, 0, 0)] * 2).split()[3:5] == ["none", "-1"]
    assert row("broadcast", 2, [(1.0, 0, 0, 0)] * 2).split()[3:5] == ["none", "0"]
    assert row("reduce_scatter", 4, [(1.0, 0, 0, 0)] * 2).split()[3:5] == ["sum", "-1"]


def test_time_column_precision_follows_nccl_tests() -> None:
    assert time_text(36.031) == "  36.03"
    assert time_text(135.84) == "  135.8"
    assert time_text(12646.4) == "  12646"


def test_the_parser_reads_the_runner_table() -> None:
    text = "\n".join(
        [
            "#  Rank  0 Group  0 Pid   1 on     host-a device  0 [cpu] gloo",
            "#  Rank  1 Group  0 Pid   2 on     host-b device  0 [cpu] gloo",
            *table_head(),
            row("all_reduce", 262144, [(1944.5, 0.54, 0.54, 0), (775.7, 1.35, 1.35, 0)]),
            "# Avg bus bandwidth    : 0.9450 ",
        ]
    )
    run = parse_nccl_tests(text)
    assert run.ranks == 2 and run.avg_busbw == 0.945
    assert run.rows[0].size == 1048576 and run.rows[0].busbw == 0.54 and run.rows[0].wrong == "0"


def test_sizes_step_by_the_factor_up_to_the_largest() -> None:
    assert sizes(8, 1 << 20, 32) == [8, 256, 8192, 262144]
    assert sizes(8, 8, 2) == [8]
    assert sizes(1 << 20, 1 << 20, 1) == [1 << 20]


def test_counts_split_among_ranks_where_the_collective_splits() -> None:
    assert element_count("all_reduce", 8, 3) == 2
    assert element_count("all_gather", 8, 3) == 3  # at least one element per rank
    assert element_count("alltoall", 1 << 20, 3) == 262143  # a multiple of 3
    assert element_count("broadcast", 2, 4) == 1


@pytest.mark.parametrize("text", ["", "8X", "-1", "0", "1.5M", "M"])
def test_bad_sizes_say_what_would_be_right(text: str) -> None:
    with pytest.raises(ValueError, match="whole number with K, M or G"):
        parse_size(text)


def test_sizes_in_binary_units() -> None:
    assert parse_size("8") == 8 and parse_size("64K") == 65536 and parse_size("8g") == 8 << 30


def test_options_are_nccl_tests_letters(capsys: pytest.CaptureFixture[str]) -> None:
    opts = parse_args(["alltoall", "-b", "1K", "-e", "1M", "-f", "4", "-n", "3", "-w", "1"])
    assert (opts.collective, opts.minbytes, opts.maxbytes) == ("alltoall", 1024, 1 << 20)
    assert (opts.stepfactor, opts.iters, opts.warmup, opts.check) == (4, 3, 1, True)
    with pytest.raises(SystemExit) as exited:
        parse_args(["all_reduce", "-g", "2"])
    assert exited.value.code == 2
    assert "-g must be 1" in capsys.readouterr().err


def test_rows_of_reduce_gather_and_scatter_have_their_root() -> None:
    assert row("reduce", 2, [(1.0, 0, 0, 0)] * 2).split()[3:5] == ["sum", "0"]
    assert row("gather", 3, [(1.0, 0, 0, 0)] * 2).split()[3:5] == ["none", "0"]
    assert row("scatter", 3, [(1.0, 0, 0, 0)] * 2).split()[3:5] == ["none", "0"]
    assert element_count("gather", 8, 3) == element_count("scatter", 8, 3) == 3


def test_one_ranks_row_has_no_bandwidth_and_the_check_does_not_judge_it(tmp_path: Path) -> None:
    """Issue 46: one rank's algbw (1,614-1,894 GB/s from a 30 us local call on an H100)
    read as a measurement; it is N/A, parsed as None, and the check says unknown."""
    line = row("all_reduce", 8388608, [(30.1, None, None, 0), (29.8, None, None, 0)])
    assert line.split()[5:9] == ["30.10", "N/A", "N/A", "0"]
    text = "\n".join(
        ["#  Rank  0 Group  0 Pid   1 on     host-a device  0 [0000:19:00] H100", *table_head(),
         line, "# Avg bus bandwidth    : N/A "]
    )  # fmt: skip
    run = parse_nccl_tests(text)
    assert run.ranks == 1 and run.avg_busbw is None
    assert run.rows[0].busbw is None and run.rows[0].time_us == 30.1
    out = tmp_path / "nccl.out"
    out.write_text(text)
    [result] = NcclBandwidthCheck(out, "h100").run()
    assert result.status == Status.UNKNOWN and "one rank" in result.reason


def test_a_real_nccl_tests_run_of_one_rank_is_not_judged_either(tmp_path: Path) -> None:
    """nccl-tests itself prints busbw 0 for one rank: not 'below 460 GB/s, drain'."""
    out = tmp_path / "nccl.out"
    out.write_text("\n".join(["#  Rank  0 Group  0 Pid 1 on a device 0 [0x19] H100",
                              *REAL_HEAD, REAL_ROWS[1]]))  # fmt: skip
    [result] = NcclBandwidthCheck(out, "h100").run()
    assert result.status == Status.UNKNOWN, result.reason
