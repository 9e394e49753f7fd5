"""Job traces: what each job asks for, when it arrives and how long it runs.

Readers:
- Tiresias (`job_id,num_gpu,submit_time,iterations,model_name,duration,interval`):
  the model name is used as the job's account and user (the trace has no users).
- Alibaba GPU 2023 "openb" pods (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,
  qos,pod_phase,creation_time,deletion_time,scheduled_time`) and its node list
  (`sn,cpu_milli,memory_mib,gpu,model`): a fractional GPU (gpu_milli < 1000 of one) is
  kept in `gpu_milli` for the simulator's sharing modes (podium.sim.sharing), and
  rounded up to one whole GPU without sharing; GPU-type constraints are not modelled;
  QoS LS and Guaranteed map to "high", Burstable to "normal", BE to "low"; the runtime
  is deletion_time - scheduled_time.
- Simple CSV (`job_id,submit_time,gpus,duration` and optional `cpus,mem_mb,user,
  account,qos,time_limit,checkpoints`; `checkpoints` 1 or 0: whether the job saves when
  stopped, else the simulator's `--checkpointing` share decides).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from podium.errors import SpecError


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace. Times in seconds."""

    job_id: int
    submit_time: float
    gpus: int
    duration: float
    cpus: int = 1
    mem_mb: int = 0
    user: str = "user"
    account: str = "default"
    qos: str = "normal"
    time_limit: float | None = None
    gpu_milli: int = 0  # part of one GPU asked for (Alibaba), 0: whole GPUs
    checkpoints: bool | None = None  # saves when stopped (None: the trace does not say)


_SPREAD = 2654435761  # Knuth's multiplicative hash: a fixed, even pick by job id


def picked_evenly(job: TraceJob, share: float) -> bool:
    """Whether `job` is one of `share` of a trace's jobs, picked evenly by its id (the
    same jobs in every replay)."""
    return (job.job_id * _SPREAD) % 10_000 < share * 10_000


@dataclass(frozen=True)
class TraceNode:
    name: str
    gpus: int
    cpus: int
    mem_mb: int
    gpu_type: str = "gpu"


def _rows(path: Path, required: set[str]) -> list[dict[str, str]]:
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            missing = required - set(reader.fieldnames or [])
            if missing:
                raise SpecError(f"{path}: missing column(s) {sorted(missing)}")
            return list(reader)
    except OSError as exc:
        raise SpecError(f"cannot read trace {path}: {exc.strerror}") from None


def read_tiresias(path: Path) -> list[TraceJob]:
    rows = _rows(path, {"job_id", "num_gpu", "submit_time", "duration"})
    return [
        TraceJob(
            job_id=int(r["job_id"]),
            submit_time=float(r["submit_time"]),
            gpus=int(r["num_gpu"]),
            duration=float(r["duration"]),
            cpus=1,
            user=r.get("model_name") or "user",
            account=r.get("model_name") or "default",
        )
        for r in rows
    ]


_ALIBABA_QOS = {"LS": "high", "Guaranteed": "high", "Burstable": "normal", "BE": "low"}


def read_alibaba(path: Path) -> list[TraceJob]:
    rows = _rows(
        path,
        {
            "name",
            "cpu_milli",
            "memory_mib",
            "num_gpu",
            "gpu_milli",
            "qos",
            "creation_time",
            "deletion_time",
            "scheduled_time",
        },
    )
    jobs = []
    for i, r in enumerate(rows):
        gpus = int(r["num_gpu"])
        milli = int(r["gpu_milli"] or 0)
        if gpus == 0 and milli > 0:
            gpus = 1
        start = float(r["scheduled_time"] or r["creation_time"])
        duration = max(1.0, float(r["deletion_time"]) - start)
        jobs.append(
            TraceJob(
                job_id=i,
                submit_time=float(r["creation_time"]),
                gpus=gpus,
                duration=duration,
                cpus=max(1, math.ceil(int(r["cpu_milli"]) / 1000)),
                mem_mb=int(float(r["memory_mib"])),
                user=r["qos"],
                account=r["qos"],
                qos=_ALIBABA_QOS.get(r["qos"], "normal"),
                gpu_milli=milli if gpus == 1 and 0 < milli < 1000 else 0,
            )
        )
    return jobs


def read_alibaba_nodes(path: Path) -> list[TraceNode]:
    rows = _rows(path, {"sn", "cpu_milli", "memory_mib", "gpu", "model"})
    return [
        TraceNode(
            name=r["sn"],
            gpus=int(r["gpu"]),
            cpus=int(r["cpu_milli"]) // 1000,
            mem_mb=int(r["memory_mib"]),
            gpu_type=r["model"] or "gpu",
        )
        for r in rows
    ]


def read_simple(path: Path) -> list[TraceJob]:
    rows = _rows(path, {"job_id", "submit_time", "gpus", "duration"})
    jobs = []
    for r in rows:
        limit = r.get("time_limit")
        jobs.append(
            TraceJob(
                job_id=int(r["job_id"]),
                submit_time=float(r["submit_time"]),
                gpus=int(r["gpus"]),
                duration=float(r["duration"]),
                cpus=int(r.get("cpus") or 1),
                mem_mb=int(r.get("mem_mb") or 0),
                user=r.get("user") or "user",
                account=r.get("account") or "default",
                qos=r.get("qos") or "normal",
                time_limit=float(limit) if limit else None,
                checkpoints=_flag(r.get("checkpoints")),
            )
        )
    return jobs


def _flag(value: str | None) -> bool | None:
    """A trace's yes/no column (1/0, true/false, yes/no); None when empty or absent."""
    if not value:
        return None
    word = value.strip().lower()
    if word in ("1", "true", "yes"):
        return True
    if word in ("0", "false", "no"):
        return False
    raise SpecError(f"checkpoints {value!r} is not a yes/no value: give 1 or 0")


def detect_format(path: Path) -> str:
    """tiresias, alibaba or simple, from the CSV header."""
    try:
        with open(path) as fh:
            header = fh.readline()
    except OSError as exc:
        raise SpecError(f"cannot read trace {path}: {exc.strerror}") from None
    if "num_gpu" in header and "model_name" in header:
        return "tiresias"
    if "gpu_milli" in header:
        return "alibaba"
    if "job_id" in header and "duration" in header:
        return "simple"
    raise SpecError(
        f"{path}: unknown trace format (expected Tiresias, Alibaba or "
        "job_id,submit_time,gpus,duration)"
    )


def read_trace(path: Path, fmt: str | None = None) -> list[TraceJob]:
    fmt = fmt or detect_format(path)
    readers = {"tiresias": read_tiresias, "alibaba": read_alibaba, "simple": read_simple}
    if fmt not in readers:
        raise SpecError(f"unknown trace format {fmt!r}: expected {', '.join(readers)}")
    return readers[fmt](path)
