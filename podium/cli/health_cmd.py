"""`podium health`: run the node's health checks now (Nagios exit code)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from podium import paths
from podium.cli import render
from podium.cli.client import Client
from podium.errors import DaemonUnavailable


@click.command()
@click.option("--deep", is_flag=True, help="Also run the slow checks (DCGM, NCCL bandwidth).")
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--config",
    type=click.Path(path_type=Path),
    default=None,
    help="Cluster config (default: $PODIUM_HOME/cluster.yaml, else the defaults).",
)
def health(deep: bool, as_json: bool, config: Path | None) -> None:
    """Run the health checks; exit 0 ok, 1 warning, 2 critical, 3 unknown (Nagios).

    With a daemon running, it runs them: results are stored as events and faults are
    acted on (fence, requeue). Without one, or with --config, they run here."""
    from podium.node.health.base import Status, append_results, run_checks, worst_status
    from podium.node.health.suite import node_checks, nvml_probe
    from podium.node.inventory import resolve_inventory
    from podium.spec.cluster import default_config, load_config

    home = paths.home()
    records = None
    if config is None:  # a running daemon runs them: results become events and act
        try:
            data = Client(home, timeout=3600).post("/v1/health", {"deep": deep})
            records = data["results"]
        except DaemonUnavailable:
            pass
    if records is None:
        path = config or paths.config_path(home)
        cluster = load_config(path) if path.exists() else default_config()
        gpus = resolve_inventory(cluster.node.gpus)
        results = run_checks(node_checks(cluster, home, gpus, nvml_probe()), deep=deep)
        records = [r.to_json() for r in results]
        home.mkdir(parents=True, exist_ok=True)
        append_results(home / "health.jsonl", cluster.node.name, results)
    if as_json:
        render.print_json(records)
    else:
        render.table(
            None,
            ["CHECK", "STATUS", "GPU", "ACTION", "REASON"],
            [
                [
                    r["check"],
                    r["status"],
                    "" if r["gpu"] is None else r["gpu"],
                    r["action"],
                    r["reason"],
                ]
                for r in records
            ],
        )
    statuses = {s.name.lower(): s for s in Status}
    sys.exit(int(worst_status(statuses[r["status"]] for r in records)))
