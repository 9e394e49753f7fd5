"""JobSpec -> Kubernetes manifests for Kueue. Pure: no I/O, no clock.

One pod per node of the job:
- **one node:** a batch/v1 Job;
- **several nodes, or `--auto-resume=N`:** a JobSet with one replicated Job of indexed
  pods (parallelism = completions = nodes). JobSet's headless service gives each pod a
  stable name, and pod 0's name is MASTER_ADDR. With auto-resume, JobSet restarts the
  whole gang up to N times when a pod is lost to its node (HyperPod's job auto-resume),
  and not when the job's own container fails; PODIUM_RESTART_COUNT is JobSet's restart
  attempt.

Every pod gets its GPUs (`nvidia.com/gpu`, or `nvidia.com/mig-<profile>` for a MIG
slice) as requests and limits, with the job's CPUs and memory per node, and a node
affinity that keeps it off nodes whose HyperPod health label
(`sagemaker.amazonaws.com/node-health-status`, set by `podium k8s agent`) says
unschedulable, as HyperPod's own jobs select `Schedulable` nodes.

Environment for torchrun, as Kubeflow's PyTorchJob sets it:
- MASTER_ADDR, MASTER_PORT;
- WORLD_SIZE (pods) and RANK = NODE_RANK (the pod's completion index);
- the PODIUM_* values.

The user's script travels in a ConfigMap and runs as the container's command under
bash. The image is `--container-image`, else the target's default.

Kueue reads two labels: `kueue.x-k8s.io/queue-name` (the LocalQueue) and
`kueue.x-k8s.io/priority-class` (a WorkloadPriorityClass named after the job's QoS).
The time limit becomes the pods' `activeDeadlineSeconds`. Names are the job's name made
DNS-safe plus the Podium job id (unique in the namespace, so two submissions never
collide), or a hash of the spec where there is no id yet (`--dry-run`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from podium.errors import Unsatisfiable
from podium.jobspec.job import JobSpec

MAX_SCRIPT_BYTES = 1000 * 1024  # a ConfigMap holds at most 1 MiB
MASTER_PORT = 29500
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_LABEL = "podium.dev/job"
JOB_ID_LABEL = "podium.dev/job-id"  # Podium's job id, on its objects and pods
RECORD_ANNOTATION = "podium.dev/record"  # what the record needs from the spec
ELASTIC_LABEL = "podium.dev/elastic"  # an elastic job's MIN-MAX-STEP (elastic_jobset)
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"  # --switches=1
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"  # --switches=1@TIME
INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
RESTART_FIELD = "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"
HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"  # HyperPod's, set by the agent
UNHEALTHY = ("Unschedulable", "UnschedulablePendingReboot", "UnschedulablePendingReplacement")


@dataclass(frozen=True)
class Target:
    """Where the manifests go: the namespace, the LocalQueue, the default image and
    annotations for every pod."""

    namespace: str
    local_queue: str
    image: str | None = None
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    switch_label: str | None = None  # the network's leaf switches (--switches)


def dns_label(text: str, limit: int = 63) -> str:
    """`text` as a DNS-1123 label: lower case letters, digits and '-', starting with a
    letter, at most `limit` characters ("job" when nothing is left)."""
    base = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    if base and not base[0].isalpha():
        base = "j-" + base
    return base[:limit].strip("-") or "job"


def dns_name(text: str, suffix: str, limit: int = 40) -> str:
    """dns_label(text), cut so that JobSet's pod names (`NAME-workers-0-N`) stay under
    63, then `-suffix`."""
    return f"{dns_label(text, limit)}-{suffix}"


def manifests(
    spec: JobSpec,
    target: Target,
    job_id: int | None = None,
    record: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The ConfigMap and the Job or JobSet for `spec`, in the order to create them,
    named `NAME-JOBID` and labelled with the job id (the objects and the pods), with
    `record` (what the job record needs from the spec) as an annotation; without a job
    id, as `--dry-run` and `--test-only` show them: `NAME-` and a hash of the spec, no
    id. Built once, ready to create. Raises Unsatisfiable with the reason when
    Kubernetes cannot run it as asked."""
    image = _image_and_script_fit(spec, target)
    digest = hashlib.sha256(json.dumps(spec.model_dump(mode="json"), sort_keys=True).encode())
    name = dns_name(spec.name, str(job_id) if job_id is not None else digest.hexdigest()[:8])
    labels = {QUEUE_LABEL: target.local_queue, JOB_LABEL: name} | elastic_labels(spec)
    own = {JOB_LABEL: name} if job_id is None else {JOB_LABEL: name, JOB_ID_LABEL: str(job_id)}
    labels |= own
    if spec.qos:  # a WorkloadPriorityClass named after the QoS (none: Kueue's default)
        labels[PRIORITY_LABEL] = dns_label(spec.qos)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{name}-script",
            "namespace": target.namespace,
            "labels": dict(own),
        },
        "data": {"script": spec.script},
    }
    pod = _pod_template(spec, name, image)
    pod["metadata"]["labels"] = dict(own)
    annotations = dict(target.pod_annotations) | _topology_request(spec, target)
    if annotations:
        pod["metadata"]["annotations"] = annotations
    job_spec: dict[str, Any] = {
        "parallelism": spec.nodes,
        "completions": spec.nodes,
        "completionMode": "Indexed",
        "backoffLimit": 0,  # restarts are Podium's (auto-resume), not the Job's
        "template": pod,
    }
    meta: dict[str, Any] = {"name": name, "namespace": target.namespace, "labels": labels}
    if record is not None:
        meta["annotations"] = {RECORD_ANNOTATION: json.dumps(dict(record), sort_keys=True)}
    if spec.nodes == 1 and not spec.auto_resume and spec.elastic is None:
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec}
        return [config_map, job]
    return [config_map, _jobset(spec, name, meta, job_spec)]


