"""The Slurm backend against a real Slurm 22.05 cluster started from files `podium
slurm render --hosts` wrote: slurmctld and 4 slurmd, each node a host of its own on
this machine (its network, UTS and mount namespaces: hostname, address on a bridge,
/etc/hosts). Submit, queue, show, logs, cancel, acct, nodes, drain, resume,
metacharacters, jobs across nodes (hostnames, ranks, MASTER_ADDR, PyTorch over gloo),
and auto-resume after a health check fails on a node under a running two-node job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from podium.backends.slurm.hook import node_state_dir
from podium.config.cluster import load_config
from podium.node.inventory import declared_bus_id
from tests.integration.conformance import check_backend
from tests.integration.slurm_cluster import ROOT, TERMINAL, SlurmCluster, in_service
from tests.polling import poll, wait_until

# One worker runs the "slurm-hosts-1" modules one after another (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.xdist_group("slurm-hosts-1")]


@pytest.fixture(scope="module")
def slurm(slurm_hosts: SlurmCluster) -> SlurmCluster:
    return in_service(slurm_hosts)


def _submit(slurm: SlurmCluster, *args: str, cwd: Path) -> int:
    return int(slurm.podium("submit", "--parsable", *args, cwd=cwd).stdout.strip())


def test_rendered_cluster_has_its_nodes(slurm: SlurmCluster) -> None:
    nodes = slurm.json("nodes")
    assert [n["node"] for n in nodes] == [f"debug-st-g-{i}" for i in range(1, 5)]
    assert all(n["gpus_total"] == 2 and n["gpu_type"] == "tesla" for n in nodes)
    assert all(n["health"]["label"] == "schedulable" for n in nodes)
    conf = (slurm.directory / "etc" / "slurm.conf").read_text()
    assert "HealthCheckProgram=" in conf and "Prolog=" in conf and "Epilog=" in conf


def test_multi_node_job_runs_with_ranks_and_logs(slurm: SlurmCluster, tmp_path: Path) -> None:
    done = slurm.podium(
        "submit",
        "--wait",
        "-N",
        "2",
        "--ntasks-per-node=2",
        "--gpus-per-node=1",
        "--wrap",
        "srun bash -c 'echo \"rank=$SLURM_PROCID/$SLURM_NTASKS node=$SLURMD_NODENAME"
        " gpu=$CUDA_VISIBLE_DEVICES\"'",
        cwd=tmp_path,
    )
    job_id = int(done.stdout.split()[-1])
    job = slurm.json("show", str(job_id))
    assert job["state"] == "COMPLETED" and job["exit_code"] == 0
    assert job["node_count"] == 2 and len(job["nodes"]) == 2 and job["gpus"] == 2
    out = slurm.podium("logs", str(job_id)).stdout
    ranks = sorted(line.split()[0] for line in out.splitlines())
    assert ranks == [f"rank={r}/4" for r in range(4)]
    assert {line.split()[1] for line in out.splitlines()} == {f"node={n}" for n in job["nodes"]}
    assert all(line.endswith("gpu=0") for line in out.splitlines())
    acct = slurm.json("acct")
    assert any(j["job_id"] == job_id and j["state"] == "COMPLETED" for j in acct)


def test_exit_codes_queue_hold_cancel(slurm: SlurmCluster, tmp_path: Path) -> None:
    failed = slurm.podium("submit", "--wait", "--wrap", "exit 3", check=False, cwd=tmp_path)
    assert failed.returncode == 3
    held = _submit(slurm, "--hold", "--wrap", "true", cwd=tmp_path)
    queued = slurm.json("queue")
    row = next(j for j in queued if j["job_id"] == held)
    assert row["state"] == "PENDING" and row["held"]
    slurm.podium("cancel", str(held))
    assert slurm.wait_job(held, TERMINAL)["state"] == "CANCELLED"
    # Cancelled while it runs (SIGTERM, then SIGKILL to a script that ignores it), the
    # job leaves nothing in its TMPDIR: the batch script lives as a descriptor only.
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    tmp.chmod(0o777)
    stubborn = _submit(
        slurm, f"--export=ALL,TMPDIR={tmp}", "--wrap", "trap '' TERM; echo up; sleep 600",
        cwd=tmp_path,
    )  # fmt: skip
    slurm.wait_job(stubborn, {"RUNNING"})
    wait_until(lambda: list(tmp_path.glob(f"slurm-{stubborn}.out")), "its output file", 30)
    slurm.podium("cancel", str(stubborn))
    assert slurm.wait_job(stubborn, TERMINAL, 60)["state"] == "CANCELLED"
    assert list(tmp.iterdir()) == []


def test_bad_input_is_one_line_and_exit_2(slurm: SlurmCluster, tmp_path: Path) -> None:
    for args, words in (
        (["-p", "nope", "--wrap", "true"], "invalid partition"),
        (["--heartbeat-timeout=30", "--wrap", "true"], "not enforced on the Slurm backend"),
        (["-N", "2", "--ntasks=1", "--wrap", "true"], "fewer than --nodes"),
        (["--container-mounts=/a:/b", "--wrap", "true"], "needs --container-image"),
    ):
        done = slurm.podium("submit", *args, check=False, cwd=tmp_path)
        assert done.returncode == 2, done
        assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1
    missing = slurm.podium("show", "999999", check=False)
    assert missing.returncode == 2 and "no job 999999" in missing.stderr


def test_metacharacters_cannot_break_out(slurm: SlurmCluster, tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    name = f'x"; touch {canary}; echo "$(touch {canary})`touch {canary}`'
    script = tmp_path / "meta.sh"
    script.write_text("#!/bin/bash\nprintf '[%s]' \"$@\"\n")
    done = slurm.podium(
        "submit",
        "--wait",
        f"--job-name={name}",
        f"--comment=$(touch {canary})",
        str(script),
        f"a'b; touch {canary}",
        "$(id)",
        "PODIUM_SCRIPT_x",
        cwd=tmp_path,
    )
    job_id = int(done.stdout.split()[-1])
    job = slurm.json("show", str(job_id))
    assert job["name"] == name and job["comment"] == f"$(touch {canary})"
    assert (
        slurm.podium("logs", str(job_id)).stdout == f"[a'b; touch {canary}][$(id)][PODIUM_SCRIPT_x]"
    )
    assert not canary.exists()


def test_drain_and_resume_by_admin(slurm: SlurmCluster) -> None:
    slurm.podium("drain", "debug-st-g-4", "--reason", "maintenance window")
    node = slurm.node("debug-st-g-4")
    assert node["state"] == "drained" and node["health"]["label"] == "unschedulable-drained"
    no_gpu = slurm.podium("resume", "debug-st-g-4", "--gpu", "0", check=False)
    assert no_gpu.returncode == 2 and "whole nodes" in no_gpu.stderr
    slurm.podium("resume", "debug-st-g-4")
    slurm.wait_node("debug-st-g-4", lambda n: n["state"] == "idle" and n["responding"], 30)


def _progress(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _training_job(
    slurm: SlurmCluster, tmp_path: Path, options: str, step_time: float
) -> tuple[int, dict[str, Any], Path]:
    """A 2-node, 400-step training job with `#SBATCH options` and auto-resume, once it
    runs and has written two checkpoints: its id, its record then, its progress file.
    Its first run takes `step_time` a step (long enough for the fault to land while it
    trains); a run after a requeue (SLURM_RESTART_COUNT) 10 ms, checkpointing every 100
    steps (a checkpoint takes longer than ten such steps), so that the resumed run,
    which proves nothing by its length, ends soon."""
    progress = tmp_path / "progress.jsonl"
    script = tmp_path / "train.sh"
    script.write_text(
        f"#!/bin/bash\n#SBATCH {options}\n#PODIUM --auto-resume=2\n"
        f"step={step_time} every=10\n"
        f'[ "${{SLURM_RESTART_COUNT:-0}}" -gt 0 ] && step=0.01 every=100\n'
        f"exec srun {sys.executable} {ROOT}/examples/train.py --model gpt --steps 400 "
        f"--checkpoint-every $every --step-time $step --progress {progress}\n"
    )
    job_id = _submit(slurm, str(script), cwd=tmp_path)
    job = slurm.wait_job(job_id, {"RUNNING"})
    wait_until(lambda: sum(e["event"] == "checkpoint" for e in _progress(progress)) >= 2,
               "two checkpoints", 90)  # fmt: skip
    return job_id, job, progress


def test_health_fault_requeues_two_node_job_excluding_the_node(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    """An Xid on one node of a running 2-node job: Podium's HealthCheckProgram drains it
    (podium: reason), requeues the job excluding it; the job resumes from its last
    checkpoint with PODIUM_RESTART_COUNT=1 elsewhere; a deep check returns the node to
    service; an admin's drain on another node is left alone."""
    slurm.podium("drain", "debug-st-g-3", "--reason", "admin: cabling")
    options = "--nodes=2 --ntasks-per-node=1 --gpus-per-node=1"
    job_id, job, progress = _training_job(slurm, tmp_path, options, step_time=0.05)
    victim = job["nodes"][1]
    log = slurm.directory / "nodes" / victim / "kern.log"
    with log.open("a") as fh:
        bus = declared_bus_id(1, str(node_state_dir(load_config(slurm.config), victim)))
        fh.write(f"[  100.000000] NVRM: Xid (PCI:{bus}): 48, pid=1, name=python, DBE\n")
    drained = slurm.wait_node(victim, lambda n: (n["reason"] or "").startswith("podium:"), 60)
    assert "xid" in drained["reason"].lower()
    requeued = slurm.wait_job(job_id, {"PENDING", "RUNNING"}, 30)
    requeued = poll(lambda: slurm.json("show", str(job_id)),
                    lambda job: job["restart_count"] >= 1, "a restart", 60)  # fmt: skip
    assert requeued["restart_count"] == 1
    assert victim in requeued["excluded_nodes"]
    final = slurm.wait_job(job_id, TERMINAL, 240)
    assert final["state"] == "COMPLETED" and final["restart_count"] == 1
    assert victim not in final["nodes"] and "debug-st-g-3" not in final["nodes"]
    events = _progress(progress)
    resume = next(e for e in events if e["event"] == "resume")
    assert resume["restart"] == 1 and int(resume["step"]) >= 10  # type: ignore[call-overload]
    assert max(int(e["step"]) for e in events) == 400  # type: ignore[call-overload]
    # Podium brings back only its own drain, after a deep check.
    slurm.wait_node(victim, lambda n: n["state"] in ("idle", "mixed", "allocated"), 60)
    admin = slurm.node("debug-st-g-3")
    assert admin["state"] == "drained" and admin["reason"].startswith("admin: cabling")
    slurm.podium("resume", "debug-st-g-3")


