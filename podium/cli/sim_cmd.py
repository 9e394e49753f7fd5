"""`podium sim`: replay a trace through the scheduling core on a virtual clock."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from podium.cli import render
from podium.cli.progress_bar import Progress
from podium.errors import SpecError
from podium.sched.model import TeamRules

if TYPE_CHECKING:
    from podium.sim.engine import SimOptions
    from podium.sim.traces import TraceJob, TraceNode

COLUMNS = [
    "policy",
    "sharing",
    "placement",
    "finished",
    "avg_jct_s",
    "p50_jct_s",
    "p95_jct_s",
    "p99_jct_s",
    "avg_wait_s",
    "p99_wait_s",
    "p999_wait_s",
    "max_wait_s",
    "unfinished",
    "makespan_s",
    "gpu_util",
    "used_util",
    "preemptions",
    "max_slowdown",
    "jain_users",
    "wait_vs_fifo_bf",
    "slowed_2x_vs_fifo_bf",
    "slowed_4x_vs_fifo_bf",
    "slowed_10x_vs_fifo_bf",
    "worst_vs_fifo_bf",
    "rho_avg",
    "rho_max",
]
ELASTIC_COLUMNS = ["elastic", "resizes", "lost_gpu_s", "elastic_avg_jct_s", "high_avg_wait_s"]


@click.command()
@click.argument("trace", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["tiresias", "alibaba", "simple"]),
    default=None,
    help="Trace format (default: from the CSV header).",
)
@click.option("--nodes", type=click.IntRange(1, 100000), default=None, help="Number of nodes.")
@click.option("--gpus-per-node", type=click.IntRange(0, 64), default=8)
@click.option("--cpus-per-node", type=click.IntRange(1, 100000), default=64)
@click.option("--mem-per-node", type=click.IntRange(1), default=512000, help="MiB.")
@click.option(
    "--node-list",
    type=click.Path(path_type=Path),
    default=None,
    help="Nodes from a CSV (Alibaba node list format: sn,cpu_milli,memory_mib,gpu,model).",
)
@click.option(
    "--config",
    type=click.Path(path_type=Path),
    default=None,
    help="Use the node of this cluster config (times --nodes).",
)
@click.option(
    "--policies",
    default="fifo,fifo-backfill,priority,backfill,preempt,fairshare,shortest-first,las",
    help="Comma-separated: fifo, fifo-backfill, priority, backfill, preempt, fairshare, "
    "shortest-first, las (least attained service, preemptive) (default: every one).",
)
@click.option(
    "--time-scale",
    type=float,
    default=1.0,
    help="Multiply submit times (e.g. 0.2 compresses arrivals five-fold).",
)
@click.option(
    "--checkpoint-interval",
    type=float,
    default=600.0,
    help="Seconds between checkpoints (work lost on preemption).",
)
@click.option(
    "--time-limit-factor",
    type=float,
    default=1.0,
    help="Time limit = duration x this (what backfill plans with).",
)
@click.option(
    "--pass-interval",
    type=float,
    default=0.0,
    help="At most one scheduling pass per this many seconds (0: after every event).",
)
@click.option(
    "--sharing",
    default="whole",
    help="Comma-separated: how fractional GPU requests (Alibaba's gpu_milli) are served: "
    "whole (rounded up), mps (units of shared GPUs), mig (the advisor's slices).",
)
@click.option(
    "--mps-units", type=click.IntRange(1, 100), default=10, help="MPS units per shared GPU."
)
@click.option(
    "--teams",
    "teams_file",
    type=click.Path(path_type=Path),
    default=None,
    help="Team quotas to replay: a YAML file with `teams:` (and `qos:`) as in the cluster "
    "config (default: --config's). Members are the trace's users or accounts.",
)
@click.option(
    "--elastic",
    "elastic_share",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    help="Share of the jobs of 2 GPUs up to a node's made elastic (MIN:MAX = half:all "
    "their GPUs); each is replayed under every --elastic-modes.",
)
@click.option(
    "--elastic-modes",
    default="requeue,shrink,shrink-ckpt",
    help="Comma-separated, with --elastic: requeue (rigid, killed and requeued whole), "
    "shrink (shrink/grow, victims by runtime), shrink-ckpt (shrink/grow, victims by work "
    "lost since their checkpoints).",
)
@click.option(
    "--restart-cost",
    type=click.FloatRange(0.0),
    default=10.0,
    help="Seconds without progress after each restart (a requeue or a resize) (default "
    "10: a requeued PyTorch job's fault to next step on an H200, bench/recovery.py).",
)
@click.option(
    "--checkpointing",
    type=click.FloatRange(0.0, 1.0),
    default=0.5,
    help="Share of the jobs that checkpoint, where the trace does not say (a "
    "`checkpoints` column): las stops only those, and QoS preemption costs the others "
    "all their work (default 0.5: no public trace records it; 0 and 1 bound it).",
)
@click.option(
    "--placement",
    type=click.Choice(["best-fit", "end-aware", "fgd"]),
    default=None,
    help="Where jobs go, for every policy: best fit by free GPUs; best fit, then the "
    "node whose jobs end last (end-aware); or, for single-node jobs, where they fragment "
    "the node least for the trace's mix of requests (fgd) (default: las end-aware, the "
    "others best-fit, as Slurm; docs/scheduling.md).",
)
@click.option(
    "--save-time",
    type=click.FloatRange(0.0),
    default=5.0,
    help="las: seconds a preempted job that checkpoints holds its GPUs after the signal "
    "while it saves (it keeps all its work) (default 5).",
)
@click.option(
    "--forecast-error",
    is_flag=True,
    help="Instead: at each job's submission ask the forecast (podium queue --start) when "
    "it starts, and report the error against its real start in the replay.",
)
@click.option(
    "--forecast-sample",
    type=click.IntRange(1),
    default=1,
    help="With --forecast-error: forecast every Nth submission only (big traces).",
)
@click.option(
    "--progress-after",
    type=click.FloatRange(0.0),
    default=None,
    help="With --forecast-error: running jobs report a steady rate (podium progress), so "
    "their real end is known this many seconds into each run (default: no job reports).",
)
@click.option("--json", "as_json", is_flag=True)
def sim(
    trace: Path,
    fmt: str | None,
    nodes: int | None,
    gpus_per_node: int,
    cpus_per_node: int,
    mem_per_node: int,
    node_list: Path | None,
    config: Path | None,
    policies: str,
    time_scale: float,
    checkpoint_interval: float,
    time_limit_factor: float,
    pass_interval: float,
    sharing: str,
    mps_units: int,
    teams_file: Path | None,
    elastic_share: float,
    elastic_modes: str,
    restart_cost: float,
    checkpointing: float,
    placement: str | None,
    save_time: float,
    forecast_error: bool,
    forecast_sample: int,
    progress_after: float | None,
    as_json: bool,
) -> None:
    """Replay TRACE under each policy and compare JCT, waits, utilisation and fairness."""
    from podium.sim.engine import SimOptions
    from podium.sim.traces import read_trace

    names, modes, kinds = _choices(policies, sharing, elastic_share, elastic_modes)
    if time_scale <= 0 or time_limit_factor <= 0:
        raise SpecError("--time-scale and --time-limit-factor must be positive")
    if progress_after is not None and not forecast_error:
        raise SpecError("--progress-after changes only forecasts: add --forecast-error")
    cluster = _cluster(node_list, config, nodes, gpus_per_node, cpus_per_node, mem_per_node)
    rules = _team_rules(teams_file or config)
    jobs = read_trace(trace, fmt)
    if time_scale != 1.0:
        jobs = [replace(j, submit_time=j.submit_time * time_scale) for j in jobs]
    results: list[dict[str, Any]] = []
    with Progress("podium sim") as progress:
        for mode in modes:
            for kind in kinds:
                options = SimOptions(
                    checkpoint_interval_s=checkpoint_interval,
                    time_limit_factor=time_limit_factor,
                    pass_interval_s=pass_interval,
                    sharing=mode,
                    mps_units=mps_units,
                    teams=rules,
                    elastic_share=elastic_share,
                    elastic_mode=kind or "shrink",
                    restart_cost_s=restart_cost,
                    save_s=save_time,
                    checkpointing=checkpointing,
                    placement=placement,
                    progress_after_s=progress_after,
                )
                where = "".join(f", {x}" for x in (mode if len(modes) > 1 else "", kind) if x)
                replay = _Replay(jobs, cluster, options, progress, where)
                if forecast_error:
                    results += [replay.forecast_row(name, forecast_sample) for name in names]
                else:
                    results += replay.outcome_rows(names, kind, rules)
    if as_json:
        render.print_json(results)
        return
    _print_tables(trace, jobs, cluster, results, forecast_error, bool(elastic_share), rules)


def _choices(
    policies: str, sharing: str, elastic_share: float, elastic_modes: str
) -> tuple[list[str], list[str], list[str]]:
    """The policies, sharing modes and elastic modes asked for ("" when not elastic),
    each checked against those the simulator knows."""
    from podium.sim.elastic_replay import MODES as ELASTIC_MODES
    from podium.sim.engine import POLICIES
    from podium.sim.sharing import MODES

    names = [p.strip() for p in policies.split(",") if p.strip()]
    bad = [p for p in names if p not in POLICIES]
    if bad:
        raise SpecError(f"unknown policy {bad[0]!r}: expected {', '.join(POLICIES)}")
    modes = [m.strip() for m in sharing.split(",") if m.strip()]
    wrong = [m for m in modes if m not in MODES]
    if wrong or not modes:
        raise SpecError(f"unknown sharing {(wrong or [sharing])[0]!r}: expected {', '.join(MODES)}")
    kinds = [m.strip() for m in elastic_modes.split(",") if m.strip()] if elastic_share else [""]
    odd = [k for k in kinds if k and k not in ELASTIC_MODES]
    if odd or not kinds:
        raise SpecError(
            f"unknown elastic mode {(odd or [elastic_modes])[0]!r}: expected "
            f"{', '.join(ELASTIC_MODES)}"
        )
    return names, modes, kinds


def _cluster(
    node_list: Path | None,
    config: Path | None,
    nodes: int | None,
    gpus_per_node: int,
    cpus_per_node: int,
    mem_per_node: int,
) -> list[TraceNode]:
    """The simulated cluster: an Alibaba node list, N copies of a config's node, or N
    uniform nodes."""
    from podium.sim.engine import uniform_nodes
    from podium.sim.traces import TraceNode, read_alibaba_nodes

    if node_list is not None:
        return read_alibaba_nodes(node_list)
    if config is not None:
        from podium.config.cluster import load_config

        node = load_config(config).node
        return [
            TraceNode(
                f"{node.name}-{i}", node.gpus.count, node.cpus, node.memory_mb, node.gpus.type
            )
            for i in range(nodes or 1)
        ]
    if nodes is not None:
        return uniform_nodes(nodes, gpus_per_node, cpus_per_node, mem_per_node)
    raise SpecError(
        "give the cluster: --nodes N [--gpus-per-node G], --node-list CSV or --config cluster.yaml"
    )


@dataclass
class _Replay:
    """One sharing/elastic setting's replays, each shown as a progress line."""

    jobs: list[TraceJob]
    cluster: list[TraceNode]
    options: SimOptions
    progress: Progress
    where: str

    def forecast_row(self, name: str, sample_every: int) -> dict[str, Any]:
        """How far `name`'s forecasts at submission were from the real starts."""
        from podium.sim.forecast_error import error_row, forecast_errors

        task = self.progress.task(f"{name}{self.where}", len(self.jobs), "jobs")
        samples = forecast_errors(
            self.jobs, self.cluster, name, self.options, sample_every=sample_every,
            on_progress=task.counted,
        )  # fmt: skip
        task.finish(f"{len(samples)} forecasts")
        return error_row(name, samples)

    def outcome_rows(self, names: list[str], kind: str, rules: TeamRules) -> list[dict[str, Any]]:
        """Each policy's outcomes, with the most any job waits against fifo-backfill
        (replayed first, as the baseline), the share of jobs it slows more than 2x and
        the worst job's slowdown against it."""
        from podium.sim.engine import policy_of, simulate
        from podium.sim.metrics import slowdown_vs, summarize, team_summary, wait_ratio_max

        n = len(self.jobs)
        task = self.progress.task(f"fifo-backfill{self.where} (the baseline)", n, "jobs")
        baseline = simulate(
            self.jobs, self.cluster, "fifo-backfill", self.options, on_progress=task.counted
        )
        task.finish()
        rows = []
        for name in names:
            task = self.progress.task(f"{name}{self.where}", n, "jobs")
            if name == "fifo-backfill":
                result = baseline  # the same replay: deterministic
            else:
                result = simulate(
                    self.jobs, self.cluster, name, self.options, on_progress=task.counted
                )
            row = {
                **summarize(result),
                "sharing": self.options.sharing,
                "placement": policy_of(name, self.options).placement,
            }
            task.finish(f"avg JCT {row['avg_jct_s']} s")
            row["daemon_default"] = name == "las" and row["placement"] == "end-aware"
            row["wait_vs_fifo_bf"] = round(wait_ratio_max(result, baseline), 2)
            slowed = slowdown_vs(result, baseline)
            row["slowed_2x_vs_fifo_bf"] = round(slowed["slowed_2x"], 4)  # a share of the jobs
            row["slowed_4x_vs_fifo_bf"] = round(slowed["slowed_4x"], 4)
            row["slowed_10x_vs_fifo_bf"] = slowed["slowed_10x"]  # how many
            row["worst_vs_fifo_bf"] = round(slowed["worst"], 2)
            row["checkpointing"] = self.options.checkpointing
            if kind:
                row["elastic"] = kind
            if rules.teams:
                row["teams"] = team_summary(result, rules)
            rows.append(row)
        return rows


