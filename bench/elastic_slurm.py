"""Elastic training across hosts on Slurm under a burst of high-QoS jobs: Slurm's own
kill-and-requeue against Podium's elastic keeper (issue 49).

    python bench/elastic_slurm.py [--runs 3] [--window 120] [--grow-delay 1:00]

Needs root, slurm-wlm, munge, slurmdbd and MariaDB (scripts/slurm-testbed/install.sh).
Two four-host test clusters (scripts/slurm-testbed, each node a host of its own, with
slurmdbd and the QoS high > normal > low, high preempting low) are started once and
used in turn, run by run:

  a  kill-and-requeue: Slurm's preemption by QoS (PreemptType=preempt/qos,
     PreemptMode=REQUEUE, Slurm's defaults otherwise): one low 4-node job of 4 ranks
     (`srun`), preempted whole and requeued when a high job waits;
  b  shrink/grow: the same work as a low `--elastic=1:4` job (one replica per host);
     its cluster keeps Slurm's rendered PreemptType (no preemption within a
     partition) and Podium's elastic keeper shrinks it for the high jobs and grows it
     back after `elastic.grow_delay`.

From t = 10 s, 6 high jobs of one host each (8 s of sleep) arrive, one every 4 s.
The ranks are bench/elastic.py's synthetic workers (real processes and signals; 3 s
to start; rank 0 counts one unit a second per replica and saves every 4 s; told to
stop or resize, they exit without saving). Reported per policy (min/median/max over
runs): useful replica-hours per hour of the window (what the run going at its end had
kept), the high jobs' wait (submit to start, from Slurm's records), host use (hosts
held, sampled every 0.5 s, over 4), and the resizes or requeues. Results go to stdout
and bench/results/elastic-slurm-grow-DELAY.json. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from elastic import WORKER, summary
from recovery import wait_for
from recovery_slurm import PODIUM, ROOT, Cluster

POLICIES = {"a": "kill-and-requeue (Slurm preempt/qos)", "b": "shrink/grow (Podium's keeper)"}
QOS = [
    ["add", "qos", "low,normal,high"],
    ["modify", "qos", "where", "name=high", "set", "Priority=1000", "Preempt=low"],
    ["modify", "qos", "where", "name=normal", "set", "Priority=100"],
    ["modify", "user", "root", "set", "qos=low,normal,high", "defaultqos=normal"],
]


def cluster_for(policy: str, grow_delay: str) -> Cluster:
    """A four-host cluster with accounting and the QoS; Slurm preempts by QoS under a."""
    port = 19500 if policy == "a" else 19800
    cluster = Cluster(port, accounting=True, preempt="preempt/qos" if policy == "a" else "")
    for args in QOS:
        cluster.run("sacctmgr", "-i", *args)
    with (cluster.dir / "etc" / "podium.yaml").open("a") as config:
        config.write(
            "qos:\n  - {name: high, priority: 1000, preempt: [low]}\n"
            "  - {name: normal, priority: 100}\n  - {name: low, priority: 10}\n"
            f"elastic: {{grow_delay: '{grow_delay}'}}\n"
        )
    return cluster


def show(cluster: Cluster, job: str) -> dict[str, Any]:
    return dict(json.loads(cluster.run(PODIUM, "show", job, "--json")))


def one_run(cluster: Cluster, policy: str, args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="run-", dir=cluster.dir))
    work.chmod(0o755)
    (work / "worker.py").write_text(WORKER)
    ckpt = work / "ckpt"
    ckpt.mkdir()
    worker = f"{sys.executable} {work / 'worker.py'} 4 {args.startup}"
    common = ["--qos=low", f"--checkpoint-dir={ckpt}", "-o", str(work / "train-%j.out")]
    if policy == "a":
        options = [*common, "-N4", "--ntasks-per-node=1", "--exclusive",
                   "--export=ALL,REPLICAS=4"]  # fmt: skip
        wrap = f"exec srun {worker}"
    else:
        options = [*common, "--elastic=1:4", "--resize-grace=30"]
        wrap = f"exec {worker}"
    began = time.monotonic()
    trainer = cluster.run(PODIUM, "submit", "--parsable", *options, "--wrap", wrap).strip()
    held: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            out = cluster.run("squeue", "-h", "-t", "R", "-o", "%D", check=False)
            held.append(sum(int(n) for n in out.split() if n.isdigit()))
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    time.sleep(max(0.0, 10.0 - (time.monotonic() - began)))
    urgent = []
    for _ in range(6):
        urgent.append(cluster.run(PODIUM, "submit", "--parsable", "--qos=high", "-N1",
                                  "--exclusive", "-o", "/dev/null", "--wrap",
                                  "sleep 8").strip())  # fmt: skip
        time.sleep(4.0)
    time.sleep(max(0.0, args.window - (time.monotonic() - began)))
    stop.set()
    sampler.join()
    progress = work / "ckpt.progress"
    useful = json.loads(progress.read_text())["units"] if progress.exists() else 0.0
    record = show(cluster, trainer)
    waits = []
    for job in urgent:
        high = show(cluster, job)
        if high.get("start_epoch"):
            waits.append(high["start_epoch"] - high["submit_epoch"])
    cluster.run("scancel", trainer, *urgent, check=False)
    wait_for("the queue empty", lambda: not cluster.run("squeue", "-h", check=False).strip(),
             time.monotonic() + 60)  # fmt: skip
    return {
        "policy": policy,
        "useful_replica_h_per_h": useful / args.window,
        "high_wait_s": statistics.mean(waits) if waits else None,
        "high_started": len(waits),
        "host_use": statistics.mean(held) / 4 if held else 0.0,
        "resizes": int(record.get("resizes") or 0),
        "requeues": int(record.get("restart_count") or 0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--window", type=float, default=120.0)
    parser.add_argument("--grow-delay", default="1:00", help="elastic.grow_delay (default 1:00)")
    parser.add_argument("--startup", type=float, default=3.0)
    args = parser.parse_args()
    clusters = {p: cluster_for(p, args.grow_delay) for p in POLICIES}
    results: list[dict[str, Any]] = []
    try:
        for run in range(args.runs):
            for policy, cluster in clusters.items():
                row = one_run(cluster, policy, args)
                row["run"] = run
                results.append(row)
                print(json.dumps(row), flush=True)
    finally:
        for cluster in clusters.values():
            cluster.down()
    print(f"\n{'policy':40} {'useful (min/med/max)':22} {'high wait s':20} {'host use':20} "
          "resizes requeues")  # fmt: skip
    for policy, label in POLICIES.items():
        rows = [r for r in results if r["policy"] == policy]
        print(f"{policy} {label:38} {summary(rows, 'useful_replica_h_per_h'):22} "
              f"{summary(rows, 'high_wait_s'):20} {summary(rows, 'host_use'):20} "
              f"{statistics.median(r['resizes'] for r in rows):7} "
              f"{statistics.median(r['requeues'] for r in rows):8}")  # fmt: skip
    name = f"elastic-slurm-grow-{args.grow_delay.replace(':', '')}.json"
    (ROOT / "bench" / "results" / name).write_text(
        json.dumps({"args": vars(args), "runs": results}, indent=1) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
