"""`podium k8s`: the NVIDIA Kubernetes device plugin's config (and the GPU Operator's
mig-parted config when GPUs are split) for a node set up like this one, Kueue team
quotas rendered and applied, and the per-node health agent."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from podium import paths
from podium.cli.config_arg import cluster_config


@click.group()
def k8s() -> None:
    """Kubernetes: configs for a node shared as this cluster's config shares it."""


@k8s.command("device-plugin")
@click.option(
    "--config",
    type=click.Path(path_type=Path),
    default=None,
    help="Cluster config (default: $PODIUM_CONFIG, else $PODIUM_HOME/cluster.yaml).",
)
@click.option(
    "--mig-parted",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the GPU Operator's mig-parted config here (GPUs split by MIG).",
)
def device_plugin_cmd(config: Path | None, mig_parted: Path | None) -> None:
    """Print the device plugin's config file: migStrategy mixed for MIG slices,
    sharing.timeSlicing for shards, sharing.mps for MPS (one mode per node)."""
    from podium.errors import ConfigError
    from podium.node.k8s_config import device_plugin, gpu_operator_mig
    from podium.node.mig_config import CONFIG_NAME

    gpus = cluster_config(config).node.gpus
    click.echo(device_plugin(gpus), nl=False)
    if mig_parted is not None:
        text = gpu_operator_mig(gpus)
        if not text:
            raise ConfigError("no GPU is split by MIG (node.gpus.mig): no mig-parted config")
        mig_parted.write_text(text)
        click.echo(
            f"# mig-parted config written to {mig_parted}: label the node "
            f"nvidia.com/mig.config={CONFIG_NAME}",
            err=True,
        )


@k8s.group("render")
def render_group() -> None:
    """Render Kueue objects from this cluster's config (YAML on stdout)."""


def _team_options(command: Any) -> Any:
    """The options `render teams` and `apply teams` share."""
    for option in reversed(
        [
            click.option("--config", type=click.Path(path_type=Path), default=None,
                         help="Cluster config (default: $PODIUM_CONFIG, else "
                              "$PODIUM_HOME/cluster.yaml)."),
            click.option("--gpus", type=click.IntRange(min=0), required=True,
                         help="The cluster's GPUs."),
            click.option("--cpus", type=click.IntRange(min=0), required=True,
                         help="The cluster's CPUs."),
            click.option("--memory-gi", type=click.IntRange(min=0), required=True,
                         help="Memory, GiB."),
            click.option("--prefix", default="team-", show_default=True,
                         help="Namespace prefix."),
            click.option("--cohort", default="podium", show_default=True,
                         help="The teams' cohort."),
        ]
    ):  # fmt: skip
        command = option(command)
    return command


def _team_manifests(
    config: Path | None, gpus: int, cpus: int, memory_gi: int, prefix: str, cohort: str
) -> list[dict[str, Any]]:
    import re

    from podium.backends.kubernetes.teams import Capacity, teams

    for option, value in (("--prefix", prefix), ("--cohort", cohort)):
        if not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9-])?", value):
            raise click.UsageError(
                f"{option} {value!r}: give lower-case letters, digits and '-' (a DNS label)"
            )
    return teams(cluster_config(config), Capacity(gpus, cpus, memory_gi), prefix, cohort)


@render_group.command("teams")
@_team_options
def teams_cmd(
    config: Path | None, gpus: int, cpus: int, memory_gi: int, prefix: str, cohort: str
) -> None:
    """Accounts -> Kueue team quotas: a namespace, ClusterQueue (in one cohort, quota
    by shares, borrowing up to max_gpus, reclaim by preemption) and LocalQueue per
    account; a WorkloadPriorityClass per QoS. YAML on stdout."""
    import yaml

    docs = _team_manifests(config, gpus, cpus, memory_gi, prefix, cohort)
    click.echo(yaml.safe_dump_all(docs, sort_keys=False), nl=False)


@k8s.group("apply")
def apply_group() -> None:
    """Apply Kueue objects from this cluster's config to a Kubernetes cluster."""


@apply_group.command("teams")
@_team_options
@click.option("--kubeconfig", default=None, help="Default: $KUBECONFIG, ~/.kube/config.")
def apply_teams_cmd(
    config: Path | None,
    gpus: int,
    cpus: int,
    memory_gi: int,
    prefix: str,
    cohort: str,
    kubeconfig: str | None,
) -> None:
    """What `render teams` prints, applied by server-side apply (field manager podium):
    the apiserver and Kueue's webhooks validate every object."""
    from podium.backends.kubernetes.apply import apply_all, client

    docs = _team_manifests(config, gpus, cpus, memory_gi, prefix, cohort)
    for what in apply_all(client(kubeconfig), docs):
        click.echo(f"applied {what}")


_K8S_CONFIG = click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The cluster config (backend: kubernetes). Default: $PODIUM_CONFIG.",
)


