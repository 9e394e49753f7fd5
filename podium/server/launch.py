"""Launch planning: from a starting job, its spec and its Grant to the LaunchPlan
its supervisor runs, with the files, identity, limits and environment it needs.

The only side effect is creating the job's default checkpoint directory (owned by
the job's user); the plan itself is data (what `podium submit --dry-run` prints).
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from podium.config.cluster import ClusterConfig
from podium.jobspec.job import JobSpec
from podium.node.mps import MpsServers, Share
from podium.run.containers.lifecycle import IMPORT_ENV
from podium.run.containers.nvidia import driver_files
from podium.run.identity import Identity
from podium.run.patterns import expand
from podium.run.plan import Grant, LaunchPlan, TaskPlan
from podium.run.task_env import CUDA_NAMES, SLICE_PER_TASK
from podium.run.torchelastic import launches_torchelastic
from podium.server.local_node import LocalNode
from podium.server.slurm_env import job_variables, without_inherited
from podium.server.starting import StartingJob
from podium.store.db import Row

# Slurm's commands for jobs (podium/slurm_commands/bin): a path, not an import (it ranks above).
log = logging.getLogger("podium.launch")
COMPAT_BIN = str(Path(__file__).resolve().parents[1] / "slurm_commands" / "bin")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


class ForeignDirectory(Exception):
    """A job's directory exists and is not the job user's own: it is never adopted."""


def own_checkpoint_dir(path: Path, uid: int, gid: int) -> None:
    """Make the job's checkpoint directory `path` (mode 0700 after the umask, given to
    uid:gid), or keep it when it is already a directory of that user's (the job's own
    earlier run: a requeue, auto-resume). Raises ForeignDirectory, touching nothing,
    when it exists as anything else: another user's checkpoints are never handed over."""
    try:
        path.mkdir(parents=True)
    except FileExistsError:
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            raise ForeignDirectory(
                f"its checkpoint directory {path} already exists and is not its user's "
                f"(owner uid {info.st_uid}): move it away; Podium never hands one job's "
                "checkpoints to another"
            ) from None
        return
    if os.geteuid() == 0:
        os.chown(path, uid, gid)


