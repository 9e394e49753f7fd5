"""Recovery in seconds on Slurm (issue 48): the same fault under kill-and-requeue and
under replace-from-a-spare-node, on the four-host Slurm test cluster (each node a host
of its own: its network, UTS and mount namespaces; scripts/slurm-testbed).

    python bench/recovery_slurm.py [--runs 5] [--faults xid kill host] [--steps 300]

Needs root, slurm-wlm and munge (scripts/slurm-testbed/install.sh). The cluster is
rendered and started once (`podium slurm render --hosts`, up.sh) and stopped at the end
(down.sh). Each run submits examples/train.py on 2 nodes, 1 rank each (gloo, 50 ms of
"compute" a step, checkpoints every 20 steps, `--auto-resume=5`):

  requeue  today's default: `srun train.py`, one step over both nodes; the fault ends
           it, and the job is requeued (Slurm's NODE_FAIL, the health hook's requeue,
           or auto-resume's requeue exit code) and starts again from its checkpoint
  spare    `--spares=1`: a third node held; the replica keeper gives the lost rank to
           it, where the warm standby waits, and rank 0 trains on
  cold     the same without a standby (train.py --cold-spare)

At step 50, between two checkpoints (under spare, once the standby said it is ready),
rank 1 is hit:

  xid   an Xid 79 line in its node's kernel log (the health hook, every 3 s, fences it)
  kill  SIGKILL to rank 1's process (found in its host's network namespace)
  host  `node.sh DIR NODE kill`: every process of the host SIGKILLed, its link down

With `--stack torchrun` the job is examples/torchrun_ddp.py (PyTorch's torchrun
tutorial script) under `torchrun --nnodes=2 --max-restarts=3`, rendezvous at
`$MASTER_ADDR:$MASTER_PORT`, a snapshot every epoch of 4 batches, 50 ms a batch; the
fault comes at its 25th batch (rank 1's agent for `kill`), and "next step" is the first
batch logged by a restarted worker (another process). Its policies: `requeue` (`srun
torchrun`, one task per node, no spares) and `spare` (`--spares=1`: the replica keeper
hosts the rendezvous store, and a new agent on the spare node joins TorchElastic's next
round). `kill` under `requeue` is not run: the survivor's agent waits for a second node
until its join timeout (600 s), as TorchElastic does.

Per run: fault -> next training step, steps trained twice, whether rank 0 kept its
process, the job's end. Policies and faults interleave run by run; min/median/max are
printed and written to bench/results/recovery-slurm-<time>.json. Nodes are mended
(link up, slurmd started, resumed) between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recovery import recovered, report, steps_redone, wait_for
from stack_runs import batches, restarted

from podium.cli.fault_demo import read_progress
from podium.cli.inject import xid_line
from podium.node.inventory import declared_bus_id

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts" / "slurm-testbed"
DEFINITION = ROOT / "tests" / "integration" / "slurm_testbed.yaml"
PODIUM = str(Path(sys.executable).parent / "podium")


class Cluster:
    """The test cluster, rendered and started in a temporary directory."""

    def __init__(self, port_base: int, accounting: bool = False, preempt: str = "") -> None:
        """With `accounting`, slurmdbd too (QoS); `preempt`: a PreemptType for
        slurm.conf in place of the rendered one (e.g. preempt/qos)."""
        self.dir = Path(tempfile.mkdtemp(prefix="podium-bench-slurm-"))
        self.dir.chmod(0o755)
        self.port_base = port_base
        subprocess.run(
            [PODIUM, "slurm", "render", str(DEFINITION), "--testbed", str(self.dir),
             "--port-base", str(port_base), "--hosts"],
            check=True, capture_output=True,
        )  # fmt: skip
        conf = self.dir / "etc" / "slurm.conf"
        # The figures in docs/benchmarks.md were taken with the health hook every 3 s;
        # the test clusters run it every 10 s (their suite shares 2 cores four ways).
        text = conf.read_text().replace("HealthCheckInterval=10", "HealthCheckInterval=3")
        if preempt:
            text = text.replace("PreemptType=preempt/partition_prio", f"PreemptType={preempt}")
        conf.write_text(text)
        subprocess.run(["bash", str(SCRIPTS / "up.sh"), str(self.dir),
                        *(["--accounting"] if accounting else [])], check=True,
                       capture_output=True)  # fmt: skip
        self.env = dict(os.environ)
        self.env.pop("SLURM_JWT", None)
        self.env.update(
            PODIUM_CONFIG=str(self.dir / "etc" / "podium.yaml"),
            SLURM_CONF=str(self.dir / "etc" / "slurm.conf"),
            PODIUM_HOME=str(self.dir / "home"),
            PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        )
        self.nodes = [f"debug-st-g-{i}" for i in range(1, 5)]

    def run(self, *argv: str, check: bool = True) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
        return done.stdout

    def node_sh(self, node: str, action: str, *more: str) -> None:
        self.run("bash", str(SCRIPTS / "node.sh"), str(self.dir), node, action, *more,
                 check=False)  # fmt: skip

    def state(self, node: str) -> str:
        return self.run("sinfo", "-h", "-n", node, "-o", "%T").strip()

    def mend(self) -> None:
        """Every node back in service: its link up, its slurmd running, resumed."""
        for node in self.nodes:
            if self.state(node) in ("idle", "mixed", "allocated"):
                continue
            self.node_sh(node, "join")
            self.node_sh(node, "start")
            self.run("scontrol", "update", f"nodename={node}", "state=resume", check=False)
        wait_for("every node idle", lambda: all(self.state(n) == "idle" for n in self.nodes),
                 time.monotonic() + 120)  # fmt: skip

    def end(self, job_id: str) -> None:
        """Cancel the job, wait until it is gone, and mend the nodes for the next run."""
        self.run("scancel", job_id, check=False)
        wait_for("the job gone", lambda: not self.run("squeue", "-h", "-j", job_id).strip(),
                 time.monotonic() + 60)  # fmt: skip
        self.mend()

    def rank_pid(self, node: str) -> int | None:
        """The pid of the training process on `node` (in its network namespace)."""
        return self.process(node, b"train.py")

    def xid(self, node: str) -> None:
        """An Xid 79 for `node`'s first GPU in its kernel log (the health hook fences it)."""
        home = self.dir / "shared" / "podium" / "nodes" / node
        with open(self.dir / "nodes" / node / "kern.log", "a") as fh:
            bus = declared_bus_id(0, str(home))
            fh.write(xid_line(bus, 79, time.clock_gettime(time.CLOCK_BOOTTIME)))

    def process(self, node: str, name: bytes) -> int | None:
        """A process on `node` whose command (its first two words) ends with `name`."""
        index = self.nodes.index(node) + 1
        pids = self.run("ip", "netns", "pids", f"pdm{self.port_base}-{index}", check=False)
        for pid in pids.split():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(a.endswith(name) for a in argv[:2]):
                return int(pid)
        return None

    def down(self) -> None:
        subprocess.run(["bash", str(SCRIPTS / "down.sh"), str(self.dir)], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def one_run(
    cluster: Cluster, policy: str, fault: str, steps: int, timeout: float
) -> dict[str, Any]:
    """One job, one fault on rank 1 at step 50; the figures of its recovery."""
    work = Path(tempfile.mkdtemp(prefix="run-", dir=cluster.dir))
    work.chmod(0o755)
    progress = work / "p.jsonl"
    train = (f"{sys.executable} {ROOT / 'examples' / 'train.py'} --model gpt --steps {steps} "
             f"--checkpoint-every 20 --step-time 0.05 --progress {progress}")  # fmt: skip
    options = ["-N", "2", "--ntasks-per-node=1", "--auto-resume=5", "--requeue-exit=1,137",
               "-o", str(work / "train.out"), f"--checkpoint-dir={work / 'ckpt'}"]  # fmt: skip
    if policy == "requeue":
        command = f"exec srun {train}"
    else:
        options.append("--spares=1")
        command = f"exec {train}" + (" --cold-spare" if policy == "cold" else "")
    out = cluster.run(PODIUM, "submit", *options, "--wrap", command)
    job_id = "".join(c for c in out if c.isdigit())
    deadline = time.monotonic() + timeout

    def reached() -> int:
        return max((e["step"] for e in read_progress(progress) if e["event"] == "step"),
                   default=0)  # fmt: skip

    try:
        wait_for("step 50", lambda: reached() >= 50, deadline)
        if policy == "spare":
            log = work / "train.out"
            wait_for("the warm standby", lambda: "warm standby ready" in log.read_text(), deadline)
        nodes = cluster.run("squeue", "-h", "-j", job_id, "-o", "%N").strip()
        hosts = cluster.run("scontrol", "show", "hostnames", nodes).split()
        victim = hosts[1]
        rank0 = cluster.rank_pid(hosts[0])
        before = reached()
        fault_at = time.time()
        if fault == "xid":
            cluster.xid(victim)
        elif fault == "kill":
            pid = cluster.rank_pid(victim)
            assert pid is not None, "no rank on " + victim
            os.kill(pid, 9)
        else:
            cluster.node_sh(victim, "kill")
        went_on, first = wait_for("the next step", lambda: recovered(progress, fault_at), deadline)
        rank0_after = cluster.rank_pid(hosts[0])
        wait_for("the end", lambda: not cluster.run("squeue", "-h", "-j", job_id).strip(),
                 deadline)  # fmt: skip
        acct = cluster.run("sacct", "-c", "-n", "-j", job_id, "-o", "state", check=False).split()
        return {
            "policy": policy,
            "fault": fault,
            "fault_to_step_s": round(first["t"] - fault_at, 3),
            "steps_redone": steps_redone(read_progress(progress), before, went_on),
            "rank0_kept": rank0 is not None and rank0 == rank0_after,
            "went_on": went_on["event"],
            "state": acct[-1] if acct else "?",
        }
    finally:
        cluster.end(job_id)


def torchrun_run(cluster: Cluster, policy: str, fault: str, timeout: float) -> dict[str, Any]:
    """One torchrun job, one fault on rank 1 at its 25th batch (see the docstring)."""
    work = Path(tempfile.mkdtemp(prefix="run-", dir=cluster.dir))
    work.chmod(0o755)
    progress = work / "p.jsonl"
    run = ("torchrun --nnodes=2 --nproc-per-node=1 --max-restarts=3 --rdzv-backend=c10d "
           "--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT --rdzv-id=$SLURM_JOB_ID "
           f"{ROOT / 'examples' / 'torchrun_ddp.py'} 40 1 --snapshot-path {work / 's.pt'} "
           f"--progress {progress} --step-time 0.05")  # fmt: skip
    options = ["-N", "2", "--ntasks-per-node=1", "--auto-resume=5", "-o", str(work / "out")]
    if policy == "spare":
        options.append("--spares=1")
    # without spares the script finds the first node itself, as Slurm users' scripts do
    first = 'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1); '
    command = f"exec {run}" if policy == "spare" else f"{first}exec srun {run}"
    job_id = "".join(c for c in cluster.run(PODIUM, "submit", *options, "--wrap", command)
                     if c.isdigit())  # fmt: skip
    deadline = time.monotonic() + timeout
    row: dict[str, Any] = {"policy": policy, "fault": fault, "stack": "torchrun"}
    try:
        try:
            wait_for("batch 25", lambda: len(batches(progress)) >= 25, deadline)
        except TimeoutError as late:  # a run that did not start is a result too
            tail = (work / "out").read_text()[-1500:] if (work / "out").exists() else ""
            return {**row, "fault_to_step_s": None, "error": f"{late}: {tail}"}
        nodes = cluster.run("squeue", "-h", "-j", job_id, "-o", "%N").strip()
        victim = cluster.run("scontrol", "show", "hostnames", nodes).split()[1]
        fault_at = time.time()
        if fault == "xid":
            cluster.xid(victim)
        elif fault == "kill":
            pid = cluster.process(victim, b"torchrun")
            assert pid is not None, "no torchrun agent on " + victim
            os.kill(pid, 9)
        else:
            cluster.node_sh(victim, "kill")
        try:
            first = wait_for("the next step", lambda: restarted(progress, fault_at), deadline)
        except TimeoutError as late:  # a run that did not recover is a result too
            return {**row, "fault_to_step_s": None, "error": str(late)}
        wait_for("the end", lambda: not cluster.run("squeue", "-h", "-j", job_id).strip(),
                 deadline)  # fmt: skip
        lines = batches(progress)
        last_before = max(e["at"] for e in lines if e["t"] < first["t"])
        acct = cluster.run("sacct", "-c", "-n", "-j", job_id, "-o", "state", check=False).split()
        return {
            **row,
            "fault_to_step_s": round(first["t"] - fault_at, 3),
            "steps_redone": max(0, last_before - first["at"] + 1),
            "rank0_kept": False,  # TorchElastic restarts every worker
            "state": acct[-1] if acct else "?",
        }
    finally:
        cluster.end(job_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--faults", nargs="+", default=["xid", "kill", "host"],
                        choices=["xid", "kill", "host"])  # fmt: skip
    parser.add_argument("--policies", nargs="+", default=["requeue", "spare"],
                        choices=["requeue", "cold", "spare"])  # fmt: skip
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--port-base", type=int, default=19300)
    parser.add_argument("--stack", choices=["train", "torchrun"], default="train",
                        help="examples/train.py (Podium's contract), or torchrun")  # fmt: skip
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the cluster is stopped still
    cluster = Cluster(args.port_base)
    results = []
    try:
        for i in range(args.runs):
            for fault in args.faults:
                for policy in args.policies:
                    if args.stack == "torchrun":
                        if policy == "cold" or (policy, fault) == ("requeue", "kill"):
                            continue  # no standby to go without; see the docstring
                        result = torchrun_run(cluster, policy, fault, args.timeout)
                    else:
                        result = one_run(cluster, policy, fault, args.steps, args.timeout)
                    results.append(result)
                    print(f"run {i + 1} {fault:4} {policy:7}: {json.dumps(result)}", flush=True)
    finally:
        cluster.down()
    report(results, args, "recovery-slurm" if args.stack == "train" else "recovery-slurm-torchrun")


if __name__ == "__main__":
    main()
