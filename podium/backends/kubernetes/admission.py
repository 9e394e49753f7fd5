"""The Kubernetes backend's admission: what Kueue and the pods of a Job or JobSet can run.

`podium.jobspec.build` reads a submission as sbatch would; this module maps Slurm's
words onto Kueue's and refuses what has no Kubernetes meaning, before anything is
created:
- `--partition` names the LocalQueue (default: `kubernetes.local_queue`), a DNS label
  as Kubernetes names are; `--qos` the WorkloadPriorityClass of that name made DNS-safe
  (as `podium k8s render teams` names them: High_Prio -> high-prio).
- One node count (no ranges): each node is one pod.
- The image must be a well-formed reference (`--container-image`, else
  `kubernetes.image`); a job without one is refused by the manifests.
- `--exclusive` is recorded with a warning: pods get what they request, and Kubernetes
  reserves no whole node for them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

from podium.api.containers import is_image_path
from podium.api.timefmt import parse_duration
from podium.errors import SpecError
from podium.jobspec.build import Draft, one_node_count
from podium.jobspec.elastic_opts import refuse_spare_nodes
from podium.jobspec.options import SLURM_ONLY
from podium.run.containers.images import reference

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_ACCOUNT = re.compile(r"^[A-Za-z0-9_.@-]+$")

_OWN: Mapping[str, str] = {
    "uid": "pods run as their image's user (securityContext), not as another Unix user",
    "gid": "pods run with their image's groups (securityContext)",
    "clusters": "Podium follows jobs on the one Kubernetes cluster its kubeconfig names",
    "cluster-constraint": "Podium follows jobs on the one Kubernetes cluster its kubeconfig names",
    "container": "pods run images: use --container-image",
    "container-id": "pods run images: use --container-image",
    "reservation": "Kueue has no advance reservations: ask for a LocalQueue (--partition)",
    "priority": "priorities come from Kueue's WorkloadPriorityClasses: use --qos",
    "tmp": "local scratch space is not requested yet (ephemeral-storage)",
}
_GENERIC = "Kubernetes has no such setting for a pod: the option is Slurm's alone"
# --switches is Kueue's topology-aware scheduling (podium.backends.kubernetes.kueue_topology).
_KUEUE_SPEAKS = {"switches"}
KUBERNETES_REFUSES: Mapping[str, str] = {
    name: _OWN.get(name, _GENERIC) for name in SLURM_ONLY if name not in _KUEUE_SPEAKS
}
_SWITCHES = re.compile(r"^(\d+)(?:@(.+))?$")


class KubernetesAdmission:
    """The Kubernetes backend's rules (`podium.jobspec.build.Admission`): every
    engine-only option is refused with the reason in REFUSES."""

    REFUSES: ClassVar[Mapping[str, str]] = KUBERNETES_REFUSES

    def __init__(self, local_queue: str, switch_label: str | None = None) -> None:
        self.local_queue = local_queue
        self.switch_label = switch_label

    def admit(self, draft: Draft) -> None:
        """Names as Kueue wants them, one node count, a well-formed image."""
        out = draft.fields
        one_node_count(draft)
        if out.get("torchft") and (given := draft.given("torchft")) is not None:
            raise SpecError(
                f"{given.where}: --torchft: not on Kubernetes yet: Podium does not run the "
                "lighthouse or restart one replica group's pod on its own there "
                "(docs/resiliency.md#torchft); drop --torchft, or submit to the embedded "
                "cluster or Slurm"
            )
        refuse_spare_nodes(out, draft.given("spares"))
        switches = draft.given("switches")
        if switches is not None:
            self._switches(str(switches.value), switches.where)
        if out.get("elastic") is not None:
            _elastic_pods(draft)
        queue = draft.options.text("partition") or self.local_queue
        if not DNS_LABEL.match(queue):
            raise SpecError(
                f"--partition={queue!r}: expected a LocalQueue's name: lower-case letters, "
                "digits and '-', at most 63"
            )
        qos = draft.options.text("qos") or ""
        if qos and not _ACCOUNT.match(qos):  # its WorkloadPriorityClass: made DNS-safe
            raise SpecError(f"--qos={qos!r}: expected a QoS name (letters, digits, _.@-)")
        out["partition"], out["qos"] = queue, qos
        out["account"] = draft.options.text("account") or ""
        if out["account"] and not _ACCOUNT.match(out["account"]):
            raise SpecError(f"--account={out['account']!r}: expected letters, digits, _.@-")
        out.setdefault("time_limit_s", draft.config.default_partition.default_time_s)
        image = draft.given("container-image")
        if image is not None:
            out["container_image"] = pod_image(str(image.value), image.where)
        if out.get("exclusive", "none") != "none":
            draft.warnings.append(
                "--exclusive: recorded, not applied: each pod gets what it requests, and "
                "Kubernetes reserves no whole node for it"
            )

    def _switches(self, text: str, where: str) -> None:
        """--switches=1[@TIME]: one leaf switch, which Kueue's topology-aware
        scheduling gives on the lowest layer of the cluster's Topology."""
        match = _SWITCHES.match(text)
        if match is None or (match[2] is not None and not _is_duration(match[2])):
            raise SpecError(
                f"{where}: --switches={text!r}: expected COUNT[@TIME], e.g. 1 or 1@10:00"
            )
        if int(match[1]) != 1:
            raise SpecError(
                f"{where}: --switches={text}: Kueue keeps a pod set within one topology "
                "domain or places it freely: ask for --switches=1 (one leaf switch)"
            )
        if self.switch_label is None:
            raise SpecError(
                f"{where}: --switches: this cluster has no network topology: an admin "
                "runs `podium k8s apply topology DEFINITION` and sets "
                "kubernetes.switch_label in the cluster config"
            )


