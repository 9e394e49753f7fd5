"""`podium nccl-test`: nccl-tests' yardstick as a job on this cluster, its table printed."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import click

from podium.backends import open_backend
from podium.cli.progress_bar import Progress
from podium.cli.yardstick import Yardstick, host_names, outcome, submit, wait


@click.command(name="nccl-test")
@click.argument("collective", default="all_reduce", metavar="[COLLECTIVE]")
@click.option("-b", "minbytes", default="32M", show_default=True, help="Smallest message.")
@click.option("-e", "maxbytes", default="32M", show_default=True, help="Largest message.")
@click.option("-f", "stepfactor", type=int, default=2, show_default=True, help="Size factor.")
@click.option(
    "-g", "gpus", type=int, default=1, show_default=True, help="GPUs per node: one rank each."
)
@click.option("-N", "--nodes", type=int, default=1, show_default=True, help="Nodes to span.")
@click.option("-w", "--nodelist", default=None, help="These nodes (a Slurm host list).")
@click.option("-n", "iters", type=int, default=20, show_default=True, help="Timed iterations.")
@click.option("--warmup", type=int, default=5, show_default=True, help="Untimed iterations.")
@click.option("--cpu", is_flag=True, help="Ranks on CPUs (gloo): ask for no GPUs.")
@click.option("--nccl-tests", "nccl_tests", default=None, help="Dir of nccl-tests' binaries.")
@click.option("-o", "--output", default="nccl-test-%j.out", show_default=True)
@click.option("-t", "--time", "time_limit", default="30", show_default=True, help="Time limit.")
@click.option("--no-wait", is_flag=True, help="Print the job id and return.")
def nccl_test(
    collective: str,
    minbytes: str,
    maxbytes: str,
    stepfactor: int,
    gpus: int,
    nodes: int,
    nodelist: str | None,
    iters: int,
    warmup: int,
    cpu: bool,
    nccl_tests: str | None,
    output: str,
    time_limit: str,
    no_wait: bool,
) -> None:
    """Run nccl-tests' COLLECTIVE benchmark as a job and print its table.

    COLLECTIVE: all_reduce (default), all_gather, reduce_scatter, alltoall, broadcast,
    reduce, gather or scatter. With one rank nothing crosses a link: Podium's runner
    prints the time and no bandwidth (N/A).

    One rank per GPU (-g per node) on -N nodes, started by srun: nccl-tests'
    COLLECTIVE_perf where the nodes have it (on PATH or in /opt/nccl-tests/build), else
    Podium's runner on torch.distributed (NCCL on GPUs, gloo on CPUs). The output is
    nccl-tests' own: size, count, type, redop, root, time, algbw, busbw and #wrong, and
    the average bus bandwidth. Exit status: the job's (0 when every value was right)."""
    stick = Yardstick(
        collective, minbytes, maxbytes, stepfactor, gpus, cpu, iters, warmup, nccl_tests
    )
    stick.check()
    if nodes < 1:
        raise click.UsageError(f"-N {nodes}: give a whole number of nodes >= 1")
    names = host_names("-w", nodelist) if nodelist is not None else []
    nodes = max(nodes, len(names))  # as sbatch: -N may add nodes to those named
    backend = open_backend()
    job_id = submit(backend, stick.request(nodes, output, "nccl-test", time_limit, names))
    if no_wait:
        click.echo(job_id)
        return
    print(f"podium: nccl-test is job {job_id}; waiting for it", file=sys.stderr, flush=True)
    with Progress("podium nccl-test") as progress:
        task = progress.task(f"job {job_id}", unit="s")

        def seen(record: dict[str, Any]) -> None:
            waits = f" ({record['reason']})" if record["state"] == "PENDING" else ""
            task.update(time.monotonic() - task.began, f"{record['state']}{waits}")

        [ended] = wait(backend, [job_id], output, os.getcwd(), seen)
        task.finish(ended.record["state"])
    if ended.output is not None:
        sys.stdout.write(ended.output)
    if ended.record["state"] != "COMPLETED":
        detail = "" if ended.output is not None else f"; no output at {ended.output_path}"
        click.echo(f"podium: nccl-test: {outcome(ended)}{detail}", err=True)
        sys.exit(int(ended.record.get("exit_code") or 1))
