"""`podium slurm ...`: render a Slurm cluster's configuration from a definition."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import click

from podium.errors import ConfigError


@click.group()
def slurm() -> None:
    """Slurm clusters: render slurm.conf, gres.conf, cgroup.conf and the health wiring."""


@slurm.command()
@click.argument("definition", type=click.Path(path_type=Path))
@click.option(
    "--out",
    "-o",
    type=click.Path(path_type=Path),
    default=None,
    help="Directory to write (default: /etc/slurm, or TESTBED/etc with --testbed).",
)
@click.option(
    "--testbed",
    type=click.Path(path_type=Path),
    default=None,
    help="Lay the cluster out to run on this machine under this directory (tests).",
)
@click.option("--port-base", type=click.IntRange(1024, 60000), default=17800, show_default=True)
@click.option(
    "--hosts",
    is_flag=True,
    help="With --testbed: each node a host of its own (network and UTS namespaces).",
)
@click.option("--python", "python", default=None, help="Python with Podium on the nodes.")
def render(
    definition: Path,
    out: Path | None,
    testbed: Path | None,
    port_base: int,
    hosts: bool,
    python: str | None,
) -> None:
    """Render DEFINITION (ParallelCluster-style YAML) into Slurm's config files."""
    from podium.backends.slurm.conf_files import render as render_files
    from podium.backends.slurm.definition import read_definition
    from podium.backends.slurm.slurm_conf import Testbed

    try:
        text = definition.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {definition}: {exc.strerror}") from None
    defn, warnings = read_definition(text, str(definition))
    for warning in warnings:
        click.echo(f"podium: warning: {warning}", err=True)
    bed = None
    if testbed is not None:
        host = socket.gethostname().split(".")[0]
        bed = Testbed(str(testbed.absolute()), host, port_base, hosts)
    elif hosts:
        raise ConfigError("--hosts lays out a test cluster: give --testbed DIR with it")
    files = render_files(defn, python or sys.executable, bed)
    target = out or (testbed / "etc" if testbed else Path("/etc/slurm"))
    target.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = target / name
        path.write_text(content)
        if name.endswith(".sh"):
            os.chmod(path, 0o755)
    click.echo(f"wrote {', '.join(sorted(files))} to {target}")


@slurm.command("teams")
@click.option(
    "--config",
    type=click.Path(path_type=Path),
    default=None,
    help="Cluster config (default: $PODIUM_CONFIG, else $PODIUM_HOME/cluster.yaml).",
)
@click.option("--apply", "do_apply", is_flag=True, help="Run the commands (as a Slurm admin).")
def teams_cmd(config: Path | None, do_apply: bool) -> None:
    """The config's teams: as Slurm associations: each team an account under root with
    GrpTRES=gres/gpu=QUOTA and Fairshare by its weight, its accounts beneath it, its
    users in it. Prints the sacctmgr commands; --apply runs them. Lending between
    teams (a shared cohort) and within_team preemption are refused: Slurm has neither."""
    from podium.backends.slurm import teams as slurm_teams
    from podium.backends.slurm.engine_api import SlurmTools
    from podium.cli.config_arg import cluster_config

    cluster = cluster_config(config)
    if not cluster.teams:
        raise ConfigError(
            "the cluster config has no teams: give teams: with quotas (docs/scheduling.md)"
        )
    try:
        commands = slurm_teams.sacctmgr_commands(cluster)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if not do_apply:
        click.echo(slurm_teams.script(commands), nl=False)
        return
    for line in slurm_teams.apply(commands, SlurmTools(cluster.slurm).run):
        click.echo(line)