def test_application_error_is_not_requeued_but_a_requeue_exit_code_is(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    app = _submit(slurm, "--auto-resume=2", "--wrap", "exit 3", cwd=tmp_path)
    coded = _submit(
        slurm,
        "--auto-resume=1",
        "--requeue-exit=75",
        "--wrap",
        '[ "$PODIUM_RESTART_COUNT" = 0 ] && exit 75; echo "restart=$PODIUM_RESTART_COUNT"',
        cwd=tmp_path,
    )
    failed = slurm.wait_job(app, TERMINAL)
    assert failed["state"] == "FAILED" and failed["exit_code"] == 3 and failed["restart_count"] == 0
    done = slurm.wait_job(coded, {"COMPLETED"}, 90)
    assert done["restart_count"] == 1
    assert "restart=1" in slurm.podium("logs", str(coded)).stdout


def test_harmless_directives_reach_slurm(slurm: SlurmCluster, tmp_path: Path) -> None:
    # Issue 12: submitit's --wckey, --mem=0 and the binding hints were refused by
    # Podium's parser before Slurm saw them; now they reach sbatch and the job runs.
    script = tmp_path / "submitit.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH --wckey=submitit --mem=0 --hint=nomultithread\n"
        '#SBATCH --ntasks-per-core=1 --gres-flags=enforce-binding\necho "mem=$SLURM_MEM_PER_NODE"\n'
    )
    job_id = _submit(slurm, "-o", str(tmp_path / "%j.out"), str(script), cwd=tmp_path)
    job = slurm.wait_job(job_id, TERMINAL, 60)
    assert job["state"] == "COMPLETED", job
    # Slurm 22.05 sets no SLURM_MEM_PER_NODE for --mem=0 (the embedded cluster neither).
    assert (tmp_path / f"{job_id}.out").read_text() == "mem=\n"


