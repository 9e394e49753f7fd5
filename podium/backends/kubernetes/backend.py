"""The Kubernetes backend: Podium's Backend protocol served by Kueue on a Kubernetes
cluster (`backend: kubernetes`).

A submission is built and checked by Podium (`podium.jobspec.build` with
KubernetesAdmission), rendered as a ConfigMap and a batch/v1 Job or a JobSet
(`manifests`), checked against the LocalQueue and its ClusterQueue's quota, and created
in the configured namespace. Kueue admits it; Podium reads it back (`parse`).

Job ids, labels and the record annotation are `submission`'s.

- cancel: the job is annotated `podium.dev/cancelled` and its Workload deactivated
  (`spec.active: false`), so Kueue stops its pods and frees its quota; the objects
  stay, as ended jobs stay in Slurm's accounting (delete them with kubectl).
- hold / release: the Workload's `spec.active` (pending jobs only, as Slurm's hold).
- requeue: deactivate, then activate again (Kueue evicts and requeues it).
- drain / resume: cordon / uncordon the Node, with the reason as an annotation; resume
  also lifts the health agent's fence (label back to Schedulable, its taint removed).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from podium import paths
from podium.api.backend_protocol import Backend, Feature, Unsupported
from podium.api.caller import this_process
from podium.api.selection import JobFilter, Selection
from podium.backends.admitted import admitted_spec, engine_ping, test_only_answer
from podium.backends.kubernetes import parse as records
from podium.backends.kubernetes.admission import KubernetesAdmission
from podium.backends.kubernetes.cluster_queues import queue_teams
from podium.backends.kubernetes.elastic_control import free_size
from podium.backends.kubernetes.engine_api import KubeApi, Obj
from podium.backends.kubernetes.queue_fit import check_fits
from podium.backends.kubernetes.submission import known, next_job_id
from podium.backends.kubernetes.translate import HEALTH_LABEL, JOB_LABEL, Target, manifests
from podium.config.cluster import ClusterConfig
from podium.errors import ApiError, SpecError
from podium.jobspec.job import JobSpec

if TYPE_CHECKING:
    from podium.api.backend_protocol import Action

ACTIVE = ("PENDING", "RUNNING")
WORKLOAD_JOB_UID = "kueue.x-k8s.io/job-uid"  # Kueue's label on a job's Workload
_KUEUE = "Kueue decides on Kubernetes"


class KubernetesBackend(Backend):
    """Podium's API over one namespace of a Kubernetes cluster with Kueue."""

    name = "kubernetes"
    CANNOT: ClassVar[Mapping[str, str]] = {
        Feature.PRIORITIES: f"{_KUEUE}: priorities are WorkloadPriorityClasses (--qos)",
        Feature.FORECAST: f"{_KUEUE}: Kueue admits by quota and order, with no plan of "
        "future starts (its visibility API gives positions, not times)",
        Feature.CHECKPOINT_REPORT: f"{_KUEUE}: Kueue chooses victims by priority and "
        "admission time, not checkpoints (kueue #477)",
        Feature.PROGRESS_REPORT: f"{_KUEUE}: with no forecast of starts, a job's "
        "progress would change nothing",
        Feature.FAIR_SHARE: f"{_KUEUE}: shares are ClusterQueue quotas in a cohort "
        "(podium k8s render teams)",
        Feature.HEALTH: "health checks run on each node (podium health there)",
        Feature.FAULT_INJECTION: "fault injection acts on the embedded cluster's daemon",
        Feature.GPU_RESUME: "Kubernetes cordons whole nodes: resume the node, not one GPU",
        Feature.SHUTDOWN: "the control plane is stopped by its administrator",
        Feature.BATCH: "the API server creates one object at a time and cannot take several "
        "all or none: submit them one by one",
        Feature.MIG_ADVICE: "MIG layouts on Kubernetes are the GPU operator's "
        "(nvidia.com/mig.config): run podium mig advise on an embedded node",
        Feature.MIG_APPLY: "MIG layouts on Kubernetes are applied by the GPU operator's "
        "mig-manager through the node label nvidia.com/mig.config",
    }

    def __init__(self, config: ClusterConfig, home: Path | None = None) -> None:
        self.config = config
        self.home = home or paths.home()
        self.access = config.kubernetes
        self.api = KubeApi(self.access.kubeconfig, self.access.namespace)

    # --- submission ----------------------------------------------------------------------

    def _teams(self) -> list[dict[str, Any]]:
        """Every ClusterQueue as a team (cluster-wide: quotas are the cohort's)."""
        records: list[dict[str, Any]] = queue_teams(self.api.objects("ClusterQueue"))
        return records

    def _spec(self, request: Mapping[str, Any]) -> JobSpec:
        """The job a submit request asks for, as this backend admits it (its warnings
        kept for the caller)."""
        admission = KubernetesAdmission(self.access.local_queue, self.access.switch_label)
        spec, self.warnings = admitted_spec(request, self.config, this_process(), admission)
        return spec

    def _manifests(self, spec: JobSpec, job_id: int | None = None) -> list[Obj]:
        """The objects to create, named, labelled and annotated with the job id (none:
        as --dry-run and --test-only show them)."""
        target = Target(
            self.access.namespace,
            spec.partition,
            self.access.image,
            self.access.pod_annotations,
            self.access.switch_label,
        )
        record = known(spec) if job_id is not None else None
        return manifests(spec, target, job_id, record)

    def _dry_run(self, request: Mapping[str, Any]) -> str:
        import yaml

        return str(yaml.safe_dump_all(self._manifests(self._spec(request)), sort_keys=False))

    def _submit(self, request: Mapping[str, Any]) -> list[dict[str, Any]]:
        spec = self._spec(request)
        if spec.elastic is not None:
            spec = free_size(self.api, spec)
        if request.get("test_only"):
            unnamed = self._manifests(spec)[1]  # no id is taken for a test
            check_fits(self.api, spec.partition, unnamed)
            self.api.create(unnamed, dry_run=True)  # the API server and the webhooks judge it
            return [test_only_answer(spec, spec.partition, "(Kueue's default)", arrays=False)]
        job_id = next_job_id(self.api)
        config_map, job = self._manifests(spec, job_id)  # built once, named after the id
        check_fits(self.api, spec.partition, job)  # a refused job leaves its id unused
        self.api.create(config_map)
        try:
            created = self.api.create(job)
        except ApiError:
            self.api.delete("ConfigMap", config_map["metadata"]["name"])
            raise
        owner = {
            "apiVersion": job["apiVersion"],
            "kind": job["kind"],
            "name": created["metadata"]["name"],
            "uid": created["metadata"]["uid"],
        }
        self.api.merge_patch(  # the script goes when the job is deleted
            "ConfigMap", config_map["metadata"]["name"], {"metadata": {"ownerReferences": [owner]}}
        )
        return self._records(job_id) or [records.job_record(created, None, [], time.time())]

    # --- reading -------------------------------------------------------------------------

    def _objects(self, job_id: int | None) -> list[Obj]:
        """Podium's job objects (Jobs not made by a JobSet, and JobSets): every one, or
        job `job_id`'s."""
        selector = {records.JOB_ID_LABEL: None if job_id is None else str(job_id)}
        jobs = [
            j
            for j in self.api.objects("Job", labels=selector)
            if not any(
                o.get("kind") == "JobSet" for o in j["metadata"].get("ownerReferences") or []
            )
        ]
        return jobs + self.api.objects("JobSet", labels=selector)

    def _records(self, job_id: int | None = None) -> list[dict[str, Any]]:
        """The records of every Podium job in the namespace, or of job `job_id` alone
        (read by label, so one job costs what one job has, not the namespace)."""
        objects = self._objects(job_id)
        if job_id is not None and not objects:
            return []
        found = (
            self.api.objects("Workload", labels={WORKLOAD_JOB_UID: objects[0]["metadata"]["uid"]})
            if job_id is not None
            else self.api.objects("Workload")
        )
        workloads = {
            o.get("uid"): w for w in found for o in w["metadata"].get("ownerReferences") or []
        }
        pod_labels = {JOB_LABEL: None} if job_id is None else {records.JOB_ID_LABEL: str(job_id)}
        pods: dict[str, list[Obj]] = {}
        for pod in self.api.objects("Pod", labels=pod_labels):
            pods.setdefault(pod["metadata"]["labels"][JOB_LABEL], []).append(pod)
        now = time.time()
        return [
            records.job_record(
                o, workloads.get(o["metadata"]["uid"]), pods.get(o["metadata"]["name"], []), now
            )
            for o in objects
        ]

    def _jobs(self, which: JobFilter) -> list[dict[str, Any]]:
        return which.pick(self._records())

    def _job(self, job_id: int, task: int | None) -> dict[str, Any]:
        if task is not None:
            raise Unsupported("job arrays are not submitted to Kubernetes by Podium yet")
        found = self._records(job_id)
        if not found:
            raise ApiError(f"no job {job_id} in namespace {self.access.namespace}", 404)
        return found[0]

    def _acct(self, which: JobFilter) -> list[dict[str, Any]]:
        jobs = [
            r for r in self._records() if r["start_epoch"] is not None or r["state"] != "PENDING"
        ]
        jobs = which.replace(finished=True).pick(jobs)
        return which.within(jobs, time.time())

    def log_lines(self, job_id: int, stderr: bool, follow: bool) -> Iterator[str] | None:
        """The job's first pod's log (rank 0, as `kubectl logs job/NAME` picks): a
        container's log holds its stdout and stderr together."""
        if stderr:
            raise Unsupported(
                "a pod's log holds stdout and stderr together on the kubernetes backend: drop --err"
            )
        record = self._job(job_id, None)
        if not record["pods"]:
            raise SpecError(f"job {job_id} has no pod yet ({record['reason']})")
        return self.api.log(record["pods"][0], follow=follow)

    # --- control -------------------------------------------------------------------------

    def _control(self, action: Action, selection: Selection) -> list[int]:
        if selection.tasks:
            raise Unsupported("job arrays are not submitted to Kubernetes by Podium yet")
        records_now = self._records()
        ids = list(selection.job_ids)
        if action == "cancel" and not ids:
            which = JobFilter(states=selection.states, user=selection.user, name=selection.name)
            ids = [j["job_id"] for j in which.pick(records_now)]
        by_id = {r["job_id"]: r for r in records_now}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise ApiError(f"no job {missing[0]} in namespace {self.access.namespace}", 404)
        who = this_process()
        for job_id in ids:
            record = by_id[job_id]
            if record["user"] != who.name and not who.is_admin:
                raise ApiError(
                    f"job {job_id} is {record['user']}'s: only its owner or an administrator "
                    f"may {action} it",
                    403,
                )
            getattr(self, f"_{action}_one")(record)
        return ids

    def _workload(self, record: dict[str, Any], wait_s: float = 10.0) -> str:
        """The name of the job's Workload (Kueue makes it within moments of the job)."""
        deadline = time.monotonic() + wait_s
        while True:
            kueue = record.get("kueue") or {}
            if kueue.get("workload"):
                return str(kueue["workload"])
            if time.monotonic() > deadline:
                raise ApiError(f"job {record['job_id']}: Kueue made no Workload for it", 504)
            time.sleep(0.2)
            record = self._job(record["job_id"], None)

    def _activate(self, record: dict[str, Any], active: bool) -> None:
        self.api.merge_patch("Workload", self._workload(record), {"spec": {"active": active}})

    def _cancel_one(self, record: dict[str, Any]) -> None:
        if record["state"] not in ACTIVE:
            return
        stamp = {records.CANCELLED_ANNOTATION: f"{time.time():.3f}"}
        if record["start_epoch"] is not None:  # Kueue forgets the admission once deactivated
            stamp[records.STARTED_ANNOTATION] = f"{record['start_epoch']:.3f}"
        self.api.merge_patch(
            record["kind"], record["k8s_name"], {"metadata": {"annotations": stamp}}
        )
        self._activate(record, False)

    def _hold_one(self, record: dict[str, Any]) -> None:
        if record["state"] != "PENDING":
            raise ApiError(
                f"job {record['job_id']} is {record['state']}: only pending jobs "
                "can be held (scancel or requeue it)",
                400,
            )
        self._activate(record, False)

    def _release_one(self, record: dict[str, Any]) -> None:
        if record["held"]:
            self._activate(record, True)

    def _requeue_one(self, record: dict[str, Any]) -> None:
        if record["state"] != "RUNNING":
            raise ApiError(
                f"job {record['job_id']} is {record['state']}: only running jobs can be requeued",
                400,
            )
        count = {records.RESTARTS_ANNOTATION: str(record["restart_count"] + 1)}
        self.api.merge_patch(
            record["kind"], record["k8s_name"], {"metadata": {"annotations": count}}
        )
        self._activate(record, False)
        self._activate(record, True)

    def _send_signal(self, selection: Selection, sig: int, scope: str) -> list[int]:
        raise Unsupported(
            "signals are not available on the kubernetes backend: Kubernetes sends SIGTERM "
            "only when it stops a pod (podium cancel)"
        )

    def _set_time_limit(self, job_id: int, seconds: int | None) -> dict[str, Any]:
        raise Unsupported(
            "time limits are not available on the kubernetes backend once submitted: a "
            "Job's activeDeadlineSeconds is fixed at its creation"
        )

    def _set_nice(self, job_id: int, nice: int) -> dict[str, Any]:
        raise Unsupported(
            "nice values are not available on the kubernetes backend: Kueue orders "
            "workloads by their WorkloadPriorityClass, fixed at submission (--qos)"
        )

    # --- nodes ---------------------------------------------------------------------------

    def _nodes(self) -> list[dict[str, Any]]:
        pods = [
            p
            for p in self.api.objects("Pod")
            if (p.get("status") or {}).get("phase") in ("Pending", "Running")
            and (p.get("spec") or {}).get("nodeName")
        ]
        jobs = {
            p["metadata"]["name"]: int(p["metadata"]["labels"][records.JOB_ID_LABEL])
            for p in pods
            if str((p["metadata"].get("labels") or {}).get(records.JOB_ID_LABEL, "")).isdigit()
        }
        return [
            records.node_record(
                n, [p for p in pods if p["spec"]["nodeName"] == n["metadata"]["name"]], jobs
            )
            for n in self.api.objects("Node")
        ]

    def _node(self, node: str) -> dict[str, Any]:
        every = self._nodes()
        found = [n for n in every if n["node"] == node]
        if not found:
            raise _no_node(node, [n["node"] for n in every])
        return found[0]

    def _node_object(self, node: str) -> Obj:
        """The Node itself (ApiError 404 naming the nodes there are when it is not)."""
        current = self.api.get("Node", node)
        if current is None:
            raise _no_node(node, [n["metadata"]["name"] for n in self.api.objects("Node")])
        return current

    def _drain(self, node: str, reason: str) -> dict[str, Any]:
        self._node_object(node)
        patch = {
            "spec": {"unschedulable": True},
            "metadata": {"annotations": {records.DRAIN_ANNOTATION: reason}},
        }
        self.api.merge_patch("Node", node, patch)
        return self._node(node)

    def _resume(self, node: str, gpu: int | None) -> dict[str, Any]:
        """Uncordon the node and lift Podium's fence (its health label and taint), as
        an administrator's `scontrol update state=resume` does on Slurm."""
        current = self._node_object(node)
        taints = [
            t for t in (current.get("spec") or {}).get("taints") or []
            if t.get("key") != HEALTH_LABEL
        ]  # fmt: skip
        labels = (current.get("metadata") or {}).get("labels") or {}
        patch: dict[str, Any] = {
            "spec": {"unschedulable": None, "taints": taints or None},
            "metadata": {"annotations": {records.DRAIN_ANNOTATION: None}},
        }
        if HEALTH_LABEL in labels:
            patch["metadata"]["labels"] = {HEALTH_LABEL: "Schedulable"}
        self.api.merge_patch("Node", node, patch)
        return self._node(node)

    def _ping(self) -> dict[str, Any]:
        queue = self.api.get("LocalQueue", self.access.local_queue)
        return engine_ping(
            "kubernetes", self.config.cluster_name, this_process(),
            namespace=self.access.namespace,
            local_queue=self.access.local_queue if queue else None,
        )  # fmt: skip


def _no_node(node: str, names: list[str]) -> ApiError:
    return ApiError(f"no node {node!r}; nodes: {', '.join(sorted(names))}", 404)
