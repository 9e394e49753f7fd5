"""`podium health`: run the node's health checks now (Nagios exit code)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from podium import paths
from podium.backends.embedded.client import EmbeddedBackend
from podium.cli import render
from podium.cli.progress_bar import while_working
from podium.errors import DaemonUnavailable
from podium.node.health.check_results import Status, worst_status


@click.command()
@click.option("--deep", is_flag=True, help="Also run the slow checks (DCGM, NCCL bandwidth).")
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--config",
    type=click.Path(path_type=Path),
    default=None,
    help="Cluster config (default: $PODIUM_HOME/cluster.yaml, else the defaults).",
)
@click.option("--nodes", default=None, help="With --deep: the NCCL yardstick across these.")
@click.option("--expect", type=float, default=None, help="Expected busbw (GB/s) across nodes.")
@click.option("--spare", default=None, help="Nodes known good, to pair suspects with.")
@click.option("--size", default=None, help="Message size (default: health.nccl_bytes).")
@click.option("-g", "gpus", type=int, default=1, show_default=True, help="GPUs per node.")
@click.option("--cpu", is_flag=True, help="Ranks on CPUs (gloo): ask for no GPUs.")
@click.option("--no-drain", is_flag=True, help="Name the slow nodes; drain none.")
def health(
    deep: bool,
    as_json: bool,
    config: Path | None,
    nodes: str | None,
    expect: float | None,
    spare: str | None,
    size: str | None,
    gpus: int,
    cpu: bool,
    no_drain: bool,
) -> None:
    """Run the health checks; exit 0 ok, 1 warning, 2 critical, 3 unknown (Nagios).

    With a daemon running, it runs them: results are stored as events and faults are
    acted on (fence, requeue). Without one, or with --config, they run here.

    With --deep --nodes LIST, the NCCL yardstick (all_reduce) runs across the nodes as
    a job; when it is slow, halves and then pairs run until the slow node(s) are named,
    and they are drained with the measured figure in the reason."""
    if nodes is not None:
        if not deep:
            raise click.UsageError("--nodes runs the deep NCCL check: give --deep with it")
        from podium.cli.health_nodes import AcrossNodes

        across = AcrossNodes(nodes, expect, spare, size, gpus, cpu, not no_drain)
        sys.exit(int(across.run(as_json)))
    home = paths.home()
    records = _daemon_results(home, deep) if config is None else None
    if records is None:
        records = _results_here(home, config, deep)
    counted = [r for r in records if not r.get("skipped")]
    statuses = {s.name.lower(): s for s in Status}
    status = worst_status(statuses[r["status"]] for r in counted)
    if as_json:
        render.print_json(records)
    else:
        render.table(
            None,
            ["CHECK", "STATUS", "GPU", "ACTION", "REASON"],
            [
                [
                    r["check"],
                    "skipped" if r.get("skipped") else r["status"],
                    "" if r["gpu"] is None else r["gpu"],
                    r["action"],
                    r["reason"],
                ]
                for r in records
            ],
        )
        click.echo(summary(status, counted, len(records) - len(counted)))
    sys.exit(int(status))


def _daemon_results(home: Path, deep: bool) -> list[dict[str, Any]] | None:
    """The results of checks a running daemon ran (they become events and act), or
    None when no daemon answers."""
    try:
        backend = EmbeddedBackend(home, timeout=3600)
        if deep:  # minutes of burn-in and bandwidth: say it is working
            data = while_working(
                "podium health", "deep checks on the daemon's node",
                lambda: backend.health(deep),
            )  # fmt: skip
        else:
            data = backend.health(deep)
    except DaemonUnavailable:
        return None
    results: list[dict[str, Any]] = data["results"]
    return results


def _results_here(home: Path, config: Path | None, deep: bool) -> list[dict[str, Any]]:
    """Run the checks in this process, with `config` (else PODIUM_HOME's, else the
    defaults), and append them to PODIUM_HOME/health.jsonl."""
    from podium.config.cluster import default_config, load_config
    from podium.node.health.check_results import append_results, run_checks
    from podium.node.health.suite import node_checks, nvml_probe
    from podium.node.inventory import resolve_inventory

    _own_home(home)  # its disk check reads it: a fresh PODIUM_HOME is not "unknown"
    path = config or paths.config_path(home)
    cluster = load_config(path) if path.exists() else default_config()
    inventory = resolve_inventory(cluster.node.gpus, place=str(home))
    checks = node_checks(cluster, home, inventory, nvml_probe())
    if deep:
        results = while_working(
            "podium health", "deep checks", lambda: run_checks(checks, deep=deep)
        )
    else:
        results = run_checks(checks, deep=deep)
    append_results(home / "health.jsonl", cluster.node.name, results)
    return [r.to_json() for r in results]


def _own_home(home: Path) -> None:
    """Make the state directory as the daemon would (0711: users reach the socket by
    name and list nothing) when it is missing; a home that cannot be made is left to
    the disk check to report."""
    if home.is_dir():
        return
    try:
        home.mkdir(mode=0o711, parents=True)
        home.chmod(0o711)
    except OSError:
        pass


def summary(status: Status, counted: list[dict[str, Any]], skipped: int) -> str:
    """One closing line: what the exit code means and, when unknown, what to do."""
    ran = f"{len(counted)} check result(s), {skipped} skipped"
    if status is Status.OK:
        return f"healthy (exit 0): {ran}"
    if status is Status.UNKNOWN:
        unknown = [r for r in counted if r["status"] == "unknown"]
        first = unknown[0]
        return (
            f"unknown (exit 3): {len(unknown)} check(s) could not judge; the rest passed. "
            f"{first['check']}: {first['reason']}"
        )
    word = "critical (exit 2)" if status is Status.CRITICAL else "warning (exit 1)"
    bad = [r for r in counted if r["status"] in ("critical", "warning")]
    return f"{word}: {len(bad)} finding(s); see ACTION: what the health agent does about each"
