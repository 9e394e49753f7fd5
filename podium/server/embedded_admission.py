"""The embedded cluster's admission: what one node under Podium's own daemon can run.

`podium.jobspec.build` reads a submission as sbatch would; this module applies the
embedded cluster's rules to it: one node, its features, its partitions, QoS levels and
accounts (with who may use them), the partition's time limits, a whole node for
--exclusive, a mail transport for --mail-type, containers from image files, and a
fit on the node.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar

from podium.api.caller import Caller
from podium.api.containers import is_image_path
from podium.api.mig import is_mig_profile, model_for, profiles, several_slices_refusal
from podium.api.suggest import did_you_mean
from podium.config.cluster import ClusterConfig, GpuInventory, Partition
from podium.errors import SpecError, Unsatisfiable
from podium.jobspec.build import Draft
from podium.jobspec.elastic_opts import refuse_spare_nodes
from podium.jobspec.values import option_error, positive_int
from podium.run.containers.images import reference

_ACCOUNT_RE = re.compile(r"^[A-Za-z0-9_.@-]+$")

_ONE_NODE = "the embedded cluster is a single node"
_NO_TOPOLOGY = "CPU topology is not modelled: CPUs are allocated by count"
_NO_BURST_BUFFER = "the embedded cluster has no burst buffers"
_NO_OCI = "OCI bundles are not supported: use --container-image (Pyxis, backend: slurm)"
EMBEDDED_REFUSES: Mapping[str, str] = {
    "uid": "jobs run as the submitting user (connect as that user instead)",
    "gid": "jobs run with the submitting user's groups",
    "clusters": "the embedded cluster is one cluster (use backend: slurm for several)",
    "reservation": "the embedded cluster has no advance reservations",
    "licenses": "the embedded cluster tracks no licenses",
    "oversubscribe": "Podium never oversubscribes CPUs, GPUs or memory",
    "network": f"{_ONE_NODE}: there is no interconnect to configure",
    "switches": f"{_ONE_NODE}: there are no network switches to pick",
    "deadline": "deadlines are not enforced yet (use --time and --begin)",
    "burst-buffer": _NO_BURST_BUFFER,
    "bb": _NO_BURST_BUFFER,
    "bbf": _NO_BURST_BUFFER,
    "container": _NO_OCI,
    "container-id": _NO_OCI,
    "reboot": f"{_ONE_NODE}: it cannot be rebooted for one job",
    "cpu-freq": "CPU frequency control is not available on the embedded cluster",
    "gpu-freq": "GPU frequency control is not available on the embedded cluster",
    "power": "power management is not available on the embedded cluster",
    "distribution": "task distribution is not modelled: CPUs are allocated by count",
    "sockets-per-node": _NO_TOPOLOGY,
    "cores-per-socket": _NO_TOPOLOGY,
    "threads-per-core": _NO_TOPOLOGY,
    "core-spec": "core specialisation is not modelled: CPUs are allocated by count",
    "thread-spec": "core specialisation is not modelled: CPUs are allocated by count",
    "mem-bind": "NUMA memory binding is not done yet",
    "gpu-bind": "GPUs are bound per job through CUDA_VISIBLE_DEVICES (use --gpus-per-task)",
    "extra-node-info": _NO_TOPOLOGY,
    "tmp": "local scratch space is not tracked",
    "x11": "batch jobs have no X11 display",
    "get-user-env": "the environment comes from the submitting shell (see --export)",
    "export-file": "use --export with NAME=value pairs",
    "propagate": "resource limits are not propagated to jobs",
    "no-kill": f"{_ONE_NODE}: losing it always ends the job",
    "profile": "per-job profiling is not collected yet",
    "acctg-freq": "accounting is sampled by the daemon, not per job",
    "prefer": "node features are matched with --constraint",
    "cluster-constraint": "the embedded cluster is one cluster",
    "priority": "only an administrator may set a priority (use --nice or --qos)",
    "delay-boot": f"{_ONE_NODE}: it is never rebooted for a job",
    "mcs-label": "MCS labels are not supported",
    "spread-job": f"{_ONE_NODE}: a job cannot be spread",
    "use-min-nodes": f"{_ONE_NODE}: a job always uses one node",
    "resv-ports": "ports are given through MASTER_PORT",
    "ignore-pbs": "PBS directives are never read",
    "tres-per-task": "use --cpus-per-task and --gpus-per-task",
    "ntasks-per-gpu": "use --ntasks with --gpus-per-task",
    "ntasks-per-socket": _NO_TOPOLOGY,
    "sockets": _NO_TOPOLOGY,
}


class EmbeddedAdmission:
    """The embedded cluster's rules (`podium.jobspec.build.Admission`). It honours none of
    the engine-only options (`podium.jobspec.options.SLURM_ONLY`): each is refused with
    the reason in REFUSES."""

    REFUSES: ClassVar[Mapping[str, str]] = EMBEDDED_REFUSES

    def admit(self, draft: Draft) -> None:
        """Fill in the cluster's defaults; raise when this node cannot run the job."""
        _one_node(draft)
        refuse_spare_nodes(draft.fields, draft.given("spares"))
        out, node = draft.fields, draft.config.node
        if (g := draft.given("ntasks-per-core")) is not None:
            per_core = positive_int(g)
            if out["ntasks"] > node.cpus * per_core:
                raise Unsatisfiable(
                    f"{g.where}: --ntasks-per-core={per_core}: {out['ntasks']} tasks need "
                    f"more than the node's {node.cpus} cores"
                )
        if out["exclusive"] == "node":
            out["cpus"], out["mem_mb"] = node.cpus, node.memory_mb
        if out.get("mem_request") == ("mem", 0):  # sbatch's --mem=0: all of the node's
            out["mem_mb"] = node.memory_mb
        partition = _names(draft)
        _time_limit(draft, partition)
        _containers(draft)
        if out.get("mail_types") and not draft.config.mail_command:
            g = draft.given("mail-type")
            assert g is not None
            draft.warnings.append(
                f"{g.where}: --mail-type: this cluster has no mail transport, so its mail "
                "events are recorded (podium events), not sent"
            )
        check_fits(out, draft.config)


