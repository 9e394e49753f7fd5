"""Click's faces of the lean commands (submit, queue, cancel): their help, and the
forms the lean path passes on (podium.cli.lean), which then run the same code."""

from __future__ import annotations

import sys

import click

from podium.cli import lean


@click.command(
    context_settings={
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
        "help_option_names": [],  # -h and --help are submit's own: every option listed
    },
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def submit(args: tuple[str, ...]) -> None:
    """Submit a job: podium submit [sbatch options] SCRIPT [ARGS], --wrap CMD, or -f job.yaml.

    #SBATCH and #PODIUM lines in the script are honoured; options given here override
    them. Client options: --json (full record), --parsable (id only), --wait (block
    until the job ends and exit with its code), --test-only (validate, queue nothing),
    --quiet, --dry-run (queue nothing: print what the backend would run, the launch
    plan on the embedded cluster, the sbatch script on Slurm).
    """
    from podium.cli.submit import run

    code = run(list(args))
    if code:
        sys.exit(code)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--user", "-u", default=None, help="Only this user's jobs.")
@click.option("--state", "-t", default=None, help="Only these states (comma-separated).")
@click.option("--name", "-n", default=None, help="Only jobs with this name.")
@click.option("--all", "-a", "all_", is_flag=True, help="Include finished jobs.")
@click.option("--me", is_flag=True, help="Only my jobs.")
@click.option("--array", "-r", is_flag=True, help="A pending array's tasks one a line.")
@click.option(
    "--start", is_flag=True, help="Pending jobs' expected start times and GPUs (squeue --start)."
)
def queue(
    as_json: bool,
    user: str | None,
    state: str | None,
    name: str | None,
    all_: bool,
    me: bool,
    array: bool,
    start: bool,
) -> None:
    """List jobs (pending and running by default), like squeue; a pending array's
    tasks not yet started are one line (12_[4-9%2]) unless --array. With --start, the
    pending jobs' expected starts, from the scheduler run forward on the queue as it is."""
    if start:
        from podium.cli.forecast_table import show_forecast

        show_forecast(user, as_json)
        return
    lean.queue(user, state, name, all_, me, as_json, array)


@click.command()
@click.argument("jobs", nargs=-1)
@click.option("--user", "-u", default=None, help="Only jobs of this user.")
@click.option("--name", "-n", default=None, help="Only jobs with this name.")
@click.option("--state", "-t", default=None, help="Only jobs in these states (PENDING,RUNNING).")
@click.option("--json", "as_json", is_flag=True)
def cancel(
    jobs: tuple[str, ...], user: str | None, name: str | None, state: str | None, as_json: bool
) -> None:
    """Cancel jobs by id and/or filters, like scancel."""
    lean.cancel(jobs, user, name, state, as_json)
