"""Ten faults in a row on one job (issue 63): kills, Xids, hangs and an Xid on the
spare's own GPU, one at a time, on examples/train.py with two replicas and a spare.
Each is replaced from the refilled spare while the survivors keep training; the job
completes in its one run. Throughout, a watcher compares what the daemon says each GPU
is held by with what the job's processes were given (their CUDA_VISIBLE_DEVICES in
/proc): no GPU is ever both given back and in use."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.test_replace import (
    progress,
    standbys_ready,
    submit_training,
    task_pids,
    ten_steps,
)
from tests.polling import poll

pytestmark = pytest.mark.integration

# (kind, whom): a rank by number, or "spare" for the spare's own GPU. Xids fence their
# GPU for good: four of them on 8 GPUs leave the two ranks, the spare and one more.
FAULTS = (
    ("kill", "1"), ("xid", "0"), ("hang", "1"), ("xid", "spare"), ("kill", "0"),
    ("xid", "1"), ("kill", "1"), ("hang", "0"), ("kill", "0"), ("xid", "0"),
)  # fmt: skip


def gpus_of_processes(
    c: Cluster, job: int, said: dict[int, str] | None = None
) -> dict[int, set[int]]:
    """Each live process of `job` of cluster `c` that was given GPUs: the GPUs, from its
    environment in /proc (with `said`, also what it is: its rank or standby, its state,
    its parent and its command). A job is known by its replace notice, in its cluster's
    state directory: job ids repeat across the clusters of tests running beside this
    one (a watcher that went by PODIUM_JOB_ID alone once took another cluster's
    standby on its GPU 3 for this job's)."""
    jobs = os.path.realpath(c.home / "jobs")  # a link to the run directory (a tmpfs)
    notice = os.path.join(jobs, str(job), "replace").encode()
    found: dict[int, set[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone, or not ours to read
        if state == "Z":
            continue  # ended: it uses nothing
        env = dict(v.split(b"=", 1) for v in raw.split(b"\0") if b"=" in v)
        if env.get(b"PODIUM_REPLACE_FILE") != notice or not env.get(b"CUDA_VISIBLE_DEVICES"):
            continue
        found[int(entry.name)] = {int(g) for g in env[b"CUDA_VISIBLE_DEVICES"].split(b",")}
        if said is not None:
            who = {k: env.get(k.encode(), b"").decode() for k in ("RANK", "PODIUM_STANDBY")}
            ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")[:60].decode()
            said[int(entry.name)] = f"{who} state {state} ppid {ppid} {cmd!r} at {time.time():.2f}"
    return found


def held_by(c: Cluster, job: int) -> set[int]:
    """The GPUs the daemon says `job` holds, from its nodes' view."""
    with c.api() as api:
        nodes = api.get("/v1/nodes").json()["nodes"]
    return {g["index"] for n in nodes for g in n["gpus"] if g.get("job_id") == job}


class Watcher(threading.Thread):
    """Compare the daemon's view with /proc until stopped: a GPU some live process of
    the job uses that the daemon said, just before and just after, the job did not hold
    is a violation."""

    def __init__(self, c: Cluster, job: int) -> None:
        super().__init__(daemon=True)
        self.c, self.job = c, job
        self.stop = threading.Event()
        self.looks = 0
        self.violations: list[str] = []
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                before = held_by(self.c, self.job)
                said: dict[int, str] = {}
                used = gpus_of_processes(self.c, self.job, said)
                after = held_by(self.c, self.job)
            except Exception as failed:  # the daemon busy: look again (and say so at the end)
                self.errors.append(repr(failed))
                continue
            alive = {pid: gpus for pid, gpus in used.items() if Path(f"/proc/{pid}").exists()}
            for pid, gpus in alive.items():
                if gpus - before - after:
                    gave = f"the daemon gave the job {sorted(before)}, then {sorted(after)}"
                    self.violations.append(f"pid {pid} ({said.get(pid)}) uses GPUs "
                                           f"{sorted(gpus)}; {gave}")  # fmt: skip
            self.looks += 1


def rank_gpus(c: Cluster, job: int) -> dict[str, set[int]]:
    """Each rank's GPUs, from its process's environment."""
    used = gpus_of_processes(c, job)
    return {rank: used.get(pid, set()) for rank, pid in task_pids(c, job).items()}


def next_step_after(c: Cluster, since: float) -> float | None:
    """When rank 0 logged its first step after `since` (None: not yet)."""
    return min((e["t"] for e in progress(c) if e["event"] == "step" and e["t"] > since),
               default=None)  # fmt: skip


def inject(c: Cluster, job: int, kind: str, whom: str) -> int | None:
    """Inject fault `kind` on rank `whom` (or the spare's GPU); the GPU an Xid hit."""
    if kind != "xid":
        c.cli("inject", kind, str(job), "--rank", whom, check=True)
        return None
    ranks = rank_gpus(c, job)
    if whom == "spare":
        [gpu] = set(c.job(job)["gpu_ids"]) - set().union(*ranks.values())
    else:
        [gpu] = ranks[whom]
    c.cli("inject", "xid", "--gpu", str(gpu), "--code", "79", check=True)
    return gpu


def test_ten_faults_of_mixed_kinds_are_each_replaced_and_no_gpu_is_held_twice() -> None:
    """Fault to next step: from the fault to rank 0's first step after the replacement.
    A hung rank is named by its step at half the heartbeat timeout (8 s here), which
    counts from the last heartbeat, not the start (podium.run.hang_watch): PyTorch
    processes starting beside other workers' jobs took over 40 s to a first step."""
    c = make_cluster(gpus=8, cpus=12)
    c.start()
    watcher: Watcher | None = None
    try:
        job = submit_training(c, "--auto-resume=10", "--heartbeat-timeout=16",
                              train="--steps 900 --step-time 0.05")  # fmt: skip
        ten_steps(c, job)
        watcher = Watcher(c, job)
        watcher.start()
        recoveries: list[float] = []
        for number, (kind, whom) in enumerate(FAULTS, 1):
            poll(lambda: standbys_ready(c, job), lambda n, k=number: n >= k,
                 f"the standby before fault {number}", 120)  # fmt: skip
            told = len(c.job(job)["replacements"])
            at = time.time()
            gpu = inject(c, job, kind, whom)
            if whom == "spare":  # no rank failed: the spare is dropped and refilled
                poll(lambda: set(c.job(job)["gpu_ids"]), lambda held, g=gpu: g not in held
                     and len(held) == 3, "the spare refilled", 60)  # fmt: skip
                continue
            what = f"the replacement after fault {number} ({kind} rank {whom})"
            replaced = poll(lambda: c.job(job)["replacements"], lambda r, n=told: len(r) > n,
                            what, 60)[-1]  # fmt: skip
            since = max(at, float(replaced["time"]))
            step = poll(lambda s=since: next_step_after(c, s), lambda t: t is not None,
                        f"a step after fault {number}", 60)  # fmt: skip
            assert step is not None
            recoveries.append(step - at)
        final = c.wait(job, timeout=600)
        watcher.stop.set()
        watcher.join()
        shown = c.job(job)
        assert (final["state"], final["restart_count"]) == ("COMPLETED", 0), shown["events"]
        told = shown["replacements"]
        assert len(told) == 9 and all(r["warm"] for r in told), told
        said = {  # why each was replaced, in the order of the faults on ranks
            "kill": "rank {} killed by signal 9", "xid": "health: Xid 79 on GPU",
            "hang": "hang: rank {} stopped at step",  # named by its step, before the timeout
        }  # fmt: skip
        on_ranks = [(k, w) for k, w in FAULTS if w != "spare"]
        for (kind, whom), r in zip(on_ranks, told, strict=True):
            assert r["reason"].startswith(said[kind].format(whom)), (kind, whom, r["reason"])
            assert r["replaced"] == [int(whom)], (kind, whom, r)
        assert not shown["lost_gpu_seconds"], shown["lost_gpu_seconds"]
        assert not watcher.violations, (len(watcher.violations), watcher.violations[:3],
                                        watcher.violations[-1], shown["events"])  # fmt: skip
        assert watcher.looks > 50, (watcher.looks, watcher.errors[-3:])
        steps = [e["step"] for e in progress(c) if e["event"] == "step"]
        assert len(steps) == len(set(steps)), "a step trained twice"
        figures = os.environ.get("PODIUM_SOAK_FIGURES")  # docs/resiliency.md's soak table
        if figures:
            Path(figures).write_text(json.dumps({
                "fault_to_next_step_s": recoveries, "faults": [f"{k} {w}" for k, w in FAULTS],
                "looks": watcher.looks,
            }))  # fmt: skip
    finally:
        if watcher is not None:
            watcher.stop.set()
        teardown_cluster(c)