def test_a_reservation_is_honoured_on_the_slurm_backend(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    # Issue 28: --reservation was refused with the embedded cluster's reason on every
    # backend; Slurm has advance reservations, so the job goes into one.
    slurm.scontrol(
        "create", "reservation", "ReservationName=podium-r28", "Users=root",
        "StartTime=now", "Duration=10", "Nodes=debug-st-g-4",
    )  # fmt: skip
    try:
        job_id = _submit(
            slurm, "--reservation=podium-r28", "-o", str(tmp_path / "%j.out"),
            "--wrap", "hostname", cwd=tmp_path,
        )  # fmt: skip
        assert "Reservation=podium-r28" in slurm.scontrol("show", "job", str(job_id))
        job = slurm.wait_job(job_id, TERMINAL)
        assert job["state"] == "COMPLETED", job
        assert job["nodes"] == ["debug-st-g-4"], job
    finally:
        slurm.scontrol("delete", "ReservationName=podium-r28")
    done = slurm.podium("submit", "--reservation=nope", "--wrap", "true", cwd=tmp_path, check=False)
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_each_node_is_a_host_of_its_own(slurm: SlurmCluster, tmp_path: Path) -> None:
    # Issue 29: on the one-host layout a 4-node job printed one hostname four times.
    # Each task prints where it runs; rank 0 listens on MASTER_ADDR (the first node, as
    # `scontrol show hostnames` names it) and every other rank connects to it.
    script = tmp_path / "hosts.sh"
    script.write_text(
        "#!/bin/bash\n"
        'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)\n'
        'srun bash -c \'echo "$(hostname) $SLURM_NODEID $SLURM_PROCID $(hostname -I)"; '
        f"exec {sys.executable} -c \"$0\"' '{_RENDEZVOUS}'\n"
    )
    out = tmp_path / "%j.out"
    job_id = _submit(slurm, "-N", "4", "--ntasks-per-node=1", "-o", str(out), str(script),
                     cwd=tmp_path)  # fmt: skip
    job = slurm.wait_job(job_id, TERMINAL)
    assert job["state"] == "COMPLETED", job
    lines = sorted((tmp_path / f"{job_id}.out").read_text().split("\n"))
    tasks = [line.split() for line in lines if line and not line.startswith("reached")]
    assert [t[0] for t in tasks] == job["nodes"] == [f"debug-st-g-{i}" for i in range(1, 5)]
    assert [(t[1], t[2]) for t in tasks] == [(str(i), str(i)) for i in range(4)]
    assert len({t[3] for t in tasks}) == 4  # four addresses
    assert [line for line in lines if line.startswith("reached")] == ["reached 3 of 3"]


def test_each_node_has_its_own_cgroups_and_memory_is_enforced(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    if not (slurm.directory / "run" / "cgroups").exists():
        pytest.skip("no cgroup v1 on this machine: the nodes run proctrack/linuxproc")
    out = tmp_path / "%j.out"
    job_id = _submit(slurm, "-N", "2", "--mem=200M", "-o", str(out), "--wrap",
                     "srun grep :memory: /proc/self/cgroup", cwd=tmp_path)  # fmt: skip
    assert slurm.wait_job(job_id, TERMINAL)["state"] == "COMPLETED"
    paths = sorted((tmp_path / f"{job_id}.out").read_text().split())
    root = f"podium-tb{slurm.port_base}"  # up.sh names it by the cluster's port base
    for node, line in zip(("debug-st-g-1", "debug-st-g-2"), paths, strict=True):
        assert f"/{root}/{node}/slurm_{node}/uid_0/job_{job_id}/step_0/" in line, paths
    # --mem is a limit: 400 MiB under --mem=100M is killed by the node's OOM handler.
    greedy = f"srun {sys.executable} -c 'x = bytearray(400 << 20); print(len(x))'"
    oom = _submit(slurm, "--mem=100M", "-o", str(out), "--wrap", greedy, cwd=tmp_path)
    job = slurm.wait_job(oom, TERMINAL)
    log = (tmp_path / f"{oom}.out").read_text()
    assert job["state"] == "FAILED" and "Out Of Memory" in log, (job, log)
    shown = slurm.podium("show", str(oom))  # the text form of a record with no events
    assert "state" in shown.stdout and "FAILED" in shown.stdout


# Rank 0 accepts a connection from each other rank at MASTER_ADDR; the others connect.
_RENDEZVOUS = """
import os, socket, time
rank, size = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
if rank == 0:
    server = socket.create_server(("0.0.0.0", 29411))
    server.settimeout(60)
    for _ in range(size - 1):
        server.accept()[0].close()
    print(f"reached {size - 1} of {size - 1}", flush=True)
else:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection((os.environ["MASTER_ADDR"], 29411), timeout=5).close()
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.2)
"""


def test_pytorch_trains_across_two_hosts_with_gloo(slurm: SlurmCluster, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    progress = tmp_path / "progress.jsonl"
    train = ROOT / "examples" / "train.py"
    job_id = _submit(
        slurm, "-N", "2", "--ntasks-per-node=1", "-o", str(tmp_path / "%j.out"),
        f"--checkpoint-dir={tmp_path / 'ckpt'}", "--wrap",
        f"srun {sys.executable} {train} --model gpt --steps 20 --checkpoint-every 5 "
        f"--progress {progress}",
        cwd=tmp_path,
    )  # fmt: skip
    job = slurm.wait_job(job_id, TERMINAL, timeout=240)
    log = (tmp_path / f"{job_id}.out").read_text()
    assert job["state"] == "COMPLETED", log[-2000:]
    assert len(job["nodes"]) == 2
    assert "rank 0/2]" in log and "rank 1/2]" in log, log[-2000:]  # one world of two
    events = _progress(progress)
    assert max(e["step"] for e in events) == 20
    assert any(e["event"] == "checkpoint" for e in events)
    assert any((tmp_path / "ckpt").iterdir())


@pytest.mark.parametrize(("fault", "mend"), [("crash", "start"), ("cut", "join")])
def test_a_lost_node_is_marked_down_and_the_job_resumes_on_others(
    slurm: SlurmCluster, tmp_path: Path, fault: str, mend: str
) -> None:
    """A node of a running 2-node job is lost (its slurmd killed, or its link cut):
    Slurm marks it DOWN, the job is requeued and resumes from its last checkpoint on
    two other hosts; the node comes back when mended."""
    # 40 s of steps: longer than Slurm takes to see the node gone (SlurmdTimeout 10 s
    # on the testbed), so that a crashed slurmd's job, whose tasks run on, cannot
    # finish before the node is marked DOWN.
    options = "--nodes=2 --ntasks-per-node=1"
    job_id, job, progress = _training_job(slurm, tmp_path, options, step_time=0.1)
    victim = job["nodes"][1]
    slurm.node_sh(victim, fault)
    try:
        slurm.wait_node(victim, lambda n: "down" in n["state"], 60)
        final = slurm.wait_job(job_id, TERMINAL, 300)
        assert final["state"] == "COMPLETED" and final["restart_count"] >= 1, final
        assert victim not in final["nodes"]
        events = _progress(progress)
        resume = next(e for e in events if e["event"] == "resume")
        assert int(resume["step"]) >= 10  # type: ignore[call-overload]
        assert max(int(e["step"]) for e in events) == 400  # type: ignore[call-overload]
    finally:
        slurm.node_sh(victim, mend)
        subprocess.run(
            ["scontrol", "update", f"NodeName={victim}", "State=RESUME"],
            capture_output=True, env=slurm.env,
        )  # fmt: skip
        slurm.wait_node(victim, lambda n: n["state"] in ("idle", "mixed", "allocated"), 60)


def test_the_slurm_backend_meets_the_conformance_check(slurm: SlurmCluster, tmp_path: Path) -> None:
    check_backend(lambda *args: slurm.podium(*args, check=False, cwd=tmp_path))
