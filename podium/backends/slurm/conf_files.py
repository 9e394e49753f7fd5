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

from podium.backends.slurm.definition import ClusterDefinition
from podium.backends.slurm.network_tree import network_topology, topology_conf
from podium.backends.slurm.slurm_conf import Testbed, nodes, slurm_conf


def render(defn: ClusterDefinition, python: str, testbed: Testbed | None = None) -> dict[str, str]:
    """File name -> contents for the cluster's configuration directory."""
    etc = f"{testbed.directory}/etc" if testbed else "/etc/slurm"
    state = _state_dir(defn, testbed)
    files = {
        "slurm.conf": slurm_conf(defn, etc, testbed),
        "gres.conf": _gres_conf(defn, testbed),
        "cgroup.conf": _cgroup_conf(testbed),
        "podium.yaml": _podium_yaml(defn, etc, state, python, testbed),
    }
    tree = topology_conf(defn)
    if tree is not None:
        files["topology.conf"] = tree
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
    run = f"{shlex.quote(python)} -m podium.backends.slurm.hook {hook}"
    if hook == "health":
        # slurmd starts the program every HealthCheckInterval whether or not the last
        # run ended: runs slowed by a loaded machine (or a hung GPU query) piled up, 49
        # at once on a 2-core test machine. A run finds the node's last one still
        # running and leaves it to finish (`flock -n`, exit 0), as LBNL NHC does.
        locks = f"{testbed.directory}/run" if testbed else "/run/lock"
        lines.append(
            f'exec flock -n -E 0 {shlex.quote(locks)}/podium-health-"$SLURMD_NODENAME".lock {run}'
        )
    else:
        lines.append(f"exec {run}")
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
            f"TB_SWITCHES={shlex.quote(_leaf_switches(defn))}\n"
        )
    return text


def _leaf_switches(defn: ClusterDefinition) -> str:
    """Each node's leaf switch as a number (1-based, in order of first use), for up.sh's
    bridges: one per leaf switch; every node on 1 without network layers."""
    topo = network_topology(defn)
    if topo is None:
        return " ".join("1" for _ in nodes(defn))
    leaves = list(topo.leaf_domains())
    return " ".join(str(leaves.index(topo.nodes[n.name][-1]) + 1) for n in nodes(defn))


def _hosts_file(defn: ClusterDefinition, testbed: Testbed) -> str:
    """The /etc/hosts each node sees (bind-mounted in its own mount namespace): the
    head and every node by name, so that `MASTER_ADDR=$(scontrol show hostnames ...)`
    resolves on every node as on a real cluster."""
    lines = ["127.0.0.1 localhost", f"{testbed.address(0)} {testbed.hostname}"]
    lines += [f"{testbed.address(i)} {n.name}" for i, n in enumerate(nodes(defn), start=1)]
    return "\n".join(lines) + "\n"


__all__ = ["render"]
