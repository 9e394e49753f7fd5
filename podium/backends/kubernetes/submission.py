"""What a Kubernetes submission carries besides its manifests: a Slurm-like job id, the
labels that find its objects and pods, and what Podium knew at submission.

Job ids are integers taken from the ConfigMap `podium-job-ids` in the namespace by a
compare-and-swap on its resourceVersion (two submissions at once never get the same
id; a conflict is retried), and carried as the `podium.dev/job-id` label on the job,
its ConfigMap and its pods. The `podium.dev/record` annotation holds the user,
account, QoS, resources and time limit the record shows (podium.backends.kubernetes.
parse).
"""

from __future__ import annotations

import time
from typing import Any

from podium.api.caller import this_process
from podium.backends.kubernetes.engine_api import KubeApi
from podium.errors import ApiError
from podium.jobspec.job import JobSpec

IDS = "podium-job-ids"


def next_job_id(api: KubeApi) -> int:
    """The next job id: a compare-and-swap on the ConfigMap's resourceVersion."""
    for _ in range(50):
        current = api.get("ConfigMap", IDS)
        if current is None:
            try:
                api.create(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": IDS, "namespace": api.namespace},
                        "data": {"next": "2"},
                    }
                )
                return 1
            except ApiError as exc:
                if exc.status != 409:
                    raise
                continue
        number = int((current.get("data") or {}).get("next") or 1)
        current.setdefault("data", {})["next"] = str(number + 1)
        try:
            api.replace("ConfigMap", current)
            return number
        except ApiError as exc:
            if exc.status != 409:
                raise
    raise ApiError(f"ConfigMap/{IDS}: too many concurrent submissions; try again", 503)


def known(spec: JobSpec) -> dict[str, Any]:
    """What the record needs from the spec (the `podium.dev/record` annotation)."""
    who = this_process()
    return {
        "name": spec.name,
        "user": who.name,
        "uid": who.uid,
        "account": spec.account,
        "partition": spec.partition,
        "qos": spec.qos,
        "gpus": spec.gpus,
        "gpu_type": spec.gpu_type,
        "cpus": spec.cpus,
        "mem_mb": spec.mem_mb,
        "ntasks": spec.ntasks,
        "node_count": spec.nodes,
        "time_limit_s": spec.time_limit_s,
        "work_dir": spec.work_dir,
        "comment": spec.comment,
        "wckey": spec.wckey,
        "submit_epoch": round(time.time(), 3),
    }