class Planner:
    """Plans starts on `node` for jobs stored under `home`."""

    def __init__(self, home: Path, config: ClusterConfig, node: LocalNode) -> None:
        self.home = home
        self.config = config
        self.node = node
        self.owner_uid = os.geteuid()
        self._driver_files: list[str] | None = None  # this host's, looked up on first use
        self.mps = MpsServers(home)

    def identity(self, uid: int, gid: int, user: str, umask: int) -> Identity:
        """The identity a job of this user runs with. A daemon that is not root runs
        everything as itself (it serves only its owner)."""
        if self.owner_uid != 0:
            return Identity(self.owner_uid, os.getegid(), tuple(os.getgroups()), umask)
        return Identity.of(uid, gid, user, umask)

    def output_path(self, job: StartingJob, spec: JobSpec, pattern: str) -> str:
        """An output pattern expanded for this job (%t is left for the supervisor)."""
        expanded = expand(
            pattern,
            job_id=job.job_id,
            name=job.name,
            user=job.user,
            node=self.node.name,
            array_job_id=job.array_job_id,
            array_task_id=job.array_task_id,
        )
        return os.path.join(spec.work_dir, expanded)

    def checkpoint_dir(self, job_id: int, spec: JobSpec) -> str:
        """The job's PODIUM_CHECKPOINT_DIR: --checkpoint-dir, else one per job id."""
        return spec.checkpoint_dir or str(self.home / "checkpoints" / str(job_id))

    def free_cpu_ids(self, running: Iterable[Row]) -> list[int]:
        """The node's CPU ids none of these running jobs holds (empty when CPUs are
        only counted)."""
        if self.node.cpu_ids is None:
            return []
        held: set[int] = set()
        for r in running:
            held.update(json.loads(r["cpu_ids"] or "[]"))
        return [c for c in self.node.cpu_ids if c not in held]

    def environment(self, job: StartingJob, spec: JobSpec, grant: Grant) -> dict[str, str]:
        """The job's base environment: what it exported (less another job's Slurm
        variables), Slurm's variables for this job, and Slurm's commands first on the
        PATH, talking to this cluster (`podium.slurm_commands`)."""
        env = without_inherited(spec.environment)
        env.update(job_variables(job, spec, self.node.name, grant, self.config.cluster_name))
        env["PATH"] = f"{COMPAT_BIN}:{env.get('PATH') or DEFAULT_PATH}"
        env.pop(CUDA_NAMES, None)  # another job's (plan sets the job's own)
        env.pop(SLICE_PER_TASK, None)
        env["PODIUM_PYTHON"] = sys.executable
        env["PODIUM_HOME"] = str(self.home)
        return env

    def mps_share(
        self, held: tuple[int, ...], spec: JobSpec, uid: int, gid: int, start: bool
    ) -> dict[str, str]:
        """The MPS variables of a job holding MPS units (none otherwise); with `start`,
        its GPU's MPS control daemon is started for the user if it does not run
        (podium.node.mps). A start that cannot happen is logged with the reason: the
        job then shares the GPU without MPS, as CUDA does when no server answers."""
        units = [d for d in self.node.devices if d.index in set(held) and d.kind == "mps"]
        if not units:
            return {}
        gpu = next(g for g in self.node.gpus if g.index == units[0].physical)
        mode = self.config.node.gpus.sharing.get(gpu.index)
        share = Share(gpu.index, gpu.uuid, gpu.memory_mb, len(units), mode.units if mode else 100)
        asked = spec.mem_request
        per_gpu = asked[1] if asked and asked[0] == "mem-per-gpu" else None
        env = self.mps.environment(share, uid, per_gpu)
        why = self.mps.ensure(share, uid, gid) if start else None
        if why:
            log.info("%s", why)
            env["PODIUM_MPS_NOTE"] = why  # the job can tell it runs without a server
        return env

    def plan(
        self,
        job: StartingJob,
        spec: JobSpec,
        grant: Grant,
        script_path: str,
        make_dirs: bool = True,
    ) -> LaunchPlan:
        """What the job's supervisor needs: its grant, identity, files, limits and
        environment. With `make_dirs`, the default checkpoint directory and the user's
        container cache are created (a real start; a dry run makes nothing)."""
        uid, gid, user = job.uid, job.gid, job.user
        who = self.identity(uid, gid, user, spec.umask)
        checkpoint = self.checkpoint_dir(job.job_id, spec)
        if make_dirs and spec.checkpoint_dir is None:
            own_checkpoint_dir(Path(checkpoint), uid, gid)
        if make_dirs:
            self.user_container_cache(uid, gid)
        held, gpu_ids = grant.units, list(grant.gpu_ids)
        environment = self.environment(job, spec, grant)
        environment.update(self.mps_share(held, spec, uid, gid, start=make_dirs))
        environment.update(_gpu_names(grant))
        tasks, replicas = _tasks(spec, grant, environment)
        spares = _spares(spec, grant, replicas)
        torchft = spec.elastic is not None and spec.torchft
        sig = spec.signal
        return LaunchPlan(
            job_id=job.job_id,
            name=job.name,
            user=user,
            uid=uid,
            gid=gid,
            groups=list(who.groups),
            umask=who.umask,
            argv=[script_path, *spec.script_args],
            work_dir=spec.work_dir,
            submit_dir=spec.submit_dir,
            environment=environment,
            tasks=tasks,
            stdout=spec.output,
            stderr=spec.error,
            stdin=spec.input,
            open_mode=spec.open_mode,
            node=self.node.name,
            gpu_ids=gpu_ids,
            cuda_names=list(grant.cuda_names),
            cpus=grant.cpus,
            cpus_per_task=spec.cpus_per_task,
            time_limit_s=spec.time_limit_s,
            kill_wait_s=self.config.kill_wait_s,
            signal_num=sig.signum if sig else None,
            signal_before_s=sig.seconds_before if sig else 60,
            signal_batch_only=sig.batch_only if sig else False,
            array_job_id=job.array_job_id,
            array_task_id=job.array_task_id,
            restart_count=job.restart_count,
            checkpoint_dir=checkpoint,
            partition=job.partition,
            qos=job.qos,
            account=job.account,
            proctrack=self.config.proctrack,
            heartbeat_timeout_s=spec.heartbeat_timeout_s,
            mem_mb=grant.mem_mb,
            cpu_ids=list(grant.cpu_ids),
            deny_devices=[list(d) for d in self.node.denied_devices(list(held))],
            hide_gpus=self.node.hide_gpus,
            cgroup_v2_base=self.node.cgroup_v2_base,
            container=self.container_request(spec, uid, held) if spec.container_image else None,
            replicas=replicas,
            resize_count=job.resize_count,
            resize_signal=spec.elastic.signal if spec.elastic is not None else 10,
            spares=spares,
            torchelastic=bool(spares) and not torchft and launches_torchelastic(spec.script),
            torchft=torchft,
        )

    def user_container_cache(self, uid: int, gid: int) -> None:
        """Make the user's container cache (podium.run.containers.lifecycle) once, so that the
        job's srun steps, run as the user, can keep images there too."""
        cache = self.home / "containers" / str(uid)
        if not cache.is_dir():
            cache.mkdir(mode=0o700, parents=True, exist_ok=True)
            if os.geteuid() == 0:
                os.chown(cache, uid, gid)

    def driver_files(self) -> list[str]:
        """The NVIDIA driver's files a container with GPUs may get (podium.run.containers.nvidia):
        what the declared GPUs declare, else what this host's linker knows (looked up
        once)."""
        declared = self.config.node.gpus.driver_files
        if declared or self.config.node.gpus.source == "declared":
            return list(declared)
        if self._driver_files is None:
            self._driver_files = driver_files()
        return list(self._driver_files)

    def container_gpus(self, mine: set[int]) -> list[dict[str, Any]]:
        """The GPUs a container of a job holding `mine` shows (their device files):
        each whole GPU, and the GPU of each MIG slice once (CUDA_VISIBLE_DEVICES then
        picks the slice by its UUID)."""
        parents = {d.physical for d in self.node.devices if d.index in mine}
        return [
            {"index": g.index, "uuid": g.uuid, "device": g.device}
            for g in self.node.gpus
            if g.index in parents and g.device
        ]

    def container_request(
        self, spec: JobSpec, uid: int, gpu_ids: tuple[int, ...]
    ) -> dict[str, Any]:
        """What the supervisor needs to make the job's container (podium.run.containers.lifecycle):
        Pyxis' options, the user's image cache, the home to mount, the GPUs' devices."""
        try:
            home = pwd.getpwuid(uid).pw_dir
        except KeyError:
            home = None
        mine = set(gpu_ids)
        return {
            "image": spec.container_image,
            "work_dir": spec.work_dir,
            "cache_dir": str(self.home / "containers"),
            "name": spec.container_name,
            "mounts": list(spec.container_mounts),
            "workdir": spec.container_workdir,
            "writable": spec.container_writable is not False,
            "remap_root": bool(spec.container_remap_root),
            "mount_home": bool(spec.container_mount_home),
            "home": home,
            "entrypoint": bool(spec.container_entrypoint),
            "save": spec.container_save,
            "env_names": list(spec.container_env),
            "gpus": self.container_gpus(mine),
            "driver_files": self.driver_files() if mine else [],
            "import_env": {k: v for k, v in spec.environment.items() if k in IMPORT_ENV},
        }


