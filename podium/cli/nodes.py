"""Node commands: nodes, drain, resume."""

from __future__ import annotations

import click

from podium.api.text import printable
from podium.backends import open_backend
from podium.cli import render


@click.command()
@click.option("--json", "as_json", is_flag=True)
def nodes(as_json: bool) -> None:
    """Node state (idle, mixed, allocated, draining, drained) and, per GPU, its job and
    health: label, fault, last deep check and reason."""
    data = open_backend().nodes()
    if as_json:
        render.print_json(data)
    else:
        render.show_nodes(data)


@click.command()
@click.argument("node")
@click.option("--reason", "-r", required=True, help="Why (shown in podium nodes).")
def drain(node: str, reason: str) -> None:
    """Drain NODE: its running jobs finish, nothing new starts there."""
    data = open_backend().drain(node, reason)
    click.echo(f"{data['node']}: {data['state']} ({printable(data['reason'] or '')})")


@click.command()
@click.argument("node")
@click.option("--gpu", type=int, default=None, help="Only this GPU (fenced by health).")
def resume(node: str, gpu: int | None) -> None:
    """Return NODE (or one of its GPUs) to service: an admin's drain and whatever the
    health agent fenced, a GPU marked for replacement included."""
    data = open_backend().resume(node, gpu)
    if gpu is None:
        click.echo(f"{data['node']}: {data['state']}")
    else:
        g = next(x for x in data["gpus"] if x["index"] == gpu)
        click.echo(f"{data['node']} GPU {gpu}: {g['health']['label']}")