@k8s.command("agent")
@click.option("--node", required=True, help="This node's name (a DaemonSet: spec.nodeName).")
@_K8S_CONFIG
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The node's health state. Default: PODIUM_HOME/k8s-agent/NODE.",
)
@click.option("--interval", type=click.FloatRange(min=1), default=30.0, show_default=True)
@click.option("--once", is_flag=True, help="One pass (exit 2 if it fenced the node).")
def agent_cmd(
    node: str, config: Path | None, state_dir: Path | None, interval: float, once: bool
) -> None:
    """HyperPod's node health agent: run the node's checks, set its health labels and
    taint, evict its pods on a GPU fault, and bring it back after a deep check."""
    from podium.backends import config_file
    from podium.backends.kubernetes.node_agent import NodeAgent, run
    from podium.config.cluster import load_config

    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", node):
        raise click.UsageError(f"--node {node!r}: expected a node's name (a DNS subdomain)")
    path = config or Path(config_file())
    cluster = load_config(path)
    cluster = cluster.model_copy(update={"health": cluster.health.for_node(node)})
    agent = NodeAgent(node, cluster, state_dir or paths.home() / "k8s-agent" / node)
    raise SystemExit(run(agent, interval, once))


@k8s.command("elastic")
@_K8S_CONFIG
@click.option("--interval", type=click.FloatRange(min=0.5), default=5.0, show_default=True)
@click.option("--once", is_flag=True, help="One pass, then exit.")
def elastic_cmd(config: Path | None, interval: float, once: bool) -> None:
    """The elastic controller: shrink elastic JobSets for waiting workloads of a QoS
    that may preempt theirs, grow them into unused ClusterQueue quota (one resize a
    ClusterQueue a pass; docs/elastic.md)."""
    import time

    from podium.backends import config_file
    from podium.backends.kubernetes.elastic_control import ElasticControl, preemptors
    from podium.backends.kubernetes.engine_api import KubeApi
    from podium.config.access import ElasticConfig
    from podium.config.cluster import load_config

    cluster = load_config(config or Path(config_file()))
    access = cluster.kubernetes
    control = ElasticControl(
        KubeApi(access.kubeconfig, access.namespace), preemptors(cluster.qos),
        ElasticConfig.seconds(cluster.elastic.grow_delay),
    )  # fmt: skip
    while True:
        for line in control.look(time.time()):
            click.echo(line)
        if once:
            return
        time.sleep(interval)


def _topology_options(command: Any) -> Any:
    """The options `render topology` and `apply topology` share."""
    command = click.option(
        "--node-name", "node_name", default="{name}", show_default=True,
        help="The Kubernetes name of each node of the definition: {name} (its name in "
             "the definition, as Slurm's), {n} (its position, 1-based), e.g. node-{n}.",
    )(command)  # fmt: skip
    return click.argument("definition", type=click.Path(path_type=Path))(command)


def _topology_manifests(definition: Path, node_name: str) -> list[dict[str, Any]]:
    from podium.backends.kubernetes.kueue_topology import leaf_label, topology_manifests
    from podium.backends.slurm.definition import read_definition
    from podium.backends.slurm.network_tree import network_topology
    from podium.backends.slurm.slurm_conf import nodes
    from podium.errors import ConfigError

    if not re.fullmatch(r"([^{}]|\{name\}|\{n\})+", node_name):
        raise click.UsageError(
            f"--node-name {node_name!r}: give text with {{name}} and {{n}}, e.g. node-{{n}}"
        )
    try:
        text = definition.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {definition}: {exc.strerror}") from None
    defn, _ = read_definition(text, str(definition))
    topo = network_topology(defn)
    if topo is None:
        raise ConfigError(
            f"{definition}: no network layers: give a compute resource Network: "
            "[{Nodes: 1-2, Layers: {block: b1, rack: r1}}, ...]"
        )
    names = {
        node.name: node_name.replace("{name}", node.name).replace("{n}", str(n))
        for n, node in enumerate(nodes(defn), start=1)
    }
    click.echo(f"# set kubernetes.switch_label: {leaf_label(topo)} for --switches", err=True)
    return topology_manifests(topo, defn.ClusterName, names)


@render_group.command("topology")
@_topology_options
def render_topology_cmd(definition: Path, node_name: str) -> None:
    """A cluster definition's network layers -> node labels, Kueue's Topology and a
    topology-aware ResourceFlavor (YAML on stdout)."""
    import yaml

    docs = _topology_manifests(definition, node_name)
    click.echo(yaml.safe_dump_all(docs, sort_keys=False), nl=False)


@apply_group.command("topology")
@_topology_options
@click.option("--kubeconfig", default=None, help="Default: $KUBECONFIG, ~/.kube/config.")
def apply_topology_cmd(definition: Path, node_name: str, kubeconfig: str | None) -> None:
    """What `render topology` prints, applied by server-side apply (field manager
    podium: the nodes' labels are Podium's, their other fields untouched)."""
    from podium.backends.kubernetes.apply import apply_all, client

    for what in apply_all(client(kubeconfig), _topology_manifests(definition, node_name)):
        click.echo(f"applied {what}")