def _image_and_script_fit(spec: JobSpec, target: Target) -> str:
    """The image the job runs in; Unsatisfiable when there is none or the script is
    larger than a ConfigMap holds."""
    image = spec.container_image or target.image
    if not image:
        raise Unsatisfiable(
            "a job on Kubernetes runs in a container: give --container-image=IMAGE "
            "(e.g. nvcr.io/nvidia/pytorch:24.05-py3), or set kubernetes.image in the config"
        )
    if len(spec.script.encode()) > MAX_SCRIPT_BYTES:
        raise Unsatisfiable(
            f"the script is {len(spec.script.encode())} bytes: a ConfigMap holds at most "
            f"{MAX_SCRIPT_BYTES} (keep large files in the image or a volume)"
        )
    return image


def _jobset(
    spec: JobSpec, name: str, meta: dict[str, Any], job_spec: dict[str, Any]
) -> dict[str, Any]:
    """A JobSet of one replicated Job (several nodes, or auto-resume): restarted whole
    by JobSet up to --auto-resume times when a pod is lost to its node."""
    failure: dict[str, Any] = {"maxRestarts": spec.auto_resume}
    if spec.auto_resume:
        # A pod lost to its node (evicted: DisruptionTarget) fails its Job by the
        # backoff limit and JobSet restarts every Job, up to maxRestarts; a container
        # that exits non-zero fails its Job by the pod failure policy, and the JobSet
        # fails without a restart (an application error, as on the other backends).
        job_spec["podFailurePolicy"] = {
            "rules": [
                {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]},
                {
                    "action": "FailJob",
                    "onExitCodes": {"containerName": "job", "operator": "NotIn", "values": [0]},
                },
            ]
        }
        failure["rules"] = [{"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": name},
            "failurePolicy": failure,
            "replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": job_spec}}],
        },
    }


