"""slurm.conf for a cluster definition, and the node list every rendered file shares.

Nodes are named as ParallelCluster names them: QUEUE-st-RESOURCE-N for the MinCount
static nodes and QUEUE-dy-RESOURCE-N for the rest (podium.backends.slurm.conf_files
says how dynamic nodes and a `Testbed` are rendered). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from podium.backends.slurm.definition import (
    ClusterDefinition,
    ComputeResource,
    Queue,
    network_levels,
)


@dataclass(frozen=True)
class Testbed:
    """Where a one-machine test cluster lives and which ports it uses."""

    directory: str
    hostname: str  # this machine's short hostname (slurmctld insists on it)
    port_base: int = 17800
    hosts: bool = False  # each node in namespaces of its own, with its own address

    def subnet(self) -> str:
        """The first three octets of the hosts' private /24: one per port base, so that
        test clusters on other port bases never share addresses."""
        return f"10.211.{(self.port_base // 100) % 250}"

    def address(self, index: int) -> str:
        """The address of node `index` (1-based); index 0 is the head (the bridge)."""
        return f"{self.subnet()}.{index + 1}"


@dataclass(frozen=True)
class Node:
    name: str
    queue: str
    resource: ComputeResource
    dynamic: bool


def nodes(defn: ClusterDefinition) -> list[Node]:
    """Every node of the cluster, in queue and resource order."""
    out: list[Node] = []
    for queue in defn.Scheduling.SlurmQueues:
        for res in queue.ComputeResources:
            for i in range(1, res.MinCount + 1):
                out.append(Node(f"{queue.Name}-st-{res.Name}-{i}", queue.Name, res, False))
            for i in range(1, res.MaxCount - res.MinCount + 1):
                out.append(Node(f"{queue.Name}-dy-{res.Name}-{i}", queue.Name, res, True))
    return out


def _gres(res: ComputeResource) -> str:
    count, kind = res.gpus()
    if not count:
        return ""
    if res.Sharing.Mode == "mig":
        return ",".join(f"gpu:{profile}:{n}" for profile, n in res.mig_gres())
    gres = f"gpu:{kind}:{count}" if kind else f"gpu:{count}"
    if shared := res.shared_gres():
        gres += f",{shared[0]}:{shared[1]}"
    return gres


def _features(res: ComputeResource) -> list[str]:
    count, kind = res.gpus()
    feats = list(res.Features)
    if res.InstanceType:
        feats.append(res.InstanceType)
    if count and kind:
        feats.append(kind)
    if res.Efa.Enabled:
        feats.append("efa")
    if res.Sharing.Mode != "none":
        feats.append(res.Sharing.Mode)
    return feats


def slurm_conf(defn: ClusterDefinition, etc: str, testbed: Testbed | None) -> str:
    """slurm.conf: the daemons (a test cluster's under one directory, or a real
    cluster's), scheduling, Podium's health hooks, power saving, nodes, partitions."""
    all_nodes = nodes(defn)
    settings = defn.Scheduling.SlurmSettings
    power = bool(settings.ResumeProgram and settings.SuspendProgram)
    lines = [
        f"# slurm.conf rendered by `podium slurm render` for cluster {defn.ClusterName}.",
        f"ClusterName={defn.ClusterName}",
        *(_testbed_daemons(defn, testbed) if testbed else _cluster_daemons(defn)),
        *_scheduling(testbed),
        *_topology(defn),
        *_health_hooks(defn, etc),
        *_power_saving(defn, all_nodes, testbed, power),
        *_node_lines(all_nodes, testbed, power),
    ]
    queues = defn.Scheduling.SlurmQueues
    default = next((q.Name for q in queues if q.Default), queues[0].Name)
    for q in queues:
        lines.append(_partition(q, q.Name == default, all_nodes))
    return "\n".join(lines) + "\n"


def _testbed_daemons(defn: ClusterDefinition, tb: Testbed) -> list[str]:
    s = defn.Scheduling.SlurmSettings
    d = tb.directory
    return [
        f"SlurmctldHost={tb.hostname}({tb.address(0) if tb.hosts else '127.0.0.1'})",
        f"SlurmctldPort={tb.port_base + 17}",
        f"SlurmdPort={tb.port_base + 200}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={d}/munge/munge.sock,cred_expire={min(s.CredExpire, 10)}",
        f"StateSaveLocation={d}/state",
        f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={d}/run/slurmctld.pid",
        f"SlurmdPidFile={d}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log",
        f"SlurmdLogFile={d}/log/slurmd-%n.log",
        *(
            [
                "# Each node a host: up.sh writes proctrack.conf, cgroups of the node's",
                "# own where the machine has cgroup v1, else proctrack/linuxproc.",
                f"Include {d}/etc/proctrack.conf",
            ]
            if tb.hosts
            else [
                "# One machine plays every node: no cgroups, declared CPUs and memory.",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
            ]
        ),
        "SlurmdParameters=config_overrides",
        "MailProg=/bin/true",
        "ReturnToService=2",
        f"SlurmdTimeout={min(s.SlurmdTimeout, 10)}",
        "SlurmctldTimeout=30",
        "MessageTimeout=10",
        "KillWait=5",
        # Slurm drains a node ("Kill task failed") whose killed step's processes are
        # not gone within this time (60 s by default): a 2-core machine running the
        # test suite's four workers has taken longer to end a requeued training step.
        "UnkillableStepTimeout=180",
        "MinJobAge=300",
        "SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=2,"
        "sched_min_interval=100000",
        f"JobCompType=jobcomp/filetxt\nJobCompLoc={d}/log/jobcomp.txt",
    ]


def _cluster_daemons(defn: ClusterDefinition) -> list[str]:
    s = defn.Scheduling.SlurmSettings
    return [
        f"SlurmctldHost={defn.HeadNode.Hostname}",
        "SlurmUser=slurm",
        "AuthType=auth/munge",
        f"AuthInfo=cred_expire={s.CredExpire}",
        "StateSaveLocation=/var/spool/slurmctld",
        "SlurmdSpoolDir=/var/spool/slurmd",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        "ProctrackType=proctrack/cgroup",
        "TaskPlugin=task/cgroup,task/affinity",
        "ReturnToService=2",
        f"SlurmdTimeout={s.SlurmdTimeout}",
        "SchedulerParameters=batch_sched_delay=0",
        "JobCompType=jobcomp/filetxt\nJobCompLoc=/var/log/slurm/jobcomp.txt",
    ]


def _scheduling(testbed: Testbed | None) -> list[str]:
    return [
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        # the test nodes' 4000 MB over their 4 CPUs: enforced where the nodes have cgroups
        "DefMemPerCPU=1000" if testbed else "DefMemPerCPU=2048",
        "PriorityType=priority/multifactor",
        "PriorityWeightPartition=10000",
        "PriorityWeightJobSize=100",
        "PreemptType=preempt/partition_prio",
        "PreemptMode=REQUEUE",
        "JobRequeue=1",
        "MpiDefault=none",
        *(
            [
                "# up.sh writes accounting.conf: slurmdbd (with MariaDB) under --accounting,",
                "# else no accounting.",
                f"Include {testbed.directory}/etc/accounting.conf",
            ]
            if testbed
            else ["AccountingStorageType=accounting_storage/none"]
        ),
        "JobAcctGatherType=jobacct_gather/none",
        "",
        "# Podium's health checks: drain with a reason starting 'podium:', resume only",
        "# what Podium drained, after a deep check (podium/backends/slurm/hook.py).",
    ]


def _topology(defn: ClusterDefinition) -> list[str]:
    """The network tree (topology.conf, beside slurm.conf) when the definition has layers:
    Slurm then places a job on as few leaf switches as it can, and `--switches=N[@time]`
    bounds them."""
    if not network_levels(defn):
        return []
    return [
        "# The network layers of the definition (topology.conf): jobs go on as few leaf",
        "# switches as fit; --switches=N[@wait] bounds them.",
        "TopologyPlugin=topology/tree",
        "",
    ]


def _health_hooks(defn: ClusterDefinition, etc: str) -> list[str]:
    lines: list[str] = []
    hc = defn.Scheduling.SlurmSettings.HealthChecks
    if hc.Enabled:
        lines += [
            f"HealthCheckProgram={etc}/podium-health.sh",
            f"HealthCheckInterval={hc.Interval}",
            "HealthCheckNodeState=ANY",
        ]
    if hc.Prolog:
        lines += [f"Prolog={etc}/podium-prolog.sh", "PrologFlags=Alloc"]
    if hc.Epilog:
        lines.append(f"Epilog={etc}/podium-epilog.sh")
    return lines


def _power_saving(
    defn: ClusterDefinition, all_nodes: list[Node], tb: Testbed | None, power: bool
) -> list[str]:
    """Dynamic nodes: powered on demand where the definition names a ResumeProgram and
    a SuspendProgram (`power`), else a comment on a real cluster."""
    s = defn.Scheduling.SlurmSettings
    lines: list[str] = []
    dynamic = [n for n in all_nodes if n.dynamic]
    if dynamic and power:
        lines += [
            "",
            "# Dynamic nodes: powered up on demand, down after ScaledownIdletime.",
            f"ResumeProgram={s.ResumeProgram}",
            f"SuspendProgram={s.SuspendProgram}",
            f"SuspendTime={s.ScaledownIdletime * 60}",
            "ResumeTimeout=1800",
            "TreeWidth=65533",
        ]
    elif dynamic and not tb:
        lines += [
            "",
            "# No ResumeProgram/SuspendProgram: the dynamic (-dy-) nodes are rendered as",
            "# ordinary nodes and ScaledownIdletime does not apply.",
        ]
    return lines


def _node_lines(all_nodes: list[Node], tb: Testbed | None, power: bool) -> list[str]:
    """GresTypes, then one NodeName line per node; `power`: dynamic nodes are CLOUD."""
    lines: list[str] = []
    shared = {g[0] for n in all_nodes if (g := n.resource.shared_gres())}
    types = ["gpu", *sorted(shared)]
    lines += ["", f"GresTypes={','.join(types)}", ""]
    for i, node in enumerate(all_nodes, start=1):
        res = node.resource
        fields = [f"NodeName={node.name}"]
        if tb and tb.hosts:
            fields += [f"NodeHostname={node.name}", f"NodeAddr={tb.address(i)}"]
        elif tb:
            fields += [
                "NodeHostname=localhost",
                "NodeAddr=127.0.0.1",
                f"Port={tb.port_base + 200 + i}",
            ]
        fields += [f"CPUs={res.cpus()}", f"RealMemory={res.memory_mib()}"]
        if gres := _gres(res):
            fields.append(f"Gres={gres}")
        if feats := _features(res):
            fields.append(f"Feature={','.join(feats)}")
        fields.append("State=CLOUD" if node.dynamic and power else "State=UNKNOWN")
        lines.append(" ".join(fields))
    lines.append("")
    return lines


def _partition(q: Queue, default: bool, all_nodes: list[Node]) -> str:
    members = [n.name for n in all_nodes if n.queue == q.Name]
    return (
        f"PartitionName={q.Name} Nodes={','.join(members)} Default={'YES' if default else 'NO'} "
        f"MaxTime={q.MaxTime} PriorityTier={q.PriorityTier} State=UP"
    )


__all__ = ["Node", "Testbed", "nodes", "slurm_conf"]