def _containers(draft: Draft) -> None:
    """An image reference is one the job can pull (podium.run.containers.images, at its start, as
    Pyxis does); what the embedded cluster's container runtime cannot do yet: reuse a
    named one without its image."""
    image = draft.given("container-image")
    if image is not None and not is_image_path(str(image.value)):
        try:
            reference.parse(str(image.value))
        except reference.ImageError as exc:
            raise SpecError(f"{image.where}: --container-image: {exc}") from None
    if image is None and (g := draft.given("container-name")) is not None:
        raise Unsatisfiable(
            f"{g.where}: --container-name: the embedded cluster needs the container's "
            "--container-image as well"
        )


def _one_node(draft: Draft) -> None:
    """One node, named by --nodelist if at all, not excluded, with the features asked."""
    out, node = draft.fields, draft.config.node
    if out["nodes"] != 1:
        g = draft.given("nodes")
        assert g is not None
        raise Unsatisfiable(
            f"{g.where}: --nodes={g.value}: the embedded cluster has 1 node "
            "(use backend: slurm for multi-node jobs)"
        )
    if (g := draft.given("nodelist")) is not None and set(out.pop("nodelist")) != {node.name}:
        raise Unsatisfiable(f"{g.where}: --nodelist={g.value}: the only node is {node.name!r}")
    if (g := draft.given("exclude")) is not None and node.name in out.pop("exclude"):
        raise Unsatisfiable(f"{g.where}: --exclude={g.value} excludes the only node {node.name!r}")
    if (g := draft.given("constraint")) is not None:
        if "|" in str(g.value) or "[" in str(g.value) or "(" in str(g.value):
            raise option_error(g, "only features joined with '&' are supported")
        wanted = [f for f in re.split(r"[&,]", str(g.value)) if f]
        missing = [f for f in wanted if f not in node.features]
        if missing:
            raise Unsatisfiable(
                f"{g.where}: --constraint: node {node.name} lacks feature(s) {missing} "
                f"(it has {node.features or 'none'})"
            )


def _time_limit(draft: Draft, partition: Partition) -> None:
    """The partition's default time limit, or the one given within its maximum."""
    out = draft.fields
    if "time_limit_s" not in out:
        out["time_limit_s"] = partition.default_time_s
        return
    cap, limit = partition.max_time_s, out["time_limit_s"]
    if cap is not None and (limit is None or limit > cap):
        g = draft.given("time")
        assert g is not None
        raise Unsatisfiable(
            f"{g.where}: --time={g.value} exceeds partition {partition.name}'s "
            f"max time {partition.max_time}"
        )


