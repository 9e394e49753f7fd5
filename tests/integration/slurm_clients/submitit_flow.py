"""submitit against Podium's Slurm commands: run by tests/integration/test_slurm_clients.py
in the clients' virtual environment, in a scratch directory; prints one JSON object.
It waits in loops of its own: the clients' environment cannot import tests/polling.py."""

from __future__ import annotations

import json
import signal
import sys
import time

import submitit


def double(x: int) -> int:
    return 2 * x


def fail() -> None:
    raise ValueError("raised in the job")


def rank() -> tuple[int, int]:
    env = submitit.JobEnvironment()
    return env.global_rank, env.num_tasks


def stubborn() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(120)


class Counter(submitit.helpers.Checkpointable):
    """Counts to `target` a second a step; checkpointed, it resumes where it was."""

    def __init__(self) -> None:
        self.done = 0
        self.runs = 0

    def __call__(self, target: int) -> tuple[int, int]:
        self.runs += 1
        while self.done < target:
            time.sleep(1)
            self.done += 1
        return self.done, self.runs


def executor(folder: str, **params: object) -> submitit.AutoExecutor:
    ex = submitit.AutoExecutor(folder=folder)
    ex.update_parameters(slurm_partition="main", **params)
    return ex


def main() -> None:
    out: dict[str, object] = {}
    ex = executor("logs/%j", timeout_min=5)
    out["cluster"] = ex.cluster
    # folder="logs/%j": the directory is made after sbatch printed the id
    jobs = [ex.submit(double, i) for i in range(3)]
    out["results"] = [j.result() for j in jobs]
    out["array"] = [j.result() for j in ex.map_array(double, range(4))]
    failing = ex.submit(fail)
    failing.wait()
    out["exception"] = str(failing.exception())
    multi = executor("logs/%j", timeout_min=5, tasks_per_node=2)
    out["ranks"] = sorted(multi.submit(rank).results())
    # several jobs watched together: one sacct for all, each state right
    watched = [ex.submit(time.sleep, 1) for _ in range(3)]
    for j in watched:
        j.wait()
    # wait() returns once a job's result file is written, before its process has
    # exited: each look is one sacct for all three, until they have ended (60 s at most)
    deadline = time.monotonic() + 60
    while True:
        watched[0].watcher.update()
        out["watched"] = [j.state for j in watched]
        if set(out["watched"]) == {"COMPLETED"} or time.monotonic() > deadline:
            break
        time.sleep(1)
    # cancel, then the state at once (the job ignores SIGTERM)
    held = ex.submit(stubborn)
    while held.state in ("PENDING", "UNKNOWN", "READY") or not held.paths.stdout.exists():
        time.sleep(0.2)
    time.sleep(1)  # submitit's job is in Python by now, ignoring SIGTERM (nothing to poll)
    held.cancel()
    held.watcher.update()
    out["cancelled"] = held.state
    # timeout: SIGUSR2 at 10 s of each run, checkpoint, `scontrol requeue`, resume. Each
    # run's Python start counts in its 10 s; submitit gives up after 3 timeouts, so the
    # 12 steps fit while a start takes under 7 s (a loaded machine took over 2 s)
    timed = executor("logs/%j", timeout_min=1, slurm_signal_delay_s=50).submit(Counter(), 12)
    out["timeout"] = list(timed.result())
    # job._interrupt(): `scancel --signal SIGTERM` then `--signal USR2`: preempted, resumed
    preempted = executor("logs/%j", timeout_min=30).submit(Counter(), 6)
    while not preempted.paths.stdout.exists():
        time.sleep(0.2)
    time.sleep(3)  # some steps done, so that resuming them shows (the result says which)
    preempted._interrupt()
    out["interrupt"] = list(preempted.result())
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
