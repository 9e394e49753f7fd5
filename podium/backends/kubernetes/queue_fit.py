"""Refuse, before anything is created, a job Kueue could never admit: its LocalQueue is
missing, its ClusterQueue is missing or does not cover a resource it asks for, it asks
for more than the ClusterQueue could ever give (nominal quota plus what it may borrow
from its cohort), or one of its pods is larger than any node.

Kueue itself would accept such a Job and leave it pending for ever ("couldn't assign
flavors ... insufficient quota"); Slurm refuses the same at sbatch time, and so does
Podium.
"""

from __future__ import annotations

from podium.backends.kubernetes.engine_api import KubeApi, Obj
from podium.backends.kubernetes.parse import quantity
from podium.errors import ApiError, Unsatisfiable


def pod_requests(job: Obj) -> tuple[dict[str, float], int]:
    """The requests of one pod of a Job or JobSet manifest, and how many pods it has."""
    spec = job["spec"]
    if job["kind"] == "JobSet":
        replicated = spec["replicatedJobs"][0]
        spec = replicated["template"]["spec"]
        count = int(replicated.get("replicas", 1)) * int(spec.get("parallelism", 1))
    else:
        count = int(spec.get("parallelism", 1))
    requests: dict[str, float] = {}
    for container in spec["template"]["spec"]["containers"]:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            requests[name] = requests.get(name, 0.0) + quantity(value)
    return requests, count


def check_fits(api: KubeApi, local_queue: str, job: Obj) -> None:
    """Raise Unsatisfiable (one line, what would be right) when Kueue could never admit
    `job` from `local_queue`."""
    queue = api.get("LocalQueue", local_queue)
    if queue is None:
        names = sorted(q["metadata"]["name"] for q in api.objects("LocalQueue"))
        raise Unsatisfiable(
            f"--partition={local_queue}: no LocalQueue {local_queue!r} in namespace "
            f"{api.namespace}; local queues there: {', '.join(names) or 'none'}"
        )
    cq_name = str(queue["spec"]["clusterQueue"])
    every = {q["metadata"]["name"]: q for q in api.objects("ClusterQueue")}
    cluster_queue = every.get(cq_name)
    if cluster_queue is None:
        raise Unsatisfiable(
            f"LocalQueue {local_queue} points at ClusterQueue {cq_name}, which does not exist: "
            "ask the cluster's administrator"
        )
    per_pod, pods = pod_requests(job)
    capacity = _capacity(cluster_queue, every)
    for resource, amount in per_pod.items():
        total = amount * pods
        if resource not in capacity:
            covered = ", ".join(sorted(capacity)) or "nothing"
            raise Unsatisfiable(
                f"ClusterQueue {cq_name} has no quota for {resource} (it covers {covered}): "
                "ask for what it covers, or another --partition"
            )
        if total > capacity[resource] + 1e-9:
            raise Unsatisfiable(
                f"the job asks for {_show(total, resource)} {resource} in all; ClusterQueue "
                f"{cq_name} can give at most {_show(capacity[resource], resource)} (its quota "
                "and what it may borrow): ask for less, or another --partition"
            )
    _fits_a_node(api, per_pod)


def _capacity(cluster_queue: Obj, every: dict[str, Obj]) -> dict[str, float]:
    """Per resource, the most one workload may get: the largest flavor's nominal quota
    plus its borrowing limit (no limit: what the cohort's other queues may lend)."""
    cohort = cluster_queue["spec"].get("cohortName") or cluster_queue["spec"].get("cohort")
    lenders = [
        q
        for n, q in every.items()
        if cohort
        and n != cluster_queue["metadata"]["name"]
        and (q["spec"].get("cohortName") or q["spec"].get("cohort")) == cohort
    ]
    best: dict[str, float] = {}
    for group in cluster_queue["spec"].get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                nominal = quantity(res.get("nominalQuota", 0))
                if "borrowingLimit" in res:
                    borrow = quantity(res["borrowingLimit"])
                else:
                    borrow = sum(_lendable(q, flavor["name"], res["name"]) for q in lenders)
                best[res["name"]] = max(best.get(res["name"], 0.0), nominal + borrow)
    return best


def _lendable(queue: Obj, flavor: str, resource: str) -> float:
    for group in queue["spec"].get("resourceGroups") or []:
        for f in group.get("flavors") or []:
            if f["name"] != flavor:
                continue
            for res in f.get("resources") or []:
                if res["name"] == resource:
                    nominal = quantity(res.get("nominalQuota", 0))
                    return min(nominal, quantity(res.get("lendingLimit", nominal)))
    return 0.0


def _fits_a_node(api: KubeApi, per_pod: dict[str, float]) -> None:
    try:
        nodes = api.objects("Node")
    except ApiError as exc:
        if exc.status == 403:  # a user who may not list nodes: Kueue and the scheduler judge
            return
        raise
    if not nodes:
        return
    for resource, amount in per_pod.items():
        largest = max(
            quantity(((n.get("status") or {}).get("allocatable") or {}).get(resource, 0))
            for n in nodes
        )
        if amount > largest + 1e-9:
            raise Unsatisfiable(
                f"each pod asks for {_show(amount, resource)} {resource}; the largest node has "
                f"{_show(largest, resource)}: ask for less per node (--gpus-per-node, "
                "--cpus-per-task, --mem) and more nodes"
            )


def _show(value: float, resource: str) -> str:
    if resource == "memory":
        return f"{value / 2**30:.0f}Gi"
    return f"{value:g}"
