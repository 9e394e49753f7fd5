"""A slow host inside a running 4-host job on Slurm (issue 49): how soon the elastic
keeper names it, confirms it and goes on without it, and how often it names a healthy
host (false positives), on the four-host test cluster under load.

    python bench/slow_host.py [--healthy 10] [--slow 3] [--load 2] [--rate 100mbit]

Needs root, slurm-wlm and munge (scripts/slurm-testbed/install.sh). The cluster is
started once. Each run submits examples/train.py (gpt, 200 steps, gloo, link checks
every 10 steps) as an `--elastic=1:4` job on the idle cluster, so it runs on all four
hosts. `--load N` CPU-bound processes (busy loops, outside Slurm) run beside it for
the whole run: the machine's two cores are shared by them, the four ranks and the
daemons.

  healthy  nothing is done to the hosts: any suspect named is a false positive
           ("named", even when the yardstick then clears it; "drained" when not)
  slow     at step 25, `node.sh DIR HOST slow RATE` on rank 2's host; the figures:
           steps and seconds from the fault to the keeper's pause, to the job going on
           at 3 hosts, the yardstick's figures, and whether the host was drained

Healthy and slow runs interleave while both last. Results: stdout and
bench/results/slow-host-<time>.json. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recovery import wait_for
from recovery_slurm import PODIUM, ROOT, Cluster

from podium.cli.fault_demo import read_progress

TRAIN = ("--model gpt --steps 200 --checkpoint-every 20 --step-time 0.05 --global-batch 32 "
         "--epoch-samples 1024 --link-every 10")  # fmt: skip


def burn() -> None:
    while True:
        pass


def steps_at(progress: list[dict[str, Any]], when: float) -> int:
    return max((e["step"] for e in progress if e["event"] == "step" and e["t"] <= when), default=0)


def one_run(cluster: Cluster, kind: str, rate: str) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="run-", dir=cluster.dir))
    work.chmod(0o755)
    progress = work / "p.jsonl"
    job = cluster.run(
        PODIUM, "submit", "--parsable", "--elastic=1:4", "--resize-grace=60",
        f"--checkpoint-dir={work / 'ckpt'}", "-o", str(work / "train.out"), "--wrap",
        f"exec {sys.executable} {ROOT / 'examples' / 'train.py'} {TRAIN} --progress {progress}",
    ).strip()  # fmt: skip
    deadline = time.monotonic() + 600

    def show() -> dict[str, Any]:
        return dict(json.loads(cluster.run(PODIUM, "show", job, "--json")))

    wait_for("4 hosts", lambda: show().get("replicas") == 4, deadline)
    row: dict[str, Any] = {"kind": kind}
    victim = None
    if kind == "slow":
        wait_for("step 25", lambda: steps_at(read_progress(progress), time.time()) >= 25, deadline)
        victim = show()["rank_nodes"][2]
        fault_at = time.time()
        cluster.node_sh(victim, "slow", rate)
    wait_for("the end", lambda: show()["state"] in ("COMPLETED", "FAILED", "CANCELLED"),
             deadline)  # fmt: skip
    record = show()
    log = record.get("resize_log") or []
    row.update(state=record["state"], named=sum("slow links" in e["cause"] for e in log),
               drained=[e.get("drained") for e in log if e.get("drained")])  # fmt: skip
    if kind == "slow" and victim is not None:
        cluster.node_sh(victim, "fast")
        cluster.run(PODIUM, "resume", victim, check=False)
        leave = next((e for e in log if "slow links" in e["cause"]), None)
        if leave is not None:
            events = read_progress(progress)
            row.update(
                steps_to_name=steps_at(events, leave["time"]) - steps_at(events, fault_at),
                seconds_to_name=round(leave["time"] - fault_at, 2),
                seconds_to_go_on=round(leave["done"] - fault_at, 2),
                yardstick=leave.get("yardstick"), right_host=leave.get("drained") == victim,
            )  # fmt: skip
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--healthy", type=int, default=10)
    parser.add_argument("--slow", type=int, default=3)
    parser.add_argument("--load", type=int, default=2, help="busy loops beside the job")
    parser.add_argument("--rate", default="100mbit")
    args = parser.parse_args()
    cluster = Cluster(19900)
    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(args.load)]
    for b in burners:
        b.start()
    rows: list[dict[str, Any]] = []
    try:
        order = [k for i in range(max(args.healthy, args.slow))
                 for k in (["healthy"] if i < args.healthy else [])
                 + (["slow"] if i < args.slow else [])]  # fmt: skip
        for kind in order:
            row = one_run(cluster, kind, args.rate)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        for b in burners:
            b.terminate()
        cluster.down()
    healthy = [r for r in rows if r["kind"] == "healthy"]
    slow = [r for r in rows if r["kind"] == "slow"]
    completed = sum(r["state"] == "COMPLETED" for r in healthy)
    print(f"\nhealthy runs: {len(healthy)}, completed {completed}, "
          f"a host named in {sum(r['named'] > 0 for r in healthy)}, "
          f"drained in {sum(bool(r['drained']) for r in healthy)}")  # fmt: skip
    for key in ("steps_to_name", "seconds_to_name", "seconds_to_go_on"):
        values = sorted(r[key] for r in slow if key in r)
        if values:
            print(f"slow runs, {key}: {values[0]} / {statistics.median(values)} / {values[-1]}")
    print(f"slow runs: right host drained in {sum(r.get('right_host', False) for r in slow)} "
          f"of {len(slow)}")  # fmt: skip
    out = ROOT / "bench" / "results" / f"slow-host-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"args": vars(args), "runs": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
