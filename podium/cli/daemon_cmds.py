"""`podium up` and `podium down`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

from podium import paths
from podium.api.selection import JobFilter
from podium.backends.embedded.client import EmbeddedBackend
from podium.errors import DaemonUnavailable, PodiumError


def _ping(client: EmbeddedBackend) -> dict[str, object] | None:
    try:
        return client.ping()
    except DaemonUnavailable:
        return None


def start_daemon(
    home: Path,
    gpus: int | None = None,
    cpus: int | None = None,
    config: Path | None = None,
    timeout: float = 30.0,
    http: str | None = None,
) -> dict[str, object]:
    """Start the daemon in the background for `home` and wait until it answers.

    Returns its ping answer. Raises PodiumError with the daemon's own error line when
    it exits instead (e.g. an invalid cluster config), and when a daemon already runs
    there that the options asked for would change (`podium up --http` on a daemon
    without a listener said "Podium is up" and listened nowhere).
    """
    home.mkdir(parents=True, exist_ok=True)
    client = EmbeddedBackend(home, retry_s=0)  # a daemon that refuses is not running
    answer = _ping(client)
    if answer is not None:
        changes = _changes(client, answer, gpus, cpus, config, http)
        if changes:
            raise PodiumError(
                f"Podium is already up for {home} (pid {answer['pid']}) and "
                f"{'; '.join(changes)}: to change it, podium down (running jobs keep "
                "running), then podium up with the new options"
            )
        return answer
    argv = [sys.executable, "-m", "podium.server.daemon", "--home", str(home)]
    if gpus is not None:
        argv += ["--gpus", str(gpus)]
    if cpus is not None:
        argv += ["--cpus", str(cpus)]
    if config is not None:
        argv += ["--config", str(config.absolute())]
    if http is not None:
        argv += ["--http", http]
    log = paths.log_path(home)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # private, as all state
    with os.fdopen(fd, "ab") as fh:
        offset = fh.tell()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh, start_new_session=True, cwd="/"
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = _ping(client)
        if answer is not None:
            return answer
        code = proc.poll()
        if code is not None:
            with open(log, "rb") as fh:
                fh.seek(offset)
                lines = [ln for ln in fh.read().decode(errors="replace").splitlines() if ln]
            message = next((ln for ln in reversed(lines) if ln.startswith("podium: ")), None)
            if message:
                error = PodiumError(message.removeprefix("podium: "))
                error.exit_code = code
                raise error
            raise PodiumError(f"the daemon exited with code {code}; see {log}")
        time.sleep(0.05)
    raise PodiumError(f"the daemon did not answer within {timeout:.0f}s; see {log}")


def _changes(
    client: EmbeddedBackend,
    answer: dict[str, object],
    gpus: int | None,
    cpus: int | None,
    config: Path | None,
    http: str | None,
) -> list[str]:
    """What of the options asked for the running daemon does not have, in words."""
    found = []
    if http is not None and answer.get("http") != http:
        listens = answer.get("http")
        found.append(
            f"it listens on {listens}, not --http {http}"
            if listens
            else f"it has no HTTP listener (--http {http})"
        )
    if config is not None and answer.get("config_file") != str(config.absolute()):
        runs = answer.get("config_file") or "no config file"
        found.append(f"it runs {runs}, not --config {config}")
    if gpus is not None or cpus is not None:
        node = client.nodes()[0]
        if gpus is not None and node["gpus_total"] != gpus:
            found.append(f"it has {node['gpus_total']} GPUs, not --gpus {gpus}")
        if cpus is not None and node["cpus_total"] != cpus:
            found.append(f"it has {node['cpus_total']} CPUs, not --cpus {cpus}")
    return found


@click.command()
@click.option("--foreground", is_flag=True, help="Stay in the foreground (for systemd).")
@click.option(
    "--gpus",
    type=click.IntRange(0, 64),
    default=None,
    help="Declare N GPUs (no config is written).",
)
@click.option("--cpus", type=click.IntRange(1, 4096), default=None, help="Declare N CPUs.")
@click.option(
    "--config",
    type=click.Path(path_type=Path),
    default=None,
    help="Cluster config file (default: $PODIUM_HOME/cluster.yaml).",
)
@click.option(
    "--http",
    default=None,
    metavar="HOST:PORT",
    help="Also serve the API over HTTP here, by token (podium token create); e.g. "
    "127.0.0.1:8686. Overrides http.listen in the config.",
)
def up(
    foreground: bool, gpus: int | None, cpus: int | None, config: Path | None, http: str | None
) -> None:
    """Start the Podium daemon for $PODIUM_HOME."""
    home = paths.home()
    if foreground:
        from podium.server.daemon import main as daemon_main

        argv = ["--home", str(home)]
        argv += ["--gpus", str(gpus)] if gpus is not None else []
        argv += ["--cpus", str(cpus)] if cpus is not None else []
        argv += ["--config", str(config)] if config is not None else []
        argv += ["--http", http] if http is not None else []
        sys.exit(daemon_main(argv))
    answer = start_daemon(home, gpus, cpus, config, http=http)
    nodes = EmbeddedBackend(home).nodes()
    node = nodes[0]
    click.echo(
        f"Podium is up (pid {answer['pid']}): node {node['node']} with {node['cpus_total']} CPUs, "
        f"{node['gpus_total']} GPUs; home {home}"
    )
    if node.get("gpu_note"):
        click.echo(f"note: {node['gpu_note']}")
    for hint in start_hints(node):
        click.echo(f"hint: {hint}")
    if answer.get("http"):
        click.echo(
            f"HTTP API on http://{answer['http']} (by token: podium token create; "
            f"PODIUM_URL=http://{answer['http']} PODIUM_TOKEN=... podium queue)"
        )


def start_hints(node: dict[str, Any]) -> list[str]:
    """What a new user should know of the node just started (issue 44, item 6): no
    GPUs found, or fewer CPUs than GPUs (each job takes a CPU at least, so GPUs would
    sit idle while jobs wait for CPUs)."""
    gpus, cpus = int(node["gpus_total"]), int(node["cpus_total"])
    hints = []
    if gpus == 0:
        hints.append(
            "no GPUs were found (no NVIDIA driver here): declare some to try GPU jobs, "
            "podium down && podium up --gpus 4"
        )
    elif cpus < gpus:
        hints.append(
            f"{gpus} GPUs but {cpus} CPUs: each job takes at least one CPU, so at most {cpus} "
            f"jobs run at once and GPUs may sit idle; declare more CPUs with --cpus (as "
            f"podium demo does), e.g. podium down && podium up --gpus {gpus} --cpus {gpus * 2}"
        )
    return hints


def stop_daemon(home: Path, timeout: float = 15.0) -> int | None:
    """Ask the daemon for `home` to stop and wait until it has; return how many jobs
    it left running (they keep running), or None if no daemon was running.

    The daemon removes its socket last, after its store, jobs directory and launcher
    are closed, so a socket gone means the stop is done (up to `timeout`)."""
    client = EmbeddedBackend(home, retry_s=0)  # a daemon that refuses is not running
    if _ping(client) is None:
        return None
    running = len(client.jobs(JobFilter(states=("RUNNING",))))
    client.shutdown()
    client.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and paths.socket_path(home).exists():
        time.sleep(0.05)
    return running


@click.command()
def down() -> None:
    """Stop the daemon. Running jobs keep running and are adopted by the next daemon."""
    home = paths.home()
    running = stop_daemon(home)
    if running is None:
        click.echo(f"Podium is not running for {home}")
    else:
        click.echo(f"Podium stopped; {running} running job(s) keep running.")
