"""`podium submit --dry-run` on the embedded cluster: the first half of a real start.

A real start goes scheduler decision -> `LocalNode.grant_of` -> `StartingJob.of_row`
-> `Planner.plan` -> supervisor. A dry run takes the same steps up to the plan, with
the job as its submission would store it and the GPUs and CPUs an idle node would
give, and makes nothing on disk.
"""

from __future__ import annotations

from typing import Any

from podium.api.caller import Caller
from podium.errors import SpecError
from podium.jobspec.job import JobSpec
from podium.server.launch import Planner
from podium.server.starting import StartingJob

SCRIPT_PLACEHOLDER = "SCRIPT"  # the batch script's path, known once the job is stored


def dry_run_record(spec: JobSpec, who: Caller, planner: Planner) -> dict[str, Any]:
    """The job `spec` as checked, and the launch plan its supervisor would get on an
    idle node (the environment's names only: values may be secret)."""
    if spec.array is not None:
        raise SpecError("--dry-run shows one job's plan: submit without --array to see it")
    node = planner.node
    units = node.devices_for(spec.gpu_type)[: spec.gpus]
    cpu_ids = (node.cpu_ids or ())[: spec.cpus]
    grant = node.grant_of(units, spec.cpus, spec.mem_mb, cpu_ids)
    job = StartingJob.of_submission(spec, who)
    plan = planner.plan(job, spec, grant, SCRIPT_PLACEHOLDER, make_dirs=False)
    data = plan.to_json()
    data["environment"] = sorted(plan.environment)
    record = spec.model_dump(mode="json", exclude={"environment"})
    return {"backend": "embedded", "job": record, "launch_plan": data}
