"""Node commands: nodes, drain, resume."""

from __future__ import annotations

import click

from podium.cli import render
from podium.cli.client import Client


@click.command()
@click.option("--json", "as_json", is_flag=True)
def nodes(as_json: bool) -> None:
    """Node state (idle, mixed, allocated, draining, drained, down) and GPU owners."""
    data = Client().get("/v1/nodes")["nodes"]
    if as_json:
        render.print_json(data)
    else:
        render.show_nodes(data)


@click.command()
@click.argument("node")
@click.option("--reason", "-r", required=True, help="Why (shown in podium nodes).")
def drain(node: str, reason: str) -> None:
    """Drain NODE: its running jobs finish, nothing new starts there."""
    data = Client().post(f"/v1/nodes/{node}/drain", {"reason": reason})
    click.echo(f"{data['node']}: {data['state']} ({data['reason']})")


@click.command()
@click.argument("node")
def resume(node: str) -> None:
    """Return a drained NODE to service."""
    data = Client().post(f"/v1/nodes/{node}/resume")
    click.echo(f"{data['node']}: {data['state']}")
