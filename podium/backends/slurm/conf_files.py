"""A cluster definition -> slurm.conf, gres.conf, cgroup.conf and the health wiring.
Pure: returns file names and contents; `podium slurm render` writes them.

Nodes are named as ParallelCluster names them: QUEUE-st-RESOURCE-N for the MinCount
static nodes and QUEUE-dy-RESOURCE-N for the rest. Dynamic nodes are State=CLOUD
(powered up by ResumeProgram, down after ScaledownIdletime) only when the definition
names a ResumeProgram; otherwise they are rendered as ordinary nodes, with a comment.

With a `Testbed`, the same cluster is laid out to run on one machine for tests: state
under one directory, fake GPU device files, and no cgroup enforcement (the nodes' CPUs
and memory are declared, not real). Its nodes either all share 127.0.0.1, each slurmd
on a port of its own, or (`hosts`) each is a host of its own: a network and UTS
namespace with its hostname and an address on a bridge (`Testbed.address`), as
scripts/slurm-testbed/up.sh makes them.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from podium.backends.slurm.definition import ClusterDefinition, ComputeResource, Queue


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


def render(defn: ClusterDefinition, python: str, testbed: Testbed | None = None) -> dict[str, str]:
    """File name -> contents for the cluster's configuration directory."""
    etc = f"{testbed.directory}/etc" if testbed else "/etc/slurm"
    state = _state_dir(defn, testbed)
    files = {
        "slurm.conf": _slurm_conf(defn, etc, testbed),
        "gres.conf": _gres_conf(defn, testbed),
        "cgroup.conf": _cgroup_conf(testbed),
        "podium.yaml": _podium_yaml(defn, etc, state, python, testbed),
    }
    for hook in ("health", "prolog", "epilog"):
        files[f"podium-{hook}.sh"] = _hook_script(hook, etc, python, testbed)
    if testbed:
        files["testbed.env"] = _testbed_env(defn, testbed)
    if testbed and testbed.hosts:
        files["hosts"] = _hosts_file(defn, testbed)
    return files


def _state_dir(defn: ClusterDefinition, testbed: Testbed | None) -> str:
    if testbed:
        return f"{testbed.directory}/shared/podium"
    if defn.SharedStorage:
        return f"{defn.SharedStorage[0].MountDir}/podium"
    return "/var/lib/podium"


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


def _slurm_conf(defn: ClusterDefinition, etc: str, testbed: Testbed | None) -> str:
    s = defn.Scheduling.SlurmSettings
    tb = testbed
    lines = [
        f"# slurm.conf rendered by `podium slurm render` for cluster {defn.ClusterName}.",
        f"ClusterName={defn.ClusterName}",
    ]
    if tb:
        d = tb.directory
        lines += [
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
            "MinJobAge=300",
            "SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=2,"
            "sched_min_interval=100000",
            f"JobCompType=jobcomp/filetxt\nJobCompLoc={d}/log/jobcomp.txt",
        ]
    else:
        lines += [
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
    lines += [
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        # the test nodes' 4000 MB over their 4 CPUs: enforced where the nodes have cgroups
        "DefMemPerCPU=1000" if tb else "DefMemPerCPU=2048",
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
                f"Include {tb.directory}/etc/accounting.conf",
            ]
            if tb
            else ["AccountingStorageType=accounting_storage/none"]
        ),
        "JobAcctGatherType=jobacct_gather/none",
        "",
        "# Podium's health checks: drain with a reason starting 'podium:', resume only",
        "# what Podium drained, after a deep check (podium/backends/slurm/hook.py).",
    ]
    hc = s.HealthChecks
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
    all_nodes = nodes(defn)
    dynamic = [n for n in all_nodes if n.dynamic]
    power = bool(s.ResumeProgram and s.SuspendProgram)
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
    queues = defn.Scheduling.SlurmQueues
    default = next((q.Name for q in queues if q.Default), queues[0].Name)
    for q in queues:
        lines.append(_partition(q, q.Name == default, all_nodes))
    return "\n".join(lines) + "\n"


def _partition(q: Queue, default: bool, all_nodes: list[Node]) -> str:
    members = [n.name for n in all_nodes if n.queue == q.Name]
    return (
        f"PartitionName={q.Name} Nodes={','.join(members)} Default={'YES' if default else 'NO'} "
        f"MaxTime={q.MaxTime} PriorityTier={q.PriorityTier} State=UP"
    )


def _gres_conf(defn: ClusterDefinition, testbed: Testbed | None) -> str:
    lines = ["# gres.conf rendered by `podium slurm render`."]
    if testbed is None:
        lines += [
            "# GPUs, MIG slices and their device files are found through NVML.",
            "AutoDetect=nvml",
        ]
    else:
        lines += [
            "# Test cluster: fake GPU device files (char devices), no NVML.",
            "AutoDetect=off",
        ]
    for node in nodes(defn):
        res = node.resource
        shared = res.shared_gres()
        if testbed is None:
            if shared:
                lines.append(f"NodeName={node.name} Name={shared[0]} Count={shared[1]}")
            continue
        devices = res.gpu_devices()
        if not devices:
            continue
        last = f"[0-{devices - 1}]" if devices > 1 else "0"
        files = f"{testbed.directory}/dev/nvidia{last}"
        # With MIG, each fake device file stands for one slice, profile by profile.
        groups: list[tuple[str | None, int]] = list(res.mig_gres()) or [(res.gpus()[1], devices)]
        first = 0
        for kind, n in groups:
            span = f"[{first}-{first + n - 1}]" if n > 1 else str(first)
            type_field = f" Type={kind}" if kind else ""
            dev = f"{testbed.directory}/dev/nvidia{span}"
            lines.append(f"NodeName={node.name} Name=gpu{type_field} File={dev}")
            first += n
        if shared:
            lines.append(f"NodeName={node.name} Name={shared[0]} Count={shared[1]} File={files}")
    return "\n".join(lines) + "\n"


