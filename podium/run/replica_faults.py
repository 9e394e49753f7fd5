"""The supervisor's half of replace, don't restart (podium.run.replace): which faults
are one replica's, and how that replica is given a spare's place while the others run.

A mixin of podium.run.supervisor.Supervisor, apart so each stays one job's size.
Standard library only (the supervisor imports it at every job start).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.run.containment import carrying, descendants, kill_and_wait
from podium.run.files import FAULT_FILE, TASKS_FILE, read_json, write_atomic
from podium.run.job_files import TaskFiles
from podium.run.ports import free_port
from podium.run.replace import WAKE_SIGNAL, Spares
from podium.run.spawn import SpawnError, spawn_task
from podium.run.task_env import job_identity, task_environment
from podium.run.torchelastic import store_argv, store_interpreter, wait_listening
from podium.run.torchft import LIGHTHOUSE, lighthouse_argv, lighthouse_binary

INSTANCE_ENV = "PODIUM_TASK_INSTANCE"  # which start of a task a process descends from

if TYPE_CHECKING:
    from podium.run.containment import JobContainment
    from podium.run.plan import LaunchPlan, TaskPlan


class ReplicaFaults:
    """Replace one failed replica from a spare; the Supervisor provides the fields."""

    job_dir: Path
    plan: LaunchPlan
    tasks: dict[int, TaskPlan]
    status: dict[int, tuple[int | None, int | None]]
    contain: JobContainment
    pgid: int
    spares: Spares | None
    heartbeat: Path | None
    ranks: Path | None
    master_port: int
    lighthouse: str
    instances: dict[int, int]
    _how: tuple[Any, ...]

    @property
    def limit_end(self) -> float | None:
        raise NotImplementedError  # the Supervisor's

    def _spawn(self, task: TaskPlan, port: int, extra: dict[str, str], append: bool) -> int:
        raise NotImplementedError  # the Supervisor's

    def host_rendezvous_store(self, port: int) -> None:
        """A TorchElastic job's c10d store at MASTER_ADDR:`port`, in a process of the
        job's own (its user, cgroups; a process group of its own, so the job's
        signals to its replicas never reach it), listening before any agent starts
        (podium.run.torchelastic). Where it cannot start (no torch on the job's PATH),
        the first agent hosts the store, as without Podium; the log says why."""
        env = task_environment(self.plan, self.plan.tasks[0], port, None, time.time())
        with job_identity(self.plan).entered():  # the user's PATH, looked at as the user
            python = store_interpreter(env.get("PATH", ""))
        if python is None:
            why = "no python3 or torchrun on the job's PATH"
        else:
            why = self._host(store_argv(python, "127.0.0.1", port), env, port)
            if not why:
                return
            why += " (is torch installed there?)"
        job = self.plan.job_id
        print(f"job {job}: rendezvous store not hosted: {why}; the first agent hosts it",
              file=sys.stderr)  # fmt: skip

    def host_lighthouse(self) -> str:
        """A torchft job's lighthouse (podium.run.torchft), on loopback at a port of its
        own, in a process of the job's own, listening before any replica group starts:
        its URL, or "" where it cannot start (no torchft on the job's PATH; the log
        says why, and the groups find the lighthouse the job's environment names)."""
        port = free_port()
        env = task_environment(self.plan, self.plan.tasks[0], port, None, time.time())
        with job_identity(self.plan).entered():
            binary = lighthouse_binary(env.get("PATH", ""))
        if binary is None:
            why = f"no {LIGHTHOUSE} on the job's PATH (is torchft installed there?)"
        else:
            why = self._host(lighthouse_argv(binary, port), env, port)
            if not why:
                return f"http://127.0.0.1:{port}"
        print(f"job {self.plan.job_id}: torchft lighthouse not run: {why}", file=sys.stderr)
        return ""

    def _host(self, argv: list[str], env: dict[str, str], port: int) -> str:
        """Start `argv`, a server of the job's, as the job's first task would run (its
        user, cgroups, umask, time limit) but in a process group of its own, and wait
        until it listens on loopback at `port`: "" then, else why it does not."""
        files = TaskFiles(stdin=None, stdout=os.devnull, stderr=None, append=True)
        try:
            pid = spawn_task(
                argv, env, self.plan.work_dir, files=files, end=self.limit_end, pgid=0,
                creds=self._how[0], cgroup_procs=self.contain.procs_files,
                umask=self.plan.umask,
            )  # fmt: skip
        except SpawnError as exc:
            return str(exc)
        if wait_listening("127.0.0.1", port, pid):
            return ""
        kill_and_wait({pid})
        return f"{argv[0]} did not listen on port {port}"

    def start_standbys(self) -> None:
        """Start the warm standbys the job asked for (`ready standby`): its command on
        each spare's GPUs, as task WORLD + index, with PODIUM_STANDBY=index."""
        if self.spares is None:
            return
        world = len(self.plan.tasks)
        for index, gpus in self.spares.standbys_due():
            task = self.plan.tasks[0]._replace(
                procid=world + index, localid=world + index, gpu_ids=gpus
            )
            extra = {"PODIUM_STANDBY": str(index), "MASTER_PORT": ""}
            with contextlib.suppress(SpawnError):
                self.spares.standby[index] = self._spawn(task, 0, extra, True)

    def replace_casualty(self) -> bool:
        """A replica ended by a signal or a failing exit code while others run: give
        its place to a spare. False when none was replaced (then the job runs on, or
        ends, as it would have without spares)."""
        if self.spares is None or not self.spares.can_replace():
            return False
        if all(pid in self.status for pid in self.tasks):
            return False  # nobody is left to go on with
        for pid, (code, sig) in list(self.status.items()):
            if pid not in self.tasks or (sig is None and not code):
                continue
            rank = self.tasks[pid].procid
            how = f"killed by signal {sig}" if sig is not None else f"exited with code {code}"
            return self.replace(pid, f"rank {rank} {how}")
        return False

    def replace_on_fault(self) -> bool:
        """The daemon's fault order (SIGUSR2, FAULT_FILE) when it may be one replica's:
        True when it was (that replica replaced, or a spare's GPU dropped, or a GPU
        already given up on); False: the whole job stops, as without spares."""
        order = read_json(self.job_dir / FAULT_FILE)
        if self.spares is None or not order or not order.get("replace"):
            return False
        gpu = order.get("gpu")
        if not isinstance(gpu, int):
            return False  # the node, not one GPU
        if gpu in self.spares.fenced or self.spares.drop_spare_on(gpu):
            return True
        for pid, task in self.tasks.items():
            if gpu in task.gpu_ids and pid not in self.status:
                if not self.spares.can_replace():
                    return False
                return self.replace(pid, str(order.get("reason") or f"fault on GPU {gpu}"))
        return False

    def replace_hung(self, why: str, ranks: list[int]) -> bool:
        """The hang (`why`) named one rank, stopped behind the others
        (podium.run.rank_beats): replace it."""
        if self.spares is None or self.ranks is None or len(ranks) != 1:
            return False
        if not self.spares.can_replace():
            return False
        rank = ranks[0]
        pid = next((p for p, t in self.tasks.items() if t.procid == rank), None)
        if pid is None or pid in self.status:
            return False
        if all(p in self.status for p in self.tasks if p != pid):
            return False  # no peer left to heal a newcomer (they ended: see peers_done)
        with contextlib.suppress(OSError):
            os.unlink(self.ranks / str(rank))  # its old step no longer speaks for the rank
        return self.replace(pid, f"hang: {why}")

    def peers_done(self, ranks: list[int]) -> bool:
        """Whether every rank but `ranks` has ended with exit code 0 (and one has): a
        rank hung after the others finished (issue 63, item 4) hangs in its teardown,
        after the training: stopping it is not a fault to requeue for."""
        others = [p for p, t in self.tasks.items() if t.procid not in ranks]
        return bool(others) and all(self.status.get(p) == (0, None) for p in others)

    def replace(self, pid: int, reason: str) -> bool:
        """Kill what is left of the replica `pid` and wait until it is gone (up to 2 s:
        the record the daemon reads to give its GPUs back is written after), tell the
        survivors (the notice and SIGURG), and start the same rank on the next spare's
        GPUs. False when the replacement could not be started (the job is then stopped
        whole)."""
        assert self.spares is not None
        task = self.tasks.pop(pid)
        self.status.pop(pid, None)
        # its GPUs are given back once it is gone: its children too, those orphaned by
        # its end among them (a killed torchrun agent's workers train on)
        orphans = carrying(self.contain.members(), INSTANCE_ENV, str(self.instances.pop(pid, 0)))
        kill_and_wait({pid, *descendants(pid), *orphans})
        index, gpus, standby = self.spares.take()
        self.spares.fenced.update(task.gpu_ids)
        torchelastic = self.spares.torchelastic  # TorchElastic's rendezvous brings it in
        port = self.master_port if torchelastic else free_port()
        survivors = sorted(t.procid for p, t in self.tasks.items() if p not in self.status)
        told = self.spares.announce(
            {
                "master_addr": "127.0.0.1",
                "master_port": port,
                "world": len(self.plan.tasks),
                "replaced": [task.procid],
                "survivors": survivors,
                "reason": reason,
                "gpus_from": list(task.gpu_ids),
                "gpus_to": gpus,
                "spare": index,
                "warm": bool(standby),
            }
        )
        if not self.spares.self_joining:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, WAKE_SIGNAL)
        if self.heartbeat is not None:  # the survivors wait for the newcomer: not a hang
            with contextlib.suppress(OSError):
                os.utime(self.heartbeat)
        new = task._replace(gpu_ids=gpus)
        extra = {"PODIUM_REPLACE_GENERATION": str(told["generation"]), "PODIUM_REPLACEMENT": "1"}
        try:  # the warm standby takes the rank from the notice; else a cold start
            new_pid = standby or self._spawn(new, port, extra, True)
        except SpawnError:
            return False
        self.tasks[new_pid] = new
        pids = {str(t.procid): p for p, t in self.tasks.items()}
        write_atomic(self.job_dir / TASKS_FILE, pids, durable=False)
        return True


__all__ = ["ReplicaFaults"]