def _elastic_pods(draft: Draft) -> None:
    """--elastic=MIN:MAX on Kubernetes: one pod per replica, with the replica's GPUs,
    CPUs and memory, in a JobSet resized by its next generation
    (`podium.backends.kubernetes.elastic_jobset`); submitted at MIN, sized at submission
    to what the ClusterQueue has unused."""
    out = draft.fields
    spec = out["elastic"]
    given = draft.given("elastic")
    where = f"{given.where}: --elastic" if given is not None else "--elastic"
    if spec.spares:
        raise SpecError(
            f"{where}: spares are not available on Kubernetes yet: a JobSet gives a failed "
            "pod's rank only to a new pod (scheduled cold, or a restart of the whole set), "
            "and Podium does not yet keep a standby pod to take it (design: "
            "docs/kubernetes.md#spares); drop the spares and use --auto-resume, or submit "
            "to the embedded cluster or Slurm"
        )
    if not spec.replica_gpus:
        raise SpecError(
            f"{where}: Podium sizes elastic jobs on Kubernetes by the ClusterQueue's GPU "
            "quota: give --gpus-per-task"
        )
    out.update(
        nodes=spec.min, ntasks=spec.min, ntasks_per_node=1, gpus=spec.min * spec.replica_gpus,
        gpus_per_node=spec.replica_gpus, gpus_per_task=None,
        cpus=spec.min * spec.replica_cpus, mem_mb=spec.replica_mem_mb or out["mem_mb"],
    )  # fmt: skip


def _is_duration(text: str) -> bool:
    """A finite time in one of Slurm's forms (1, 10:00, 1-0)."""
    try:
        return parse_duration(text) is not None
    except ValueError:
        return False


def pod_image(text: str, where: str = "command line") -> str:
    """An image as a pod names it (`registry/name:tag`): Enroot's `registry#name` and
    `docker://` are rewritten; local sources (dockerd://, podman://, archives, image
    files) and registry logins are refused, since the node's runtime pulls the image."""
    wrong = f"{where}: --container-image={text!r}: "
    if is_image_path(text) or text.startswith(
        ("dockerd://", "podman://", "docker-archive:", "oci:")
    ):
        raise SpecError(
            wrong + "a pod pulls its image from a registry: give a reference like "
            "nvcr.io/nvidia/pytorch:24.05-py3"
        )
    try:
        source = reference.parse(text)
    except reference.ImageError:
        raise SpecError(
            wrong + "expected an image reference like nvcr.io/nvidia/pytorch:24.05-py3"
        ) from None
    if source.user:
        raise SpecError(wrong + "registry logins come from the namespace's imagePullSecrets")
    plain = text.removeprefix("docker://")
    if "#" not in plain:
        return plain
    separator = "@" if source.reference.startswith("sha256:") else ":"
    return f"{source.registry}/{source.repository}{separator}{source.reference}"