def _print_tables(
    trace: Path,
    jobs: list[TraceJob],
    cluster: list[TraceNode],
    results: list[dict[str, Any]],
    forecast_error: bool,
    elastic: bool,
    rules: TeamRules,
) -> None:
    gpus = sum(n.gpus for n in cluster)
    title = f"{trace.name}: {len(jobs)} jobs on {len(cluster)} nodes, {gpus} GPUs"
    if forecast_error:
        heading = f"{title}: forecast at submission vs real start (seconds)"
        render.table(heading, [c.upper() for c in results[0]], [list(r.values()) for r in results])
        return
    columns = COLUMNS + (ELASTIC_COLUMNS if elastic else [])
    render.table(title, columns, [[r[c] for c in columns] for r in results])
    for r in results if rules.teams else []:
        render.table(
            f"teams under {r['policy']} ({r['sharing']})",
            ["TEAM", "JOBS", "GPU_HOURS", "GPU_SHARE", "AVG_WAIT_S", "P99_WAIT_S"],
            [[t["team"], t["jobs"], t["gpu_hours"], t["gpu_share"], t["avg_wait_s"],
              t["p99_wait_s"]] for t in r["teams"]],
        )  # fmt: skip
    skipped = results[0]["unschedulable"] if results else 0
    if skipped:
        click.echo(f"{skipped} job(s) fit no node and were not replayed")


def _team_rules(path: Path | None) -> TeamRules:
    """The team quotas in the YAML at `path` (a cluster config, or just its `teams:`
    and `qos:`); none without a path."""
    from podium.config.cluster import load_config
    from podium.sched.config_policy import team_rules

    if path is None:
        return TeamRules()
    return team_rules(load_config(path))
