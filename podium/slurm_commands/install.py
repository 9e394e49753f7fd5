"""`podium slurm-commands install DIR`: Slurm's commands outside jobs, by choice.

Inside jobs the daemon puts them first on the PATH. Outside, nothing changes until a
user installs them into a directory of their choosing and puts it on their PATH: they
never shadow a real Slurm by themselves.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

from podium.errors import SpecError
from podium.slurm_commands.entry import ENTRY

SRUN_MAIN = (
    "import sys; from podium.slurm_commands.entry import srun_main; "
    "sys.exit(srun_main(sys.argv[1:]))"
)
TOOLS = (
    "scontrol", "sbatch", "scancel", "squeue", "srun", "salloc", "sacct", "sinfo", "sprio",
    "sshare", "sstat",
)  # fmt: skip


def write_commands(directory: Path, python: str, force: bool) -> list[Path]:
    """Write one shim per tool into `directory` (made if missing) running `python -c
    ENTRY TOOL` (srun: SRUN_MAIN); refuse to replace a file unless `force`. Returns
    the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / tool for tool in TOOLS]
    taken = [p for p in paths if p.exists() or p.is_symlink()]
    if taken and not force:
        raise SpecError(
            f"{taken[0]} exists: pick an empty directory, or --force to replace "
            f"{', '.join(p.name for p in taken)}"
        )
    for path, tool in zip(paths, TOOLS, strict=True):
        # -c, not -m: runpy costs every call ~9 ms
        run = "-c " + (_quote(SRUN_MAIN) if tool == "srun" else f"{_quote(ENTRY)} {tool}")
        text = (
            f"#!/bin/sh\n# Slurm's {tool}, served by Podium (podium slurm-commands install).\n"
            f'exec {_quote(python)} {run} "$@"\n'
        )
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
    return paths


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@click.group(name="slurm-commands")
def slurm_commands() -> None:
    """Slurm's scontrol, sbatch, scancel and squeue, served by Podium."""


@slurm_commands.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace files of the same names in DIRECTORY.")
def install(directory: Path, force: bool) -> None:
    """Write the commands into DIRECTORY; put it on your PATH to use them."""
    real = {tool: shutil.which(tool) for tool in TOOLS}
    paths = write_commands(directory.resolve(), sys.executable, force)
    click.echo(f"wrote {', '.join(p.name for p in paths)} to {directory.resolve()}")
    found = {t: p for t, p in real.items() if p and Path(p).parent != directory.resolve()}
    if found:
        tool, where = next(iter(found.items()))
        click.echo(
            f"note: a real Slurm is on your PATH ({tool} at {where}); Podium's are used only "
            f"where {directory.resolve()} comes first on PATH"
        )
    else:
        click.echo(f'to use them: export PATH="{directory.resolve()}:$PATH"')
