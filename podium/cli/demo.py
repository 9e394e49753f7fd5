"""`podium demo`: the first seed document's scenario on an embedded cluster.

Researcher A submits BERT (2 GPUs, normal), B submits GPT (2 GPUs, high), C submits
ResNet (1 GPU, low), in that order (`--order`: any other), on 4 GPUs. B and A run at
once on all four GPUs; C waits for a GPU, then runs: the queue goes by QoS, whatever
the submit order (the jobs are held until all three are in). Each job is the real
PyTorch script in examples/. The queue is shown whenever it changes, and the
accounting table at the end.

The scenario is sized to the machine: without an NVIDIA GPU, 4 GPUs are declared (the
jobs train on the CPU); with G real GPUs, the cluster schedules those, A asks for
G//2, B for the rest and C for G//4 (each at least one), so that A and B fill the
machine and C waits, down to a single GPU, where the jobs run one after the other.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from podium.api.selection import JobFilter, Selection
from podium.api.states import TERMINAL_STATES
from podium.backends.embedded.client import EmbeddedBackend
from podium.cli import render
from podium.cli.daemon_cmds import start_daemon, stop_daemon
from podium.cli.submit import build_request
from podium.errors import PodiumError
from podium.node.inventory import GpuInfo

SCENARIO = [
    ("A", "train_bert.sh", "BERT", "normal"),
    ("B", "train_gpt.sh", "GPT", "high"),
    ("C", "train_resnet.sh", "ResNet", "low"),
]
DECLARED_GPUS = 4


def scenario_sizes(real_gpus: int) -> tuple[int, int, int]:
    """The GPUs A, B and C ask for on a machine with `real_gpus` (0: 4 declared)."""
    g = real_gpus or DECLARED_GPUS
    return max(1, g // 2), max(1, g - g // 2), max(1, g // 4)


def real_gpus() -> list[GpuInfo]:
    """The machine's NVIDIA GPUs, as NVML reports them (none without a driver)."""
    from podium.node.inventory import read_nvml

    return read_nvml() or []


TERMINAL = TERMINAL_STATES


