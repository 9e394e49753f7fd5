"""`podium k8s device-plugin`: the NVIDIA Kubernetes device plugin's config (and the GPU
Operator's mig-parted config when GPUs are split) for a node set up like this one."""

from __future__ import annotations

from pathlib import Path

import click

from podium import paths


@click.group()
def k8s() -> None:
    """Kubernetes: configs for a node shared as this cluster's config shares it."""


@k8s.command("device-plugin")
@click.option(
    "--config",
    type=click.Path(path_type=Path),
    default=None,
    help="Cluster config (default: $PODIUM_HOME/cluster.yaml).",
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
    from podium.config.cluster import load_config
    from podium.errors import ConfigError
    from podium.node.k8s_config import device_plugin, gpu_operator_mig
    from podium.node.mig_config import CONFIG_NAME

    path = config or paths.config_path()
    if not path.exists():
        raise ConfigError(f"no cluster config at {path}: give one with --config FILE")
    gpus = load_config(path).node.gpus
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
