"""What every backend does with a submission before its engine sees it: sbatch's
reading of it against the config, the backend's Admission (its defaults and refusals),
and the --test-only answer. One helper each, so a new backend writes neither again."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from podium.api.caller import Caller
from podium.api.records import would_queue
from podium.config.cluster import ClusterConfig
from podium.jobspec.build import Admission, SubmitRequest, build_job
from podium.jobspec.job import JobSpec


def admitted_spec(
    request: Mapping[str, Any], config: ClusterConfig, who: Caller, admission: Admission
) -> tuple[JobSpec, list[str]]:
    """The job `request` (a submit body) asks for, read as sbatch reads it and admitted
    by `admission`, and what the user should be told of an accepted job (an option
    recorded but not applied). Raises SpecError or Unsatisfiable with the reason."""
    built = build_job(SubmitRequest(**dict(request)), config, who, time.time(), admission)
    return built.spec, list(built.warnings)


def test_only_answer(
    spec: JobSpec, default_partition: str, default_qos: str, arrays: bool = True
) -> dict[str, Any]:
    """--test-only's one WOULD_QUEUE record for `spec` (the engine has judged it and
    queued nothing), naming the engine's defaults where the spec leaves them."""
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


__all__ = ["admitted_spec", "test_only_answer"]
