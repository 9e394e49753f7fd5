"""The elastic controller on Kubernetes (`podium k8s elastic`): each pass, every elastic
JobSet Kueue has admitted is shrunk for a waiting workload whose priority class may
preempt its QoS, or grown into its ClusterQueue's unused quota, by the rules of the
embedded cluster and the Slurm keeper:

- **Shrink** for the highest-priority waiting workload of the same ClusterQueue whose
  WorkloadPriorityClass is a QoS that the cluster config lets preempt the job's
  (`qos[].preempt`), by the replicas its GPUs need beyond the unused quota; never below
  MIN, and nothing when that would not be enough.
- **Grow** when nothing waits in the ClusterQueue, the unused quota holds at least one
  more replica, and the job has run `elastic.grow_delay` at its size.
- **A resize** is the job's next generation (`elastic_jobset.next_generation`): the old
  JobSet deleted (its pods get SIGTERM and the resize grace to save), the new one
  created at the new size; Kueue admits it within the quota, so the ClusterQueue's
  usage never exceeds it.

One resize a ClusterQueue a pass: the next pass sees what it changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from podium.api.elastic_sizes import elastic_sizes, largest_fitting
from podium.backends.kubernetes.cluster_queues import GPU, gpu_room
from podium.backends.kubernetes.elastic_jobset import (
    bounds,
    next_generation,
    size_of,
)
from podium.backends.kubernetes.engine_api import KubeApi, Obj
from podium.backends.kubernetes.parse import condition, epoch, quantity
from podium.backends.kubernetes.queue_fit import pod_requests
from podium.backends.kubernetes.translate import QUEUE_LABEL, dns_label
from podium.errors import ApiError
from podium.jobspec.job import JobSpec


def admitted(workload: Obj) -> bool:
    found = condition(workload, "QuotaReserved")
    return found is not None and found.get("status") == "True"


def finished(workload: Obj) -> bool:
    found = condition(workload, "Finished")
    return found is not None and found.get("status") == "True"


def workload_gpus(workload: Obj) -> float:
    """The GPUs a workload asks for, all pod sets together."""
    total = 0.0
    for podset in (workload.get("spec") or {}).get("podSets") or []:
        for container in podset["template"]["spec"].get("containers") or []:
            asked = ((container.get("resources") or {}).get("requests") or {}).get(GPU, 0)
            total += quantity(asked) * int(podset.get("count", 1))
    return total


def priority_class(workload: Obj) -> str:
    ref = (workload.get("spec") or {}).get("priorityClassRef") or {}
    return str(ref.get("name") or "")


@dataclass
class ElasticControl:
    """Passes over one namespace's elastic JobSets. `shrinks_for(qos)`: the priority
    class names that may shrink a job of that QoS."""

    api: KubeApi
    shrinks_for: Callable[[str], set[str]]
    grow_delay_s: float

    def look(self, now: float) -> list[str]:
        """One pass; a line for each resize made, and for each elastic JobSet left as
        it is because it could not be read or resized."""
        jobsets = [j for j in self.api.objects("JobSet") if bounds(j) is not None]
        if not jobsets:
            return []
        workloads = self.api.objects("Workload")
        owned = {o.get("uid"): w for w in workloads
                 for o in w["metadata"].get("ownerReferences") or []}  # fmt: skip
        queues = cluster_queue_of(self.api)
        rooms = {q["metadata"]["name"]: room(q, workloads, queues)
                 for q in self.api.objects("ClusterQueue")}  # fmt: skip
        done: list[str] = []
        busy: set[str] = set()
        for jobset in jobsets:
            mine = owned.get(jobset["metadata"]["uid"])
            cq = queues.get(jobset["metadata"]["labels"].get(QUEUE_LABEL, ""), "")
            if mine is None or not admitted(mine) or finished(mine) or cq in busy:
                continue
            waiting = [w for w in workloads if queues.get(w["spec"].get("queueName")) == cq
                       and not admitted(w) and not finished(w)
                       and w["spec"].get("active", True)]  # fmt: skip
            name = jobset["metadata"]["name"]
            try:  # a JobSet's annotations are its user's: one odd job stops no other
                qos = priority_class(mine)  # Kueue's, from the submission: not the user's to edit
                change = self.change(jobset, waiting, rooms.get(cq, (0, 0)), now, qos)
                if change is not None:
                    busy.add(cq)
                    done.append(self.resize(jobset, *change, now))
            except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
                done.append(f"{name}: left as it is: unreadable ({type(exc).__name__}: {exc})")
            except ApiError as exc:
                done.append(f"{name}: resize refused by the API server: {exc}")
        return done

    def change(
        self, jobset: Obj, waiting: list[Obj], room: tuple[int, int], now: float, qos: str
    ) -> tuple[int, str] | None:
        """The resize due for `jobset` (its workload's priority class `qos`): (new size,
        why), or None. What decides is what its user cannot edit: the QoS as Kueue
        took it into the Workload, and the time its generation was made as the API
        server stamped it (creationTimestamp), not the JobSet's annotations."""
        low, high, step = bounds(jobset) or (1, 1, 1)
        allowed, size = elastic_sizes(low, high, step), size_of(jobset)
        per_pod = pod_requests(jobset)[0].get(GPU, 0.0)
        if per_pod <= 0:
            return None
        free = room[0] - room[1]
        classes = self.shrinks_for(qos)
        for other in sorted(waiting, key=lambda w: -int(w["spec"].get("priority") or 0)):
            if priority_class(other) not in classes:
                continue
            need = workload_gpus(other) - free
            if need <= 0:
                continue
            to = largest_fitting(allowed, size - math.ceil(need / per_pod))
            if to is not None and to < size:
                owner = (other["metadata"].get("ownerReferences") or [{}])[0]
                return to, f"shrink {size}->{to} for {owner.get('kind')} {owner.get('name')}"
        sized_at = _created(jobset)  # each generation is a new JobSet
        if waiting or now - sized_at < self.grow_delay_s or free < per_pod:
            return None
        to = largest_fitting(allowed, size + int(free // per_pod))
        if to is None or to <= size:
            return None
        return to, f"grow {size}->{to} into unused quota"

    def resize(self, jobset: Obj, to: int, cause: str, now: float) -> str:
        """The next generation at `to`: the old JobSet deleted, then the new made."""
        name = jobset["metadata"]["name"]
        script = self.api.get("ConfigMap", f"{name}-script") or {
            "metadata": {"labels": {}}, "data": {}}  # fmt: skip
        config_map, new = next_generation(jobset, script, to, cause, now)
        self.api.create(config_map)
        self.api.delete("JobSet", name)
        created = self.api.create(new)
        meta = created["metadata"]
        owner = {"apiVersion": new["apiVersion"], "kind": "JobSet", "name": meta["name"],
                 "uid": meta["uid"]}  # fmt: skip
        self.api.merge_patch("ConfigMap", config_map["metadata"]["name"],
                             {"metadata": {"ownerReferences": [owner]}})  # fmt: skip
        return f"{name}: {cause} (now {new['metadata']['name']})"


def cluster_queue_of(api: KubeApi) -> dict[str, str]:
    """Each LocalQueue of the namespace -> the ClusterQueue it points at."""
    return {str(q["metadata"]["name"]): str(q["spec"]["clusterQueue"])
            for q in api.objects("LocalQueue")}  # fmt: skip


def room(cq: Obj, workloads: list[Obj], queues: dict[str, str]) -> tuple[int, int]:
    """A ClusterQueue's nominal GPU quota and the GPUs in use: the larger of Kueue's
    status (which Kueue writes a moment after it admits) and the admitted workloads
    of this namespace in it."""
    nominal, used = gpu_room(cq)
    name = cq["metadata"]["name"]
    mine = sum(workload_gpus(w) for w in workloads
               if queues.get(w["spec"].get("queueName")) == name and admitted(w)
               and not finished(w))  # fmt: skip
    return nominal, max(used, int(mine))


def free_size(api: KubeApi, spec: JobSpec) -> JobSpec:
    """An elastic job sized to start now: the largest of its sizes that its
    ClusterQueue's unused GPU quota holds (MIN when none: it waits)."""
    elastic = spec.elastic
    if elastic is None or not elastic.replica_gpus:
        return spec
    queues = cluster_queue_of(api)
    cq = api.get("ClusterQueue", queues[spec.partition]) if spec.partition in queues else None
    nominal, used = room(cq, api.objects("Workload"), queues) if cq else (0, 0)
    allowed = elastic.sizes()
    size = largest_fitting(allowed, (nominal - used) // elastic.replica_gpus) or elastic.min
    return spec.model_copy(update={
        "nodes": size, "ntasks": size, "gpus": size * elastic.replica_gpus,
        "cpus": size * elastic.replica_cpus,
    })  # fmt: skip


def _created(obj: Obj) -> float:
    return epoch(obj["metadata"].get("creationTimestamp")) or 0.0


def preemptors(qos_table: list[Any]) -> Callable[[str], set[str]]:
    """qos (its name, or its priority class: the name made DNS-safe) -> the priority
    class names that may preempt it."""

    def classes(qos: str) -> set[str]:
        return {
            dns_label(q.name)
            for q in qos_table
            if qos and (qos in q.preempt or qos in {dns_label(p) for p in q.preempt})
        }

    return classes


__all__ = ["ElasticControl", "free_size", "preemptors"]
