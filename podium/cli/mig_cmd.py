"""`podium mig advise`: the MIG layouts the pending queue needs, ranked per GPU with
each change's drain plan, and the configs that apply them (mig-parted, Slurm, Podium);
`podium mig apply`: an administrator drains a GPU and re-splits it. Podium never
changes a GPU's MIG mode or layout by itself."""

from __future__ import annotations

import time
from typing import Any

import click

from podium.backends import open_backend
from podium.cli import render


@click.group()
def mig() -> None:
    """MIG layouts: what the pending queue needs, and applying one."""


def _layout(layout: list[str]) -> str:
    return "+".join(layout) if layout else "whole"


def _when(at: float | None) -> str:
    if at is None:
        return "no time limit"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(at))


def _drain(drain: list[dict[str, Any]]) -> str:
    """The running jobs a change waits for, with when their limits end them."""
    return ", ".join(f"job {d['job_id']} (ends {_when(d['expected_end'])})" for d in drain)


@mig.command()
@click.option("--json", "as_json", is_flag=True, help="The advice as JSON.")
def advise(as_json: bool) -> None:
    """Search each MIG-capable GPU's valid layouts for the pending queue; print the
    ranked changes, what each must drain first, and the configs to apply."""
    data: dict[str, Any] = open_backend().mig_advice()
    if as_json:
        render.print_json(data)
        return
    before, after = data["before"], data["after"]
    if not data["gpus"]:
        click.echo(f"{data['node']}: no MIG-capable GPU to advise on")
        return
    click.echo(
        f"{data['node']}: the advised layouts admit {after['admitted']} pending GPU job(s) "
        f"(now {before['admitted']}); {after['drains']} GPU(s) to drain"
    )
    rows = []
    for g in data["gpus"]:
        drain = _drain(g["drain"])
        rows.append(
            [
                g["gpu"],
                g["model"],
                _layout(g["now"]),
                _layout(g["advised"]) if g["changes"] else "(keep)",
                ",".join(str(j) for j in g["admits"]) or "-",
                drain or ("-" if not g["changes"] else "idle: now"),
            ]
        )
    render.table(None, ["GPU", "MODEL", "NOW", "ADVISED", "ADMITS", "DRAIN FIRST"], rows)
    if data["unplaceable"]:
        jobs = ",".join(str(j) for j in data["unplaceable"])
        click.echo(
            f"no layout of these GPUs fits job(s) {jobs} (profiles: {', '.join(data['profiles'])})"
        )
    if not data["changes"]:
        click.echo("the layouts now serve the queue best: nothing to change")
        return
    configs = data["configs"]
    click.echo("\n# mig-parted: nvidia-mig-parted apply -f FILE -c podium-advised")
    click.echo(configs["mig_parted"], nl=False)
    click.echo("\n# Slurm")
    click.echo(configs["slurm"], nl=False)
    click.echo("\n# Podium (declared GPUs; real ones are read from NVML)")
    click.echo(configs["podium"], nl=False)


@mig.command()
@click.option("--gpu", type=click.IntRange(0, 1023), help="The GPU to re-split.")
@click.option(
    "--layout",
    metavar="PROFILES",
    help="Its new slices joined by commas (3g.40gb,2g.20gb,1g.10gb,1g.10gb), or 'whole'.",
)
@click.option("--advised", is_flag=True, help="Apply what `podium mig advise` advises.")
def apply(gpu: int | None, layout: str | None, advised: bool) -> None:
    """Re-split a GPU (administrators): drain it (running jobs finish, no new ones
    land), apply the layout with nvidia-mig-parted or nvidia-smi, health-check it and
    return it to service. `podium health` shows where it stands."""
    backend = open_backend()
    if advised == (layout is not None):
        raise click.UsageError("give --layout PROFILES (with --gpu N) or --advised")
    if advised:
        advice: dict[str, Any] = backend.mig_advice()
        plans = [
            (g["gpu"], ",".join(g["advised"]) or "whole") for g in advice["gpus"] if g["changes"]
        ]
        if gpu is not None:
            plans = [p for p in plans if p[0] == gpu]
        if not plans:
            click.echo("the advisor changes no GPU: nothing to apply")
            return
    elif gpu is None:
        raise click.UsageError("--layout needs --gpu N: the GPU to re-split")
    else:
        plans = [(gpu, str(layout))]
    for index, profiles in plans:
        answer = backend.mig_apply(index, profiles)
        waits = f"waits for {_drain(answer['drain'])}" if answer["drain"] else "idle: applies now"
        click.echo(
            f"{answer['node']} GPU {answer['gpu']}: {_layout(answer['now'])} -> "
            f"{_layout(answer['layout'])}: drained, {waits}; a health check returns it to "
            "service"
        )