def _pod_template(spec: JobSpec, name: str, image: str) -> dict[str, Any]:
    gpus = _gpus_per_node(spec)
    resource = f"nvidia.com/mig-{spec.gpu_type}" if _is_mig(spec.gpu_type) else "nvidia.com/gpu"
    cpus = -(-spec.cpus // max(1, spec.nodes))  # the job's CPUs per node, rounded up
    requests: dict[str, str] = {"cpu": str(cpus), "memory": f"{spec.mem_mb}Mi"}
    limits: dict[str, str] = {"memory": f"{spec.mem_mb}Mi"}
    if gpus:
        requests[resource] = limits[resource] = str(gpus)
    in_jobset = spec.nodes > 1 or bool(spec.auto_resume) or spec.elastic is not None
    master = f"{name}-workers-0-0.{name}" if in_jobset else "127.0.0.1"
    restarts: dict[str, Any] = (
        {"name": "PODIUM_RESTART_COUNT", "valueFrom": {"fieldRef": {"fieldPath": RESTART_FIELD}}}
        if in_jobset
        else {"name": "PODIUM_RESTART_COUNT", "value": "0"}
    )
    env: list[dict[str, Any]] = [
        {"name": "MASTER_ADDR", "value": master},
        {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
        {"name": "WORLD_SIZE", "value": str(spec.nodes)},
        {"name": "PODIUM_JOB_NAME", "value": spec.name},
        {"name": "PODIUM_AUTO_RESUME", "value": str(spec.auto_resume)},
        restarts,
    ]
    for var in ("NODE_RANK", "RANK"):
        env.append({"name": var, "valueFrom": {"fieldRef": {"fieldPath": INDEX_FIELD}}})
    if spec.checkpoint_dir:
        env.append({"name": "PODIUM_CHECKPOINT_DIR", "value": spec.checkpoint_dir})
    if spec.elastic is not None:  # a resize is the next generation (elastic_jobset)
        env += [{"name": "PODIUM_REPLICAS", "value": str(spec.nodes)},
                {"name": "PODIUM_RESIZE_COUNT", "value": "0"}]  # fmt: skip
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "job",
                "image": image,
                "command": ["bash", "/podium/script", *spec.script_args],
                "env": env,
                "resources": {"requests": requests, "limits": limits},
                "volumeMounts": [{"name": "script", "mountPath": "/podium", "readOnly": True}],
                **({"workingDir": spec.container_workdir} if spec.container_workdir else {}),
            }
        ],
        "volumes": [{"name": "script", "configMap": {"name": f"{name}-script"}}],
    }
    if spec.time_limit_s is not None:
        pod_spec["activeDeadlineSeconds"] = spec.time_limit_s
    if spec.elastic is not None:  # SIGTERM, then the resize grace to save
        pod_spec["terminationGracePeriodSeconds"] = spec.elastic.grace_s
    pod_spec["affinity"] = _avoid(spec.exclude)
    return {"metadata": {"labels": {JOB_LABEL: name}}, "spec": pod_spec}


def elastic_labels(spec: JobSpec) -> dict[str, str]:
    """The JobSet's label for an elastic spec (none for another job)."""
    e = spec.elastic
    return {ELASTIC_LABEL: f"{e.min}-{e.max}-{e.step}"} if e is not None else {}


def _topology_request(spec: JobSpec, target: Target) -> dict[str, str]:
    """Kueue's topology annotation for --switches=1 (required) or 1@TIME (preferred):
    the pods within one domain of the leaf-switch label (admission checked both)."""
    switches = dict(spec.engine_options).get("switches")
    if switches is None or target.switch_label is None:
        return {}
    key = PREFERRED_TOPOLOGY if "@" in switches else REQUIRED_TOPOLOGY
    return {key: target.switch_label}


def _gpus_per_node(spec: JobSpec) -> int:
    if spec.gpus_per_node is not None:
        return spec.gpus_per_node
    return spec.gpus // max(1, spec.nodes)


def _is_mig(gpu_type: str | None) -> bool:
    return bool(gpu_type and re.fullmatch(r"\d+g\.\d+gb", gpu_type))


def _avoid(nodes: tuple[str, ...]) -> dict[str, Any]:
    """Node affinity that keeps the pods off nodes HyperPod's health label marks
    unschedulable (a node without the label is fine) and off the job's excluded nodes."""
    terms = [{"key": HEALTH_LABEL, "operator": "NotIn", "values": list(UNHEALTHY)}]
    if nodes:
        hosts = sorted(nodes)
        terms.append({"key": "kubernetes.io/hostname", "operator": "NotIn", "values": hosts})
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": terms}]
            }
        }
    }