def examples_dir() -> Path:
    """The example jobs: installed with the package, or beside it in a checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_examples", here.parent / "examples"):
        if (candidate / "train.py").exists():
            return candidate
    raise PodiumError("cannot find the example jobs (examples/train.py)")


def _submit(
    client: EmbeddedBackend, script: Path, work: Path, env: dict[str, str], gpus: int
) -> dict[str, Any]:
    request, _ = build_request([f"--gpus={gpus}", f"--ntasks={gpus}", "--hold", str(script)])
    request["cwd"] = str(work)
    request["environment"] = env
    jobs: list[dict[str, Any]] = client.submit(request)
    return jobs[0]


@click.command()
@click.option(
    "--home",
    type=click.Path(path_type=Path),
    default=None,
    help="State directory for the demo cluster (default: a new temporary one).",
)
@click.option("--keep", is_flag=True, help="Leave the demo daemon running at the end.")
@click.option(
    "--http",
    "http",
    default=None,
    metavar="HOST:PORT",
    help="Also serve the API and the web page there (e.g. 127.0.0.1:8686); a read-only "
    "token to log in with is printed.",
)
@click.option("--timeout", type=float, default=600.0, help="Give up after this many seconds.")
@click.option(
    "--order",
    type=click.Choice(["ABC", "ACB", "BAC", "BCA", "CAB", "CBA"]),
    default="ABC",
    help="The order the researchers submit in (the outcome is the same in any).",
)
@click.option(
    "--faults",
    is_flag=True,
    help="Instead: a training job survives an Xid 79 on one of its GPUs (auto-resume).",
)
def demo(
    home: Path | None, keep: bool, http: str | None, timeout: float, order: str, faults: bool
) -> None:
    """Run the three-researcher scenario on 4 declared GPUs and show the queue
    (--faults: the fault-tolerance scenario)."""
    made = home is None  # a directory of the demo's own: removed after a good run
    home = (home or Path(tempfile.mkdtemp(prefix="podium-demo-"))).absolute()
    if faults:
        from podium.cli.fault_demo import run_fault_demo

        if not run_fault_demo(home, examples_dir(), keep, timeout):
            sys.exit(1)
        _tidy(home, made and not keep)
        return
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    examples = examples_dir()
    real = real_gpus()
    sizes = scenario_sizes(len(real))
    # With real GPUs the default config schedules NVML's inventory; else declare four.
    started = start_daemon(home, gpus=None if real else DECLARED_GPUS, cpus=8, http=http)
    client = EmbeddedBackend(home)
    if http is not None:
        _show_page(client, http)
    node = client.nodes()[0]
    kind = f"real {node['gpu_type']}" if real else "declared"
    click.echo(
        f"Embedded cluster up (daemon pid {started['pid']}): node {node['node']}, "
        f"{node['gpus_total']} {kind} GPUs, {node['cpus_total']} CPUs; home {home}"
    )
    if not real:
        click.echo("No NVIDIA GPU here: 4 GPUs are declared and the jobs train on the CPU.")
    elif len(real) == 1:
        click.echo("One GPU: each job asks for it, so they run one after the other.")
    else:
        click.echo(f"Sized to {len(real)} GPUs: A and B fill them, C waits.")
    click.echo("")
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PODIUM_EXAMPLES"] = str(examples)
    ids: list[int] = []
    sized = {s[0]: (s, gpus) for s, gpus in zip(SCENARIO, sizes, strict=True)}
    for (who, script, model, qos), gpus in (sized[who] for who in order):
        job = _submit(client, examples / script, work, env, gpus)
        ids.append(job["job_id"])
        click.echo(
            f"researcher {who} submits {model}, {gpus} GPU(s), {qos} priority: job {job['job_id']}"
        )
    # held until all three are in, so that one pass orders them by QoS, whatever the
    # order they came in
    client.control("release", Selection(job_ids=tuple(ids)))
    click.echo("")
    try:
        _follow_queue(client, ids, timeout)
        ok = _report(client, ids, len(real))
    finally:
        client.close()
        if not keep:
            stop_daemon(home)
        else:
            click.echo(f"The demo's daemon keeps running: PODIUM_HOME={home} podium down stops it.")
    if not ok:
        sys.exit(1)
    _tidy(home, made and not keep)


def _follow_queue(client: EmbeddedBackend, ids: list[int], timeout: float) -> None:
    """Show the queue and who holds which GPU each time either changes, until every
    job has ended (PodiumError after `timeout` seconds)."""
    t0 = time.monotonic()
    last: tuple[Any, ...] | None = None
    while True:
        jobs = [client.job(i) for i in ids]
        view = tuple((j["state"], j["reason"], tuple(j["gpu_ids"])) for j in jobs)
        if view != last:
            render.show_queue(jobs, title=f"queue at +{time.monotonic() - t0:.1f}s")
            owners = ", ".join(
                f"GPU {g}: job {j['job_id']} ({j['name']})"
                for j in jobs
                if j["state"] == "RUNNING"
                for g in j["gpu_ids"]
            )
            click.echo(f"  {owners or 'no GPU in use'}\n")
            last = view
        if all(j["state"] in TERMINAL for j in jobs):
            return
        if time.monotonic() - t0 > timeout:
            raise PodiumError(f"the demo jobs did not finish within {timeout:.0f}s")
        time.sleep(0.2)


def _report(client: EmbeddedBackend, ids: list[int], real: int) -> bool:
    """Show the accounting and each job's last line; True when every job completed
    and C (resnet) started only after A or B ended."""
    acct = [j for j in client.acct(JobFilter(finished=True)) if j["job_id"] in ids]
    render.show_acct(acct, title="accounting")
    for j in acct:
        lines = Path(j["stdout"]).read_text().strip().splitlines() if j["stdout"] else []
        click.echo(f"job {j['job_id']} ({j['name']}): {lines[-1] if lines else '(no output)'}")
    by_name = {j["name"]: j for j in acct}
    c_start = by_name["resnet"]["start_time"]
    ab_ends = sorted(by_name[n]["end_time"] for n in ("bert", "gpt"))
    ok = bool(all(j["state"] == "COMPLETED" for j in acct) and c_start >= ab_ends[0])
    first = "A" if by_name["bert"]["end_time"] == ab_ends[0] else "B"
    shared = (
        "B and A shared the four GPUs"
        if not real
        else (f"B and A shared the {real} GPUs" if real > 1 else "A and B took turns")
    )
    click.echo(
        f"\n{shared}; C waited for a free GPU and ran after {first} finished."
        if ok
        else "\nThe scenario did not go as expected: see the tables above."
    )
    return ok


def _show_page(client: EmbeddedBackend, http: str) -> None:
    """Say where the web page is, with a read-only token (valid a day) to log in."""
    made = client.client.post("/v1/tokens", {"read_only": True, "expires_s": 86400.0})
    click.echo(f"Watch it at http://{http}/ and log in with this read-only token:")
    click.echo(f"  {made['token']}")


def _tidy(home: Path, remove: bool) -> None:
    """Remove the demo's own directory (its daemon stopped); say where a kept one is."""
    if not remove:
        click.echo(f"(the demo's state and job outputs are in {home})")
        return
    import shutil

    try:  # the daemon removes its socket before it has quite exited: wait for it
        pid = int((home / "podiumd.pid").read_text())
    except (OSError, ValueError):
        pid = 0
    deadline = time.monotonic() + 15
    while pid and Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.rmtree(home, ignore_errors=True)
