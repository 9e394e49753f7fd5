"""The answer to `--test-only`, built the same way by every backend (the embedded
daemon's intake, Slurm after `sbatch --test-only`, Kubernetes after a dry-run create):
what the job would ask for, nothing queued."""

from __future__ import annotations

from typing import Any

from podium.api.records import would_queue
from podium.jobspec.job import JobSpec


def test_only_answer(
    spec: JobSpec, default_partition: str = "", default_qos: str = "", arrays: bool = True
) -> dict[str, Any]:
    """The one WOULD_QUEUE record for `spec`, naming the engine's defaults where the
    spec leaves the partition or QoS to the engine (`arrays=False`: an engine that
    runs no arrays leaves the task count out)."""
    return dict(
        would_queue(
            name=spec.name,
            gpus=spec.gpus,
            cpus=spec.cpus,
            mem_mb=spec.mem_mb,
            partition=spec.partition or default_partition,
            qos=spec.qos or default_qos,
            time_limit_s=spec.time_limit_s,
            array_tasks=spec.array.count if arrays and spec.array else None,
        )
    )


__all__ = ["test_only_answer"]
