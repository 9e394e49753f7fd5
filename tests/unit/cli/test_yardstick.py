"""The yardstick job: what it asks the cluster for, its script (hostile values stay
words), its checks, and how a run is judged."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from podium.cli.health_nodes import Judge, busbw_of
from podium.cli.yardstick import Yardstick
from podium.errors import SpecError
from podium.node.health.collective_perf import row, table_head
from podium.node.health.slow_nodes import Measured


def options(request: dict[str, object]) -> list[str]:
    tokens = request["options"]
    assert isinstance(tokens, list)
    return [str(t) for t in tokens]


def test_a_multi_node_run_is_exclusive_with_one_rank_per_gpu() -> None:
    request = Yardstick(gpus_per_node=8).request(4, "o-%j.out", "nccl-test", "10", ["a", "b"])
    opts = options(request)
    assert "--nodes=4" in opts and "--ntasks-per-node=8" in opts and "--gpus-per-node=8" in opts
    assert "--exclusive" in opts and "--nodelist=a,b" in opts and "--output=o-%j.out" in opts
    assert str(request["script"]).startswith("#!/bin/bash\n")


def test_one_node_on_cpus_asks_no_gpus_and_shares_the_node() -> None:
    opts = options(Yardstick(cpus_only=True).request(1, "o", "n", "10"))
    assert not any(o.startswith("--gpus") for o in opts) and "--exclusive" not in opts


def test_a_hostile_nccl_tests_directory_stays_one_word(tmp_path: Path) -> None:
    hostile = f"{tmp_path}/x'; touch {tmp_path}/owned; echo '"
    script = Yardstick(nccl_tests=hostile, collective="broadcast").script(1)
    # Run the script's search part only: it must look in the directory, not run it.
    search = script.split("if [ -n")[0]
    done = subprocess.run(["bash", "-c", search + 'echo "bin=$bin"'], capture_output=True)
    assert done.returncode == 0 and b"bin=\n" in done.stdout
    assert not (tmp_path / "owned").exists()
    assert shlex.quote(hostile) in script


def test_the_runner_is_used_when_no_binary_is_found() -> None:
    script = Yardstick(collective="alltoall", nccl_tests="/nonexistent").script(2)
    assert "-m podium.node.health.collective_perf alltoall -b 32M -e 32M" in script
    assert 'exec srun "$bin" -b 32M' in script


@pytest.mark.parametrize(
    ("stick", "message"),
    [
        (Yardstick(collective="allreduce"), "did you mean 'all_reduce'"),
        (Yardstick(minbytes="8Q"), "whole number with K, M or G"),
        (Yardstick(minbytes="1G", maxbytes="8M"), "give -b <= -e"),
        (Yardstick(gpus_per_node=0), "-g 0: give a whole number >= 1"),
        (Yardstick(iters=0), "-n 0"),
        (Yardstick(nccl_tests="build"), "absolute directory"),
    ],
)
def test_bad_settings_are_one_line_saying_what_is_right(stick: Yardstick, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        stick.check()


def _output(wrong: int = 0) -> str:
    cells = [(10.0, 1.0, 1.5, wrong), (10.0, 1.0, 1.5, wrong)]
    return "\n".join([*table_head(), row("all_reduce", 2, cells), row("all_reduce", 1024, cells)])


def test_a_run_is_judged_by_its_largest_message() -> None:
    assert busbw_of(_output()) == (1.5, "")
    assert busbw_of(_output(wrong=3)) == (None, "3 wrong values")
    assert busbw_of(None) == (None, "no output")
    assert busbw_of("# nothing\n") == (None, "no result rows")


def test_slow_is_below_the_fraction_of_the_expected_figure_or_failed() -> None:
    judge = Judge(expected=10.0, fraction=0.7)
    assert judge.slow(Measured(6.9)) and not judge.slow(Measured(7.0))
    assert judge.slow(Measured(None, "job 3 ended FAILED"))
    assert not Judge(expected=None, fraction=0.7).slow(Measured(0.001))
