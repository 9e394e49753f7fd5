"""The `podium` command under Click: every subcommand, loaded lazily on first use.

`podium.cli.main` sends the common forms of submit, queue and cancel down a lean path
first (`podium.cli.lean`); everything else comes here."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from podium import __version__
from podium.errors import PodiumError

# command name -> (module, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "up": ("podium.cli.daemon_cmds", "up", "Start the daemon (embedded cluster)."),
    "down": ("podium.cli.daemon_cmds", "down", "Stop the daemon; running jobs keep running."),
    "submit": ("podium.cli.lean_cmds", "submit", "Submit a batch script (sbatch options)."),
    "queue": ("podium.cli.lean_cmds", "queue", "List pending and running jobs."),
    "show": ("podium.cli.job_cmds", "show", "Show one job in full."),
    "logs": ("podium.cli.job_cmds", "logs", "Print a job's output (-f to follow)."),
    "cancel": ("podium.cli.lean_cmds", "cancel", "Cancel jobs by id or filter."),
    "hold": ("podium.cli.job_cmds", "hold", "Hold pending jobs."),
    "release": ("podium.cli.job_cmds", "release", "Release held jobs."),
    "requeue": ("podium.cli.job_cmds", "requeue", "Stop running jobs and queue them again."),
    "checkpoint": ("podium.cli.job_cmds", "checkpoint", "Note a job's finished checkpoint."),
    "progress": ("podium.cli.job_cmds", "progress", "Note how far a job is (DONE --of TOTAL)."),
    "acct": ("podium.cli.job_cmds", "acct", "Accounting: finished and running jobs."),
    "priority": ("podium.cli.sched_cmds", "priority", "Pending jobs' priority factors (sprio)."),
    "share": ("podium.cli.sched_cmds", "share", "Fair share per account and user (sshare)."),
    "teams": ("podium.cli.sched_cmds", "teams", "Team GPU quotas: use, borrowed, lent."),
    "nodes": ("podium.cli.nodes", "nodes", "Node state, GPU owners and health."),
    "drain": ("podium.cli.nodes", "drain", "Drain a node (admin)."),
    "resume": ("podium.cli.nodes", "resume", "Resume a drained or fenced node or GPU (admin)."),
    "inject": ("podium.cli.inject", "inject", "Inject a fault (Xid, hang, kill, full disk)."),
    "health": ("podium.cli.health_cmd", "health", "Run the node's health checks now."),
    "nccl-test": (
        "podium.cli.nccl_test_cmd",
        "nccl_test",
        "Run nccl-tests' yardstick as a job and print its table.",
    ),
    "slurm": ("podium.cli.slurm_cmds", "slurm", "Render a Slurm cluster's config from YAML."),
    "slurm-commands": (
        "podium.slurm_commands.install",
        "slurm_commands",
        "Install Slurm's scontrol, sbatch, scancel, squeue (served by Podium) into a dir.",
    ),
    "image": ("podium.cli.image_cmd", "image", "Import container images; list and remove them."),
    "mig": ("podium.cli.mig_cmd", "mig", "Advise MIG layouts for the pending queue."),
    "k8s": ("podium.cli.k8s_cmd", "k8s", "Kubernetes: the NVIDIA device plugin's config."),
    "sim": ("podium.cli.sim_cmd", "sim", "Replay a job trace through the scheduler."),
    "token": ("podium.cli.token_cmds", "token", "Tokens for the daemon's HTTP API."),
    "demo": ("podium.cli.demo", "demo", "Run the three-researcher scenario on 4 GPUs."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when called."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        command: click.Command = getattr(module, entry[1])
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, entry[2]) for name, entry in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            from podium.api.suggest import did_you_mean

            raise click.UsageError(f"no command {name!r}{did_you_mean(name, COMMANDS, quote=True)}")
        return super().resolve_command(ctx, args)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="podium")
def cli() -> None:
    """Podium: Slurm-style scheduling for GPU training jobs, on one machine or more."""


def main(argv: list[str] | None = None) -> Any:
    """Run the CLI; PodiumError becomes one line on stderr and its exit code."""
    try:
        return cli.main(args=argv, prog_name="podium", standalone_mode=False)
    except PodiumError as exc:
        click.echo(f"podium: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("podium: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"podium: {exc.format_message()}", err=True)
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(141)
