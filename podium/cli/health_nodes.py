"""`podium health --deep --nodes LIST`: the NCCL yardstick across nodes, and the slow
node(s) found by bisection and drained.

The listed nodes run all_reduce together (a job, as `podium nccl-test -N`). Its
out-of-place busbw at the largest message is compared with the expected figure:
`--expect`, else `health.nccl_nodes_busbw_gbps`, else the first healthy run's figure
for the same yardstick on as many nodes, kept in PODIUM_HOME/nccl-baseline.json (the
first run, with none, records it). Below `health.nccl_min_fraction` of it, or failing,
the run is slow: podium.node.health.slow_nodes bisects, running the parts of one round
as jobs at once, and the nodes it convicts are drained with the measured figure in the
reason (which does not start with `podium:`, so the Slurm hook never returns them to
service: an administrator resumes them once mended).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from podium import paths
from podium.api.backend_protocol import Backend
from podium.cli import render
from podium.cli.yardstick import Yardstick, host_names, outcome, submit, wait
from podium.config.operations import HealthConfig
from podium.node.health.check_results import Status
from podium.node.health.nccl import parse_nccl_tests
from podium.node.health.slow_nodes import Bisection, Group, Measured, Run, find_slow_nodes
from podium.run.files import read_json, write_atomic

OUTPUT = "nccl-health-%j.out"


@dataclass(frozen=True)
class Judge:
    """What a run is held against: `expected` GB/s (None: none known yet)."""

    expected: float | None
    fraction: float

    def slow(self, measured: Measured) -> bool:
        if measured.busbw is None:
            return True
        return self.expected is not None and measured.busbw < self.fraction * self.expected


def busbw_of(text: str | None) -> tuple[float | None, str]:
    """The out-of-place busbw at the largest message of an nccl-tests output, or None
    with why (no output, no rows, wrong values)."""
    if text is None:
        return None, "no output"
    largest = parse_nccl_tests(text).largest
    if largest is None:
        return None, "no result rows"
    if not largest.right:
        return None, f"{largest.wrong} wrong values"
    if largest.busbw is None:
        return None, "one rank: no bandwidth measured"
    return largest.busbw, ""


class Runner:
    """Runs the yardstick on groups of nodes: one job per group, all at once."""

    def __init__(self, backend: Backend, stick: Yardstick, time_limit: str) -> None:
        self.backend, self.stick, self.time_limit = backend, stick, time_limit
        self.cwd = os.getcwd()

    def __call__(self, groups: list[Group]) -> list[Measured]:
        ids = [
            submit(
                self.backend,
                self.stick.request(len(g), OUTPUT, "nccl-health", self.time_limit, g),
            )
            for g in groups
        ]
        results = []
        for ended in wait(self.backend, ids, OUTPUT, self.cwd):
            busbw, why = busbw_of(ended.output)
            if ended.record["state"] != "COMPLETED":
                busbw, why = None, outcome(ended)
            results.append(Measured(busbw, f"job {ended.job_id}" + (f": {why}" if why else "")))
        return results


@dataclass(frozen=True)
class AcrossNodes:
    """What `podium health --deep --nodes` was asked: host lists as given."""

    nodes: str
    expect: float | None
    spare: str | None
    size: str | None
    gpus: int
    cpu: bool
    drain: bool

    def run(self, as_json: bool) -> Status:
        """Check the options (click.UsageError: one line), then check_nodes."""
        from podium.backends import config_file, open_backend
        from podium.config.cluster import default_config, load_config

        names = host_names("--nodes", self.nodes)
        if len(names) < 2:
            raise click.UsageError(
                f"--nodes {self.nodes!r} names one node: give two or more (one node alone: "
                "podium health --deep on it)"
            )
        if self.expect is not None and self.expect <= 0:
            raise click.UsageError(f"--expect {self.expect}: give the expected busbw in GB/s, > 0")
        path = Path(config_file())
        health = (load_config(path) if path.exists() else default_config()).health
        message = self.size or health.nccl_bytes
        stick = Yardstick(
            minbytes=message, maxbytes=message, gpus_per_node=self.gpus, cpus_only=self.cpu
        )
        stick.check()
        spares = host_names("--spare", self.spare) if self.spare else []
        return check_nodes(
            open_backend(), health, names, stick, self.expect, spares, self.drain, as_json
        )


def baseline_key(stick: Yardstick, nodes: int) -> str:
    """What a baseline figure is for: the same yardstick on as many nodes."""
    where = "cpu" if stick.cpus_only else "gpu"
    return f"{stick.collective} {stick.maxbytes} x{stick.gpus_per_node} {where} on {nodes} nodes"


def check_nodes(
    backend: Backend,
    health: HealthConfig,
    nodes: Sequence[str],
    stick: Yardstick,
    expect: float | None,
    spare: Sequence[str],
    drain: bool,
    as_json: bool,
) -> Status:
    """Run, judge, bisect, drain; print what happened; the Nagios status."""
    store = paths.home() / "nccl-baseline.json"
    key = baseline_key(stick, len(nodes))
    recorded = _baselines(store).get(key)
    expected = expect or health.nccl_nodes_busbw_gbps or (recorded or {}).get("busbw_gbps")
    judge = Judge(expected, health.nccl_min_fraction)
    runner = Runner(backend, stick, "10")
    found = find_slow_nodes(nodes, runner, judge.slow, spare)
    whole = found.runs[0].measured
    note = ""
    if expected is None and whole.busbw is not None:
        _record(store, key, whole.busbw, nodes)
        note = f"no expected figure: recorded {whole.busbw:.2f} GB/s as the baseline ({key})"
    drained: dict[str, str] = {}
    for node, run in found.bad.items():
        reason = _reason(stick, run, found.accused.get(node), judge)
        if drain:
            backend.drain(node, reason)
        drained[node] = reason
    status = _status(found)
    if as_json:
        render.print_json(_json(found, judge, drained, note, drain))
        return status
    render.table(
        None,
        ["ROUND", "NODES", "BUSBW", "VERDICT", "RUN"],
        [
            [
                str(r.round),
                ",".join(r.nodes),
                "-" if r.measured.busbw is None else f"{r.measured.busbw:.3f}",
                "slow" if r.slow else "ok",
                r.measured.note,
            ]
            for r in found.runs
        ],
    )
    if note:
        click.echo(note)
    limit = "" if expected is None else f" (slow: below {judge.fraction * expected:.3f} GB/s)"
    click.echo(f"{len(found.runs)} run(s) in {found.rounds} round(s){limit}")
    for node, reason in drained.items():
        click.echo(f"{'drained' if drain else 'slow (not drained)'} {node}: {reason}")
    if found.unresolved:
        click.echo(
            f"cannot tell which of {', '.join(found.unresolved)} is slow: no node known good "
            "to pair them with (give --spare NODE, a node known good)"
        )
    if status is Status.OK:
        click.echo(f"healthy: {len(nodes)} nodes at speed")
    elif status is Status.WARNING:
        click.echo(
            "warning: the whole set was slow but every part of it ran at speed: no node "
            "named (noise, or a fault that shows only with every node; run it again)"
        )
    return status


def _reason(stick: Yardstick, run: Run, first: Run | None, judge: Judge) -> str:
    """`nccl-health: all_reduce busbw 0.010 GB/s beside g-1 (expected ..., slow below
    70%), job 5; first 0.011 beside g-2, job 4`: the convicting run, then the first."""

    def figure(measured: Measured) -> str:
        return "failed" if measured.busbw is None else f"{measured.busbw:.3f}"

    floor = ""
    if judge.expected is not None:
        floor = f" (expected {judge.expected:.3f} GB/s, slow below {judge.fraction:.0%})"
    busbw = "failed" if run.measured.busbw is None else f"busbw {figure(run.measured)} GB/s"
    reason = f"nccl-health: {stick.collective} {busbw} beside {run.nodes[1]}{floor}"
    reason += f", {run.measured.note}"
    if first is not None and first is not run:
        reason += f"; first {figure(first.measured)} beside {first.nodes[1]}, {first.measured.note}"
    return reason


def _status(found: Bisection) -> Status:
    """OK: at speed; CRITICAL: slow nodes named; WARNING: the whole set was slow but no
    part of it was (noise, or a fault that shows only at full scale); UNKNOWN: suspects
    that could not be told apart."""
    if found.healthy:
        return Status.OK
    if found.bad:
        return Status.CRITICAL
    return Status.UNKNOWN if found.unresolved else Status.WARNING


def _json(
    found: Bisection, judge: Judge, drained: dict[str, str], note: str, drain: bool
) -> dict[str, object]:
    return {
        "healthy": found.healthy,
        "expected_busbw_gbps": judge.expected,
        "min_fraction": judge.fraction,
        "runs": [
            {
                "round": r.round,
                "nodes": list(r.nodes),
                "busbw_gbps": r.measured.busbw,
                "slow": r.slow,
                "note": r.measured.note,
            }
            for r in found.runs
        ],
        "rounds": found.rounds,
        "slow_nodes": drained,
        "drained": drain and bool(drained),
        "unresolved": found.unresolved,
        "note": note,
    }


def _baselines(store: Path) -> dict[str, dict[str, Any]]:
    try:
        data = read_json(store)
    except ValueError:  # not JSON: a new baseline replaces it
        return {}
    return data or {}


def _record(store: Path, key: str, busbw: float, nodes: Sequence[str]) -> None:
    data = _baselines(store)
    data[key] = {"busbw_gbps": busbw, "nodes": list(nodes), "at": round(time.time())}
    store.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(store, data)