def _names(draft: Draft) -> Partition:
    """Partition, QoS and account checked against the cluster's config and what the
    caller may use; returns the job's partition."""
    config, who, out = draft.config, draft.who, draft.fields
    partition = config.default_partition
    if (g := draft.given("partition")) is not None:
        found = config.partition(str(g.value))
        if found is None:
            names = [p.name for p in config.partitions]
            raise option_error(
                g,
                f"no partition {g.value!r}{did_you_mean(str(g.value), names)}; "
                f"partitions: {', '.join(names)}",
            )
        partition = found
    out["partition"] = partition.name
    account = config.default_account(who.name)
    if (g := draft.given("account")) is not None:
        account = str(g.value)
        if not _ACCOUNT_RE.match(account):
            raise option_error(g, f"invalid account name {account!r}")
        names = [a.name for a in config.accounts]
        if names and account not in names:
            raise option_error(g, f"unknown account {account!r}{did_you_mean(account, names)}")
    entry = config.account(account)
    if entry is not None and not who.is_admin and not entry.open_to(who.name, who.groups):
        where = f"{g.where}: --account: " if g is not None else "default account: "
        raise SpecError(
            f"{where}user {who.name} may not charge account {account!r} "
            f"(InvalidAccount: see podium share for yours)"
        )
    if not who.is_admin:
        _team_member(config, account, who, f"{g.where}: --account: " if g is not None else "")
    if not who.is_admin and not config.may_charge(who.name, account):
        raise SpecError(
            f"{g.where if g is not None else 'default account'}: --account: user {who.name} "
            f"may charge only {', '.join(map(repr, config.own_accounts(who.name)))} (no accounts "
            "are configured; an administrator lists them in accounts[] with their users, "
            "or sets open_accounts: true to let anyone charge any)"
        )
    out["account"] = account
    qos = config.default_qos
    if (g := draft.given("qos")) is not None:
        if config.qos_level(str(g.value)) is None:
            names = [q.name for q in config.qos]
            raise option_error(
                g,
                f"no QoS {g.value!r}{did_you_mean(str(g.value), names)}; "
                f"QoS levels: {', '.join(names)}",
            )
        qos = str(g.value)
    level = config.qos_level(qos)
    if level is not None and not who.is_admin:
        where = f"{g.where}: --qos: " if g is not None else "default QoS: "
        if not level.open_to(who.name, who.groups):
            raise SpecError(
                f"{where}user {who.name} may not use QoS {qos!r} "
                "(InvalidQOS: see podium share for the QoS open to you)"
            )
        if entry is not None and entry.allow_qos and qos not in entry.allow_qos:
            raise SpecError(
                f"{where}account {account!r} allows only QoS {', '.join(entry.allow_qos)}, "
                f"not {qos!r}"
            )
    out["qos"] = qos
    return partition


def _team_member(config: ClusterConfig, account: str, who: Caller, where: str) -> None:
    """Raise SpecError when `account` is a team's and `who` may not charge it: a team's
    account counts for the users the team lists, and for those its `accounts` entry
    names (users or groups); an entry that names nobody opens it to nobody else (a
    team's quota is not anyone's for the asking)."""
    team = next((t for t in config.teams if account in t.accounts), None)
    if team is None or who.name in team.users:
        return
    entry = config.account(account)
    named = entry is not None and bool(entry.users or entry.allow_groups)
    if named and entry is not None and entry.open_to(who.name, who.groups):
        return
    raise SpecError(
        f"{where or 'default account: '}account {account!r} is team {team.name}'s and user "
        f"{who.name} is not one of its members: the team lists its users (teams[].users), "
        f"or accounts[] names who may charge {account!r} (users, allow_groups)"
    )


def check_fits(job: dict[str, Any], config: ClusterConfig) -> None:
    """Raise Unsatisfiable when a job of these sizes (JobSpec fields) can never run on
    the cluster's node, with the reason."""
    node = config.node
    if job["gpus"]:
        check_gpus(job["gpus"], job["gpu_type"], node.name, node.gpus)
        if is_mig_profile(job["gpu_type"] or ""):
            why = several_slices_refusal(job["gpu_type"], job["gpus"], job["ntasks"])
            if why is not None:
                raise Unsatisfiable(why)
    if job["cpus"] > node.cpus:
        raise Unsatisfiable(
            f"the job asks for {job['cpus']} CPUs but node {node.name} has {node.cpus}"
        )
    if job["mem_mb"] > node.memory_mb:
        raise Unsatisfiable(
            f"the job asks for {job['mem_mb']} MiB of memory but node {node.name} has "
            f"{node.memory_mb} MiB"
        )


