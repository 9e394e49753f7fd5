"""The simulator: trace readers, replay through the real scheduling core, metrics."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from unittest.mock import patch

import pytest

from podium.errors import SpecError
from podium.sim.engine import POLICIES, SimOptions, simulate, uniform_nodes
from podium.sim.metrics import summarize
from podium.sim.traces import TraceJob, detect_format, read_alibaba, read_alibaba_nodes, read_trace

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "traces"


def test_readers(tmp_path: Path) -> None:
    tiresias = tmp_path / "t.csv"
    tiresias.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        "0,2,10,5,vgg19,100,30\n"
    )
    (job,) = read_trace(tiresias)
    assert (job.gpus, job.submit_time, job.duration, job.account) == (2, 10.0, 100.0, "vgg19")
    pods = tmp_path / "p.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time\n"
        "a,12000,16384,1,1000,,LS,Running,0,500,10\n"
        "b,6000,12288,0,460,,BE,Running,5,100,5\n"
    )
    a, b = read_alibaba(pods)
    assert (a.gpus, a.cpus, a.duration, a.qos) == (1, 12, 490.0, "high")
    assert (b.gpus, b.qos) == (1, "low")  # fractional GPU rounded up to a whole one
    simple = tmp_path / "s.csv"
    simple.write_text("job_id,submit_time,gpus,duration,qos\n1,0,4,60,high\n")
    assert detect_format(simple) == "simple" and read_trace(simple)[0].qos == "high"
    bad = tmp_path / "b.csv"
    bad.write_text("x,y\n1,2\n")
    with pytest.raises(SpecError, match="unknown trace format"):
        read_trace(bad)


def _jobs(*specs: tuple[float, int, float]) -> list[TraceJob]:
    return [
        TraceJob(job_id=i, submit_time=s, gpus=g, duration=d) for i, (s, g, d) in enumerate(specs)
    ]


def test_backfill_shortens_waits_without_delaying_the_big_job() -> None:
    # 8 GPUs; a 6-GPU job runs, a full-node job waits; small short jobs arrive behind it.
    trace = _jobs((0, 6, 100), (1, 8, 100), (2, 1, 50), (3, 1, 50), (4, 1, 500))
    nodes = uniform_nodes(1, 8, 64, 512000)
    fifo = {o.job.job_id: o for o in simulate(trace, nodes, "priority", SimOptions()).outcomes}
    bf = {o.job.job_id: o for o in simulate(trace, nodes, "backfill", SimOptions()).outcomes}
    assert fifo[2].first_start == 200 and bf[2].first_start == 2  # backfilled at once
    assert bf[1].first_start == fifo[1].first_start == 100  # the big job is not delayed
    assert bf[4].first_start >= 200  # the long one would have delayed it: it waits


def test_preemption_requeues_and_loses_only_work_since_checkpoint() -> None:
    trace = [
        TraceJob(job_id=0, submit_time=0, gpus=8, duration=1000, qos="low"),
        TraceJob(job_id=1, submit_time=250, gpus=8, duration=100, qos="high"),
    ]
    nodes = uniform_nodes(1, 8, 64, 512000)
    result = simulate(trace, nodes, "preempt", SimOptions(checkpoint_interval_s=100))
    out = {o.job.job_id: o for o in result.outcomes}
    assert result.preemptions == 1 and out[0].preemptions == 1
    assert out[1].first_start == 250 and out[1].end == 350
    assert out[0].lost_seconds == 50  # 250 s done, checkpoint at 200
    assert out[0].end == 350 + 800  # remaining 1000 - 200
    none = simulate(trace, nodes, "backfill", SimOptions())
    assert none.preemptions == 0


def test_metrics() -> None:
    trace = _jobs((0, 8, 100), (0, 8, 100))
    summary = summarize(simulate(trace, uniform_nodes(1, 8, 64, 512000), "fifo", SimOptions()))
    assert summary["finished"] == 2 and summary["makespan_s"] == 200
    assert summary["avg_jct_s"] == 150 and summary["avg_wait_s"] == 50
    assert summary["gpu_util"] == 1.0
    # The first arrives alone (N=1: 100 s alone, JCT 100); the second with N=2 would take
    # 200 s on half the GPUs, and its JCT is 200: both rho = 1.
    assert summary["rho_max"] == 1.0 and summary["rho_avg"] == 1.0


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/traces not beside this checkout")
def test_shared_traces_replay() -> None:
    tiresias = read_trace(SHARED / "tiresias_60_job.csv")
    assert len(tiresias) == 60
    result = summarize(
        simulate(tiresias, uniform_nodes(2, 8, 64, 512000), "backfill", SimOptions())
    )
    assert result["finished"] == 60 and 0 < result["gpu_util"] <= 1
    pods = read_alibaba(SHARED / "alibaba_openb_pod_list_default.csv")
    nodes = read_alibaba_nodes(SHARED / "alibaba_openb_node_list_gpu_node.csv")
    assert len(pods) == 8152 and len(nodes) > 1000
    sample = sorted(pods, key=lambda j: j.submit_time)[:400]
    assert summarize(simulate(sample, nodes, "preempt", SimOptions()))["finished"] > 0


def test_cli_compares_policies(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,submit_time,gpus,duration,qos\n0,0,6,100,low\n1,1,8,100,high\n2,2,1,50,normal\n"
    )
    podium = [sys.executable, "-m", "podium"]
    out = subprocess.run(
        [*podium, "sim", str(trace), "--nodes", "1", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    results = json.loads(out.stdout)
    assert [r["policy"] for r in results] == [
        "fifo",
        "fifo-backfill",
        "priority",
        "backfill",
        "preempt",
        "fairshare",
        "shortest-first",
        "las",
    ]  # every policy by default (issue 50)
    assert next(r for r in results if r["policy"] == "preempt")["preemptions"] == 1
    # against fifo-backfill, which backfills job 2 at once (JCT 50 s): plain fifo
    # runs it after job 1 (JCT 248 s), so one job of three is slowed 248/60 = 4.13x
    # (both completion times floored at 60 s)
    by = {r["policy"]: r for r in results}
    assert (
        by["fifo-backfill"]["slowed_2x_vs_fifo_bf"],
        by["fifo-backfill"]["worst_vs_fifo_bf"],
    ) == (0.0, 1.0)
    fifo = by["fifo"]
    assert (fifo["slowed_2x_vs_fifo_bf"], fifo["slowed_4x_vs_fifo_bf"]) == (0.3333, 0.3333)
    assert (fifo["slowed_10x_vs_fifo_bf"], fifo["worst_vs_fifo_bf"]) == (0, 4.13)
    # the daemon's default is marked, and every row says what share checkpoints
    assert [r["policy"] for r in results if r["daemon_default"]] == ["las"]
    assert {r["checkpointing"] for r in results} == {0.5}
    assert all(r["unfinished"] == 0 and r["max_wait_s"] >= r["p999_wait_s"] for r in results)
    table = subprocess.run(
        [*podium, "sim", str(trace), "--nodes", "1", "--policies", "fifo"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "fifo" in table and "avg_jct_s" in table
    bad = subprocess.run(
        [*podium, "sim", str(trace), "--nodes", "1", "--policies", "lifo"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "unknown policy 'lifo'" in bad.stderr


def test_team_quotas_are_replayed_and_reported_per_team(tmp_path: Path) -> None:
    """Team `a` (quota 2 GPUs, no cohort) submits four 2-GPU jobs at once on 8 GPUs:
    they run one at a time; team `b` (quota 6) is not held. `--teams` reports each
    team's share of the GPU-hours and its waits."""
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,submit_time,gpus,duration,user\n"
        + "".join(f"{i},0,2,100,alice\n" for i in range(4))
        + "".join(f"{i},0,2,100,bob\n" for i in range(4, 7))
    )
    teams = tmp_path / "teams.yaml"
    teams.write_text(
        "teams:\n  - {name: a, quota: {gpus: 2}, users: [alice]}\n"
        "  - {name: b, quota: {gpus: 6}, users: [bob]}\n"
    )
    podium = [sys.executable, "-m", "podium"]
    out = subprocess.run(
        [*podium, "sim", str(trace), "--nodes", "1", "--policies", "backfill", "--teams",
         str(teams), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    [result] = json.loads(out.stdout)
    by_team = {t["team"]: t for t in result["teams"]}
    assert by_team["a"]["avg_wait_s"] == 150.0  # waits 0, 100, 200, 300: one at a time
    assert by_team["b"]["avg_wait_s"] == 0.0
    assert by_team["a"]["gpu_share"] == pytest.approx(8 / 14, abs=1e-4)  # 800 of 1,400 GPU-s
    free = subprocess.run(
        [*podium, "sim", str(trace), "--nodes", "1", "--policies", "backfill", "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "teams" not in json.loads(free.stdout)[0]
    bad = tmp_path / "bad.yaml"
    bad.write_text("teams:\n  - {name: a, quota: {gpus: 2}}\n")
    refused = subprocess.run(
        [*podium, "sim", str(trace), "--nodes", "1", "--teams", str(bad)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert refused.returncode != 0 and "has no members" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_elastic_jobs_shrink_for_a_high_qos_job_and_grow_back() -> None:
    """A low-QoS 4-GPU job (elastic 2:4, 4,000 replica-seconds of work) and, at t=10, a
    high-QoS 1-GPU job of 100 s. requeue: the big job is killed, loses its 10 s and
    starts again at 110, ending at 1,110. shrink: it goes to 3 replicas at 10 (keeping
    its 40 replica-seconds), grows back to 4 when the GPU frees at 110 and ends at
    110 + (4000 - 40 - 300) / 4 = 1,025. The high job starts at once either way."""
    jobs = [
        TraceJob(job_id=0, submit_time=0, gpus=4, duration=1000, qos="low"),
        TraceJob(job_id=1, submit_time=10, gpus=1, duration=100, qos="high"),
    ]
    nodes = uniform_nodes(1, 4, 16, 64000)
    ends = {}
    for mode in ("requeue", "shrink", "shrink-ckpt"):
        options = SimOptions(elastic_share=1.0, elastic_mode=mode, pass_interval_s=0)
        result = simulate(jobs, nodes, "preempt", options)
        big, high = result.outcomes
        assert big.elastic and high.first_start == 10 and high.end == 110
        ends[mode] = (big.end, result.preemptions, result.resizes, big.resizes)
        assert summarize(result)["elastic_jobs"] == 1
    assert ends["requeue"] == (1110, 1, 0, 0)
    assert ends["shrink"] == ends["shrink-ckpt"] == (1025, 0, 2, 2)
    costly = simulate(jobs, nodes, "preempt", SimOptions(elastic_share=1.0, restart_cost_s=30))
    # 30 s without progress at each restart: 3 replicas work 70 s, not 100, then
    # 110 + 30 + (4000 - 40 - 210) / 4
    assert costly.outcomes[0].end == 1077.5


def test_elastic_options_of_the_sim_are_checked(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,gpus,duration,qos\n1,0,4,60,low\n")
    run = [sys.executable, "-m", "podium", "sim", str(trace), "--nodes", "1"]
    bad = subprocess.run([*run, "--elastic", "0.5", "--elastic-modes", "nope"],
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode != 0 and "unknown elastic mode 'nope'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    good = subprocess.run([*run, "--elastic", "1", "--json", "--policies", "preempt"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    rows = json.loads(good.stdout)
    assert [r["elastic"] for r in rows] == ["requeue", "shrink", "shrink-ckpt"]


def test_least_attained_service_stops_only_jobs_that_checkpoint() -> None:
    """Issue 62: the simulator charges what the daemon would: a job that does not
    checkpoint (the trace's `checkpoints` column, else the --checkpointing share) is
    never stopped by least attained service; one that does is, and pays its save."""
    long_job = TraceJob(0, 0.0, 8, 20000.0, time_limit=20000.0)
    short = TraceJob(1, 9000.0, 8, 100.0, time_limit=100.0)
    nodes = uniform_nodes(1, 8, 64, 512000)
    rules = replace(POLICIES["las"].las, min_run_s=60.0)  # type: ignore[arg-type]
    with patch.dict(POLICIES, {"las": replace(POLICIES["las"], las=rules)}):
        for saves, stops in ((True, 1), (False, 0)):
            trace = [replace(long_job, checkpoints=saves), short]
            got = simulate(trace, nodes, "las", SimOptions(save_s=5.0, checkpointing=0.0))
            assert got.preemptions == stops, saves
        shared = simulate([long_job, short], nodes, "las", SimOptions(checkpointing=1.0))
        assert shared.preemptions == 1  # no column: the share decides
        assert simulate([long_job, short], nodes, "las", SimOptions(checkpointing=0.0)
                        ).preemptions == 0  # fmt: skip