def _cgroup_conf(testbed: Testbed | None) -> str:
    if testbed and testbed.hosts:
        return (
            "# Test cluster, each node a host with a cgroup subtree of its own (when up.sh\n"
            "# found cgroup v1): memory is enforced; cores are not (the nodes declare more\n"
            "# CPUs than the machine has), nor devices (the GPUs are declared: /dev/null's).\n"
            "CgroupPlugin=cgroup/v1\n"
            "CgroupAutomount=no\n"
            "ConstrainRAMSpace=yes\n"
            "ConstrainSwapSpace=no\n"
            "ConstrainCores=no\n"
            "ConstrainDevices=no\n"
        )
    if testbed:
        return (
            "# Test cluster: read by slurmd but not enforced (TaskPlugin=task/none).\n"
            "CgroupPlugin=autodetect\n"
        )
    return (
        "# cgroup.conf rendered by `podium slurm render`: jobs get only what they asked.\n"
        "CgroupPlugin=autodetect\n"
        "ConstrainCores=yes\n"
        "ConstrainDevices=yes\n"
        "ConstrainRAMSpace=yes\n"
        "ConstrainSwapSpace=yes\n"
    )


def _hook_script(hook: str, etc: str, python: str, testbed: Testbed | None) -> str:
    what = {
        "health": "HealthCheckProgram: quick checks; drain on failure; resume Podium's own "
        "drains after a deep check",
        "prolog": "Prolog: quick checks before a job starts; a failure drains the node",
        "epilog": "Epilog: quick checks after a job ends; a failure drains the node",
    }[hook]
    lines = ["#!/bin/sh", f"# {what}.", f"export PODIUM_CONFIG={shlex.quote(etc + '/podium.yaml')}"]
    if testbed:
        lines.append(f"export SLURM_CONF={shlex.quote(etc + '/slurm.conf')}")
    lines.append(f"exec {shlex.quote(python)} -m podium.backends.slurm.hook {hook}")
    return "\n".join(lines) + "\n"


def _podium_yaml(
    defn: ClusterDefinition, etc: str, state: str, python: str, testbed: Testbed | None
) -> str:
    lines = [
        "# Podium's config for this Slurm cluster: point PODIUM_CONFIG at it (or copy it",
        "# to $PODIUM_HOME/cluster.yaml) and every podium command talks to Slurm.",
        f"cluster_name: {defn.ClusterName}",
        "backend: slurm",
        "slurm:",
        "  via: cli",
        f"  conf: {etc}/slurm.conf",
        f"  python: {python}",
        f"  state_dir: {state}",
        "health:",
    ]
    if testbed:
        lines += [
            f"  kernel_log: {testbed.directory}/nodes/{{node}}/kern.log",
            f"  disk_paths: [{testbed.directory}]",
            "  max_disk_used_percent: 99",
        ]
    else:
        lines += ["  kernel_log: /var/log/kern.log"]
        mounts = [s.MountDir for s in defn.SharedStorage]
        if mounts:
            lines.append(f"  required_mounts: [{', '.join(mounts)}]")
    return "\n".join(lines) + "\n"


def _testbed_env(defn: ClusterDefinition, testbed: Testbed) -> str:
    all_nodes = nodes(defn)
    most = max((n.resource.gpu_devices() for n in all_nodes), default=0)
    text = (
        f"TB_DIR={shlex.quote(testbed.directory)}\n"
        f"TB_NODES={shlex.quote(' '.join(n.name for n in all_nodes))}\n"
        f"TB_GPU_FILES={most}\n"
        f"TB_PORT_CTLD={testbed.port_base + 17}\n"
        f"TB_PORT_DBD={testbed.port_base + 18}\n"  # slurmdbd, under up.sh --accounting
        f"TB_PORT_DB={testbed.port_base + 19}\n"  # its MariaDB
        f"TB_CLUSTER={shlex.quote(defn.ClusterName.lower())}\n"
    )
    if testbed.hosts:
        addresses = " ".join(testbed.address(i) for i in range(1, len(all_nodes) + 1))
        text += (
            "TB_HOSTS=1\n"
            f"TB_ID={testbed.port_base}\n"  # names its namespaces, bridge and links
            f"TB_HEAD_ADDR={testbed.address(0)}\n"
            f"TB_ADDRS={shlex.quote(addresses)}\n"
            "TB_CGROUP_CONTROLLERS='freezer memory cpuset devices'\n"  # cgroup v1's
        )
    return text


def _hosts_file(defn: ClusterDefinition, testbed: Testbed) -> str:
    """The /etc/hosts each node sees (bind-mounted in its own mount namespace): the
    head and every node by name, so that `MASTER_ADDR=$(scontrol show hostnames ...)`
    resolves on every node as on a real cluster."""
    lines = ["127.0.0.1 localhost", f"{testbed.address(0)} {testbed.hostname}"]
    lines += [f"{testbed.address(i)} {n.name}" for i, n in enumerate(nodes(defn), start=1)]
    return "\n".join(lines) + "\n"
