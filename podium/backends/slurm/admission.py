"""The Slurm backend's admission: Slurm owns nodes, partitions, QoS and accounts.

`podium.jobspec.build` reads a submission as sbatch would; Slurm checks most of it again
itself, so this module only keeps what reaches sbatch well-formed: names as Slurm
writes them (the empty string is Slurm's default), one node count, and the default
partition's time limit from the cluster config when the job gives none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

from podium.backends.slurm.elastic_slurm import MEMBER_TAG
from podium.errors import SpecError
from podium.jobspec.build import Draft, one_node_count

_SLURM_NAME_RE = re.compile(r"^[A-Za-z0-9_.@,-]+$")


_ONE_CLUSTER = (
    "Podium follows jobs on the one Slurm cluster its config names: submit with that "
    "cluster's config instead"
)
SLURM_REFUSES: Mapping[str, str] = {
    "uid": "sbatch runs as the submitting user, and so does the job",
    "gid": "sbatch runs with the submitting user's groups, and so does the job",
    "clusters": _ONE_CLUSTER,
    "cluster-constraint": _ONE_CLUSTER,
    "container": "the Slurm backend runs containers through Pyxis: use --container-image",
    "container-id": "the Slurm backend runs containers through Pyxis: use --container-image",
}


class SlurmAdmission:
    """The Slurm backend's rules (`podium.jobspec.build.Admission`). Every engine-only
    option (`podium.jobspec.options.SLURM_ONLY`) but those in REFUSES goes to sbatch as
    given, and Slurm judges it."""

    REFUSES: ClassVar[Mapping[str, str]] = SLURM_REFUSES

    def admit(self, draft: Draft) -> None:
        """Keep names as given; refuse what sbatch's translation cannot say."""
        out = draft.fields
        one_node_count(draft)
        if out.get("elastic") is not None:
            _elastic_nodes(draft)
        if out.get("spare_nodes"):
            _spare_nodes(draft)
        for key in ("partition", "qos", "account"):
            out[key] = draft.options.text(key) or ""
            if out[key] and not _SLURM_NAME_RE.match(out[key]):
                raise SpecError(
                    f"--{key}={out[key]!r}: expected a Slurm name (letters, digits, _.-)"
                )
        out.setdefault("time_limit_s", draft.config.default_partition.default_time_s)
        comment = draft.options.text("comment") or ""
        if comment.startswith(MEMBER_TAG):
            raise SpecError(
                f"--comment={comment[:60]!r}: {MEMBER_TAG!r} marks the members an elastic "
                "job's keeper starts (podium queue folds them into their job); give "
                "another comment"
            )


def _spare_nodes(draft: Draft) -> None:
    """--spares=S on Slurm: S whole nodes beyond the job's N, one replica (one task) per
    node, so that a lost node's replica can take a spare's place as a step of its own
    (`podium.backends.slurm.replica_keeper`)."""
    out = draft.fields
    given = draft.given("spares")
    where = f"{given.where}: --spares" if given is not None else "--spares"
    nodes = int(out.get("nodes") or 1)
    per_node = out.get("ntasks_per_node")
    if (per_node not in (None, 1)) or int(out.get("ntasks") or nodes) not in (1, nodes):
        raise SpecError(
            f"{where}: a job with spare nodes runs one replica (one task) per node: give "
            f"-N {nodes} --ntasks-per-node=1"
        )
    if out.get("gpus") and out.get("gpus_per_node") is None and out.get("gpus_per_task") is None:
        raise SpecError(
            f"{where}: a spare node takes a lost node's GPUs: give GPUs per node "
            "(--gpus-per-node) rather than --gpus"
        )
    if out.get("array") is not None:
        raise SpecError(f"{where}: does not go with --array: give each job its own spares")
    out["ntasks"], out["ntasks_per_node"] = nodes, 1


def _elastic_nodes(draft: Draft) -> None:
    """--elastic=MIN:MAX on Slurm: one replica per node, each node one Slurm job (the
    first runs rank 0 and the elastic keeper, the others are its members,
    `podium.backends.slurm.elastic_keeper`). The job as submitted is its first node,
    whole (--exclusive: a replica given up is a node freed): one task with the
    replica's GPUs, CPUs and memory."""
    out = draft.fields
    spec = out["elastic"]
    given = draft.given("elastic")
    where = f"{given.where}: --elastic" if given is not None else "--elastic"
    if spec.spares:
        raise SpecError(
            f"{where}: spare replicas of an elastic job are the embedded cluster's; on "
            "Slurm give --spares=S without --elastic (whole spare nodes)"
        )
    if out.get("torchft"):
        raise SpecError(
            f"{where}: on Slurm a torchft job's replica groups are whole nodes under the "
            "replica keeper: give -N N --spares=S (and --torchft) instead of --elastic"
        )
    if draft.given("switches") is not None:
        raise SpecError(
            f"{where}: each replica is a Slurm job of its own, which --switches cannot "
            "bound together: drop --switches"
        )
    out.update(
        nodes=1, ntasks=1, ntasks_per_node=1, gpus=spec.replica_gpus, exclusive="node",
        gpus_per_node=spec.replica_gpus or None, gpus_per_task=None,
        cpus=spec.replica_cpus, mem_mb=spec.replica_mem_mb or out["mem_mb"],
    )  # fmt: skip