def _gpu_names(grant: Grant) -> dict[str, str]:
    """For srun in the job: CUDA_VISIBLE_DEVICES by UUID per GPU index, and one MIG
    slice per task where the job holds several (CUDA uses one slice per process)."""
    env: dict[str, str] = {}
    names = grant.cuda_names_by_index()
    if names:
        env[CUDA_NAMES] = names
    if sum(name.startswith("MIG-") for name in grant.cuda_names) > 1:
        env[SLICE_PER_TASK] = "1"
    return env


def _spares(spec: JobSpec, grant: Grant, replicas: int | None) -> list[list[int]]:
    """The GPUs of each spare an elastic job holds (--spares): the grant's GPUs after
    its replicas', one replica's worth each."""
    elastic = spec.elastic
    if elastic is None or replicas is None or not elastic.spares or not elastic.replica_gpus:
        return []
    each, after = elastic.replica_gpus, list(grant.gpu_ids)[replicas * elastic.replica_gpus :]
    return [after[i * each : (i + 1) * each] for i in range(len(after) // each)]


def _tasks(
    spec: JobSpec, grant: Grant, environment: dict[str, str]
) -> tuple[list[TaskPlan], int | None]:
    """The supervisor's tasks, and the replicas of an elastic job (else None).

    The batch script runs once, as the batch step, with all of the job's GPUs; its srun
    calls start the job's tasks (podium.jobsteps.srun). An elastic job's replicas are
    each a task running the script, as its rank, with its share of the GPUs; the
    task counts in `environment` say how many."""
    gpu_ids = list(grant.gpu_ids)
    elastic = spec.elastic
    if elastic is None:
        return [TaskPlan(procid=0, localid=0, gpu_ids=gpu_ids)], None
    replicas = elastic.replicas_of(grant.cpus)
    each = elastic.replica_gpus
    tasks = [
        TaskPlan(procid=i, localid=i, gpu_ids=gpu_ids[i * each : (i + 1) * each])
        for i in range(replicas)
    ]
    environment.update(
        SLURM_NTASKS=str(replicas), SLURM_NPROCS=str(replicas), SLURM_TASKS_PER_NODE=str(replicas)
    )
    return tasks, replicas
