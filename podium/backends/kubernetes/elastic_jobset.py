"""An elastic job on Kubernetes as a JobSet (pure: dicts in, dicts out).

`--elastic=MIN:MAX[:STEP]` with `--gpus-per-task=G` is one pod per replica (G GPUs
each) in a JobSet's one replicated Job, `parallelism` = `completions` = the size. A
JobSet's replicated Jobs cannot change (JobSet v0.11's webhook holds them immutable,
even suspended), so a resize makes the job's next generation: a JobSet of the same job
id named `NAME-JOBID-rN`, at the new size, its pods told by WORLD_SIZE,
PODIUM_REPLICAS and PODIUM_RESIZE_COUNT; the old JobSet is deleted first (its pods get
SIGTERM and `terminationGracePeriodSeconds` = `--resize-grace` to save, the resize
contract's stop), and Kueue admits the new one within the ClusterQueue's quota, as any
job (`elastic_control` decides when).

The job's bounds, grace, and its resizes so far travel on the JobSet: the label
`podium.dev/elastic` (MIN-MAX-STEP) and the annotation `podium.dev/resize-log`.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from podium.backends.kubernetes.translate import ELASTIC_LABEL, JOB_LABEL, RECORD_ANNOTATION

RESIZE_LOG = "podium.dev/resize-log"  # JSON: [{from, to, cause, time}]
SIZED_AT = "podium.dev/sized-at"  # when this generation was made (epoch seconds)
GRACE = "podium.dev/resize-grace"
KEPT_KUEUE_KEYS = (
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
)  # --switches: Podium's own


def bounds(obj: dict[str, Any]) -> tuple[int, int, int] | None:
    """(MIN, MAX, STEP) of an elastic JobSet; None for any other object."""
    text = ((obj.get("metadata") or {}).get("labels") or {}).get(ELASTIC_LABEL) or ""
    parts = text.split("-")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    low, high, step = (int(p) for p in parts)
    return low, high, step


def size_of(jobset: dict[str, Any]) -> int:
    return int(jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"])


def elastic_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """What `podium show` gives of an elastic job: replicas now, the bounds, resizes."""
    found = bounds(obj)
    if found is None or obj.get("kind") != "JobSet":
        return {}
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    try:  # the JobSet is its user's to write: anything odd reads as nothing
        log = json.loads(annotations.get(RESIZE_LOG) or "[]")
        replicas = size_of(obj)
    except (ValueError, KeyError, TypeError, IndexError):
        return {}
    log = [e for e in log if isinstance(e, dict)] if isinstance(log, list) else []
    return {"replicas": replicas, "replicas_min": found[0], "replicas_max": found[1],
            "resizes": len(log), "resize_log": log}  # fmt: skip


def _env(container: dict[str, Any], **values: str) -> None:
    for entry in container["env"]:
        if entry["name"] in values:
            entry["value"] = values.pop(entry["name"])
    container["env"] += [{"name": k, "value": v} for k, v in values.items()]


def next_generation(
    jobset: dict[str, Any], config_map: dict[str, Any], size: int, cause: str, now: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (ConfigMap, JobSet) of the job's next generation at `size`, to create once
    the old JobSet is deleted: named NAME-JOBID-rN, its script's copy beside it."""
    old = jobset["metadata"]
    annotations = dict(old.get("annotations") or {})
    log = json.loads(annotations.get(RESIZE_LOG) or "[]")
    base = old["name"].removesuffix(f"-r{len(log)}") if log else old["name"]
    log.append({"from": size_of(jobset), "to": size, "cause": cause, "time": round(now, 3)})
    name = f"{base}-r{len(log)}"
    record = json.loads(annotations.get(RECORD_ANNOTATION) or "{}")
    per_pod = int(record.get("gpus") or 0) // max(1, size_of(jobset))
    record.update(gpus=per_pod * size, ntasks=size, node_count=size)
    annotations.update({RESIZE_LOG: json.dumps(log), SIZED_AT: str(round(now, 3)),
                        RECORD_ANNOTATION: json.dumps(record, sort_keys=True)})  # fmt: skip
    labels = {**old["labels"], JOB_LABEL: name}
    script = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": f"{name}-script", "namespace": old["namespace"],
                     "labels": {**config_map["metadata"]["labels"], JOB_LABEL: name}},
        "data": dict(config_map["data"]),
    }  # fmt: skip
    spec = copy.deepcopy(jobset["spec"])
    spec["network"]["subdomain"] = name
    job = spec["replicatedJobs"][0]["template"]["spec"]
    job["parallelism"] = job["completions"] = size
    pod = job["template"]
    for key in ("labels", "annotations"):  # what Kueue put there at admission goes
        kept = {k: v for k, v in (pod["metadata"].get(key) or {}).items()
                if not k.startswith("kueue.x-k8s.io/") or k in KEPT_KUEUE_KEYS}  # fmt: skip
        pod["metadata"][key] = kept
    pod["metadata"]["labels"][JOB_LABEL] = name
    pod["spec"].pop("schedulingGates", None)
    pod["spec"]["volumes"] = [
        {**v, "configMap": {"name": f"{name}-script"}} if "configMap" in v else v
        for v in pod["spec"]["volumes"]
    ]
    container = pod["spec"]["containers"][0]
    _env(container, MASTER_ADDR=f"{name}-workers-0-0.{name}", WORLD_SIZE=str(size),
         PODIUM_REPLICAS=str(size), PODIUM_RESIZE_COUNT=str(len(log)))  # fmt: skip
    for key in ("status", "resourceVersion", "uid", "creationTimestamp", "managedFields"):
        spec.pop(key, None)
    spec.pop("suspend", None)  # Kueue suspends it again at creation, and admits it
    new = {
        "apiVersion": jobset["apiVersion"], "kind": "JobSet",
        "metadata": {"name": name, "namespace": old["namespace"], "labels": labels,
                     "annotations": annotations},
        "spec": spec,
    }  # fmt: skip
    return script, new


__all__ = ["bounds", "elastic_fields", "next_generation"]