def check_gpus(count: int, gpu_type: str | None, node: str, gpus: GpuInventory) -> None:
    """Raise Unsatisfiable when `count` GPUs of `gpu_type` (None: whole GPUs of any
    type) can never be had on the node: its whole GPUs, or its MIG slices by profile."""
    if gpu_type in ("mps", "shard"):
        check_share(count, gpu_type, node, gpus)
        return
    whole = gpus.count - len(gpus.mig) - len(gpus.sharing)
    slices = Counter(p for layout in gpus.mig.values() for p in layout)
    model = model_for(gpus.type, gpus.memory_mb or None)
    profile = profiles(model).get(gpu_type or "") if model else None
    if profile is not None:  # a MIG profile of the node's GPUs
        most = len(profile.starts) * (gpus.count - len(gpus.sharing))
        if count > most:
            raise Unsatisfiable(
                f"the job asks for {count} x {gpu_type} but node {node} can have at most "
                f"{most} ({len(profile.starts)} per GPU: {profile.rule()})"
            )
        return  # not in today's layout: it waits for an admin's (podium mig advise)
    if gpu_type is not None and gpu_type != gpus.type:
        known = f" (MIG profiles: {', '.join(profiles(model))})" if model else ""
        raise Unsatisfiable(
            f"the job asks for GPU type {gpu_type!r} but node {node} has {_gpu_kinds(gpus)}{known}"
        )
    if count > whole:
        if gpus.mig or gpus.sharing:
            if slices:
                first = min(slices, key=lambda p: (-slices[p], p))
                hint = f"ask for a slice by its profile, e.g. --gres=gpu:{first}:1"
            else:
                hint = "ask for a share, e.g. --gres=" + next(
                    f"{m.kind}:1" for m in gpus.sharing.values()
                )
            raise Unsatisfiable(
                f"the job asks for {count} whole GPU(s) but node {node} has "
                f"{_gpu_kinds(gpus)}: {hint}"
            )
        raise Unsatisfiable(f"the job asks for {count} GPUs but node {node} has {gpus.count}")


def check_share(count: int, kind: str, node: str, gpus: GpuInventory) -> None:
    """Raise Unsatisfiable when `count` units of `kind` ("mps": percent of one GPU;
    "shard") can never be had: no GPU is shared that way, or not that many units."""
    units = [m.units for m in gpus.sharing.values() if m.kind == kind]
    if not units:
        example = "mps: 100" if kind == "mps" else "shards: 4"
        raise Unsatisfiable(
            f"the job asks for {kind}:{count} but no GPU of node {node} is shared by "
            f"{'MPS' if kind == 'mps' else 'shards'} (node.gpus.sharing: {{0: {{{example}}}}})"
        )
    most = max(units) if kind == "mps" else sum(units)
    if count > most:
        where = "one GPU has" if kind == "mps" else "its GPUs have"
        raise Unsatisfiable(
            f"the job asks for {kind}:{count} but on node {node} {where} {most} {kind} units"
        )


def _gpu_kinds(gpus: GpuInventory) -> str:
    """How the node's GPUs are given: "2 x 'h100'", or "1 x 'h100' whole and MIG
    slices 3g.40gb, 1g.10gb x2 and GPU 1 shared by mps (100 units)"."""
    whole = gpus.count - len(gpus.mig) - len(gpus.sharing)
    if not gpus.mig and not gpus.sharing:
        return f"{gpus.count} x {gpus.type!r}"
    parts = [f"{whole} x {gpus.type!r} whole"]
    if gpus.mig:
        slices = Counter(p for layout in gpus.mig.values() for p in layout)
        listed = ", ".join(p if n == 1 else f"{p} x{n}" for p, n in sorted(slices.items()))
        parts.append(f"MIG slices {listed}")
    for index, mode in sorted(gpus.sharing.items()):
        parts.append(f"GPU {index} shared by {mode.kind} ({mode.units} units)")
    return " and ".join(parts)
