"""`podium inject`: put a fault where the real one would appear.

- xid: an NVRM Xid line for a GPU where the daemon's health agent reads the kernel's
  messages (health.kernel_log, or /dev/kmsg), as the driver writes it;
- hang / kill: SIGSTOP or SIGKILL to one rank of a running job (through the daemon);
- disk-full: a file that fills a watched filesystem past the disk threshold;
  `podium inject clear` removes it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from podium.backends import open_backend

FILL_NAME = ".podium-inject-fill"


def xid_line(bus_id: str, code: int, uptime: float, pid: int = 0) -> str:
    """A kernel log line as the NVIDIA driver writes it for an Xid."""
    from podium.node.health.xid import xid_text

    return f"[{uptime:12.6f}] {xid_text(bus_id, code, pid)}\n"


@click.group()
def inject() -> None:
    """Inject a fault where the real one would appear (for tests and demos)."""


@inject.command()
@click.option("--gpu", type=int, required=True, help="GPU index (as CUDA_VISIBLE_DEVICES).")
@click.option("--code", type=int, default=79, show_default=True, help="Xid code.")
def xid(gpu: int, code: int) -> None:
    """Write an Xid for GPU where the daemon's health agent reads the kernel's messages
    (the configured kernel log, or /dev/kmsg): admin only."""
    data = open_backend().inject({"kind": "xid", "gpu": gpu, "code": code})
    click.echo(f"Xid {code} written for GPU {gpu} to {data['written_to']}")


def _job_fault(kind: str, job_id: int, rank: int) -> None:
    data = open_backend().inject({"kind": kind, "job_id": job_id, "rank": rank})
    what = "stopped (SIGSTOP)" if kind == "hang" else "killed (SIGKILL)"
    click.echo(f"job {job_id} rank {rank} (pid {data['pid']}) {what}")


@inject.command()
@click.argument("job_id", type=int)
@click.option("--rank", type=int, default=0, show_default=True)
def hang(job_id: int, rank: int) -> None:
    """Hang one rank of a running job (SIGSTOP): its peers block, heartbeats stop."""
    _job_fault("hang", job_id, rank)


@inject.command()
@click.argument("job_id", type=int)
@click.option("--rank", type=int, default=0, show_default=True)
def kill(job_id: int, rank: int) -> None:
    """Kill one rank of a running job (SIGKILL), as the OOM killer would."""
    _job_fault("kill", job_id, rank)


@inject.command("disk-full")
@click.option(
    "--path",
    "where",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="A directory on the filesystem to fill (one the health checks watch).",
)
@click.option("--percent", type=float, default=95.0, show_default=True)
@click.option("--max-gb", type=float, default=8.0, show_default=True, help="Refuse beyond this.")
def disk_full(where: Path, percent: float, max_gb: float) -> None:
    """Fill the filesystem holding PATH to PERCENT used with one file."""
    usage = shutil.disk_usage(where)
    need = int(usage.total * percent / 100) - usage.used
    if need <= 0:
        click.echo(f"{where} is already {usage.used / usage.total:.0%} full")
        return
    if need > max_gb * 1e9:
        raise click.UsageError(
            f"filling {where} to {percent}% needs {need / 1e9:.1f} GB, over --max-gb={max_gb}"
        )
    target = where / FILL_NAME
    with open(target, "ab") as fh:
        chunk = b"\0" * (1 << 20)
        left = need
        while left > 0:
            n = min(left, len(chunk))
            try:
                fh.write(chunk[:n])
            except OSError:
                break  # the filesystem is full: that is the point
            left -= n
    usage = shutil.disk_usage(where)
    click.echo(f"{where}: {usage.used / usage.total:.0%} used (fill file {target})")


@inject.command()
@click.option("--path", "where", type=click.Path(path_type=Path, file_okay=False), required=True)
def clear(where: Path) -> None:
    """Remove the fill file disk-full left in PATH."""
    target = where / FILL_NAME
    if target.exists():
        target.unlink()
        click.echo(f"removed {target}")
    else:
        click.echo(f"no fill file in {where}")
