"""The NCCL yardstick across real hosts, and finding the slow node: `podium nccl-test`
and `podium health --deep --nodes` on a real Slurm cluster whose 4 nodes are hosts of
their own (network, UTS and mount namespaces), ranks on CPUs over gloo. One node is
made slow with a rate limit on its veth (scripts/slurm-testbed/node.sh slow)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from podium.node.health.nccl import FACTORS, parse_nccl_tests
from tests.integration.slurm_cluster import (
    PODIUM,
    SCRIPTS,
    TERMINAL,
    SlurmCluster,
    in_service,
)

# One worker runs the "slurm-hosts-2" modules one after another (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.xdist_group("slurm-hosts-2")]
NODES = "debug-st-g-[1-4]"


@pytest.fixture(scope="module")
def slurm(slurm_hosts: SlurmCluster) -> SlurmCluster:
    pytest.importorskip("torch")
    return in_service(slurm_hosts)


def _run(slurm: SlurmCluster, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PODIUM, *args],
        capture_output=True, text=True, env=slurm.env, cwd=cwd, timeout=300,
    )  # fmt: skip


def _hosts(output: str) -> list[str]:
    return re.findall(r"^#\s+Rank\s+\d+ Group\s+\d+ Pid\s+\d+ on\s+(\S+)", output, re.M)


def _check_table(output: str, collective: str, ranks: int, sizes: list[int]) -> None:
    """nccl-tests' table: one row per size, every value right, busbw by the formula."""
    run = parse_nccl_tests(output)
    assert run.ranks == ranks, output
    assert [r.size for r in run.rows] == sizes, output
    assert all(r.wrong == "0" for r in run.rows), output
    for r in run.rows:  # busbw = algbw x factor (both printed with 2 decimals)
        assert abs(r.busbw - r.algbw * FACTORS[collective](ranks)) <= 0.011, output
    assert "# Out of bounds values : 0 OK" in output and run.avg_busbw is not None


@pytest.mark.parametrize("nodes", [2, 4])
def test_nccl_test_prints_nccl_tests_table_across_hosts(
    slurm: SlurmCluster, tmp_path: Path, nodes: int
) -> None:
    done = _run(slurm, tmp_path, "nccl-test", "-N", str(nodes), "-b", "8", "-e", "1M", "-f", "32")
    assert done.returncode == 0, done.stderr + done.stdout
    assert sorted(_hosts(done.stdout)) == [f"debug-st-g-{i}" for i in range(1, nodes + 1)]
    _check_table(done.stdout, "all_reduce", nodes, [8, 256, 8192, 262144])
    job_id = re.search(r"nccl-test is job (\d+)", done.stderr)
    assert job_id is not None, done.stderr
    assert (tmp_path / f"nccl-test-{job_id[1]}.out").read_text() == done.stdout


@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter", "alltoall", "broadcast"])
def test_every_collective_runs_across_two_hosts(
    slurm: SlurmCluster, tmp_path: Path, collective: str
) -> None:
    done = _run(slurm, tmp_path, "nccl-test", collective, "-N", "2", "-b", "64K", "-e", "64K")
    assert done.returncode == 0, done.stderr + done.stdout
    _check_table(done.stdout, collective, 2, [65536])
    columns = [line.split() for line in done.stdout.splitlines() if line[:1] == " "]
    want = ("sum", "-1") if collective == "reduce_scatter" else ("none", "-1")
    assert tuple(columns[0][3:5]) == (("none", "0") if collective == "broadcast" else want)


def test_no_wait_prints_the_job_id(slurm: SlurmCluster, tmp_path: Path) -> None:
    done = _run(slurm, tmp_path, "nccl-test", "-N", "2", "-b", "1K", "-e", "1K", "--no-wait")
    assert done.returncode == 0 and done.stdout.strip().isdigit(), done.stderr
    job = slurm.wait_job(int(done.stdout), TERMINAL, timeout=120)
    assert job["state"] == "COMPLETED"
    _check_table((tmp_path / f"nccl-test-{job['job_id']}.out").read_text(), "all_reduce", 2, [1024])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nccl-test", "allreduce"], "did you mean 'all_reduce'"),
        (["nccl-test", "-b", "8X"], "whole number with K, M or G"),
        (["nccl-test", "-N", "0"], "-N 0: give a whole number of nodes >= 1"),
        (["nccl-test", "-w", "n;rm"], "not a host list"),
        (["health", "--deep", "--nodes", "debug-st-g-1"], "give two or more"),
        (["health", "--nodes", NODES], "give --deep with it"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    slurm: SlurmCluster, tmp_path: Path, args: list[str], message: str
) -> None:
    done = _run(slurm, tmp_path, *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def _node_sh(slurm: SlurmCluster, *args: str) -> None:
    done = subprocess.run(
        ["bash", str(SCRIPTS / "node.sh"), str(slurm.directory), *args],
        capture_output=True, text=True, env=slurm.env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.quiet  # its bounds hold on an otherwise idle machine
def test_bisection_names_and_drains_the_slow_node(slurm: SlurmCluster, tmp_path: Path) -> None:
    health = ["health", "--deep", "--nodes", NODES, "--size", "1M"]
    first = _run(slurm, tmp_path, *health)
    assert first.returncode == 0, first.stderr + first.stdout
    assert "recorded" in first.stdout and "as the baseline" in first.stdout
    _node_sh(slurm, "debug-st-g-3", "slow", "100mbit")
    try:
        found = _run(slurm, tmp_path, *health)
        assert found.returncode == 2, found.stderr + found.stdout  # critical
        # The answer, and a bound: load may make a healthy pair measure below the floor
        # and cost a retest (issue 44, item 9: 8 runs in 5 rounds, 10 in 6, same node).
        counted = re.search(r"(\d+) run\(s\) in (\d+) round\(s\)", found.stdout)
        assert counted is not None, found.stdout
        runs, rounds = int(counted[1]), int(counted[2])
        assert 6 <= runs <= 12 and 4 <= rounds <= runs, found.stdout
        assert "drained debug-st-g-3: nccl-health: all_reduce busbw" in found.stdout
        drained = slurm.node("debug-st-g-3")
        assert drained["state"] in ("drained", "draining"), drained
        assert re.search(r"busbw \d+\.\d+ GB/s beside debug-st-g-[12]", drained["reason"])
        assert re.search(r"; first \d+\.\d+ beside debug-st-g-[12], job \d+", drained["reason"])
        others = [slurm.node(f"debug-st-g-{i}") for i in (1, 2, 4)]
        assert all(n["state"] == "idle" for n in others), (others, found.stdout)
    finally:
        _node_sh(slurm, "debug-st-g-3", "fast")
        slurm.podium("resume", "debug-st-g-3", check=False)
    # (a third sweep, at speed again, was dropped: it held the whole machine about 40 s
    # of the suite's wall time and could only show a noisy run; the resume is checked)
    slurm.wait_node("debug-st-g-3", lambda n: n["state"] == "idle", 30)
