"""Cluster definition -> Slurm's files: golden files, and bad definitions refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from podium.backends.slurm.conf_files import render
from podium.backends.slurm.definition import load_definition, read_definition
from podium.backends.slurm.slurm_conf import Testbed as Layout
from podium.backends.slurm.slurm_conf import nodes
from podium.errors import ConfigError

ROOT = Path(__file__).resolve().parents[4]
GOLDEN = Path(__file__).with_name("golden")


def _example() -> str:
    return (ROOT / "examples" / "slurm" / "cluster.yaml").read_text()


@pytest.mark.parametrize("name", ["slurm.conf", "gres.conf", "cgroup.conf", "podium.yaml"])
def test_golden_cluster_files(name: str) -> None:
    files = render(load_definition(_example(), "cluster.yaml"), "/opt/podium/bin/python")
    path = GOLDEN / f"lab-{name}"
    if os.environ.get("PODIUM_UPDATE_GOLDEN"):
        path.write_text(files[name])
    assert files[name] == path.read_text()


def test_nodes_are_named_like_parallelcluster() -> None:
    names = [n.name for n in nodes(load_definition(_example(), "x"))]
    assert names == [
        "gpu-st-h100-1",
        "gpu-st-h100-2",
        "gpu-dy-h100-1",
        "gpu-dy-h100-2",
        "shared-st-a100mig-1",
    ]


def test_power_programs_make_dynamic_nodes_cloud_nodes() -> None:
    text = _example().replace(
        "    ScaledownIdletime: 10\n",
        "    ScaledownIdletime: 10\n    ResumeProgram: /opt/r\n    SuspendProgram: /opt/s\n",
    )
    conf = render(load_definition(text, "x"), "py")["slurm.conf"]
    assert "SuspendTime=600" in conf and "ResumeProgram=/opt/r" in conf
    assert "NodeName=gpu-dy-h100-1 " in conf and conf.count("State=CLOUD") == 2


def test_testbed_layout_and_sharing_modes() -> None:
    lines = _example().replace("Mode: mig", "Mode: mps").splitlines()
    text = "\n".join(line for line in lines if "Mig:" not in line)
    files = render(load_definition(text, "x"), "py", Layout("/tmp/tb", "host", 19000))
    conf = files["slurm.conf"]
    assert "SlurmctldHost=host(127.0.0.1)" in conf and "SlurmctldPort=19017" in conf
    assert "Gres=gpu:a100:8,mps:800" in conf and "GresTypes=gpu,mps" in conf
    assert (
        "NodeName=shared-st-a100mig-1 Name=mps Count=800 File=/tmp/tb/dev/nvidia[0-7]"
        in files["gres.conf"]
    )
    assert "TB_NODES=" in files["testbed.env"]
    health = files["podium-health.sh"]  # one run at a time per node: a slow one is not piled on
    lock = '/tmp/tb/run/podium-health-"$SLURMD_NODENAME".lock'
    assert f"exec flock -n -E 0 {lock} py -m podium.backends.slurm.hook health" in health
    assert "exec py -m podium.backends.slurm.hook prolog" in files["podium-prolog.sh"]


def test_a_mixed_mig_layout_as_podiums_config_gives_it() -> None:
    text = _example().replace(
        "Mig: {Profile: 1g.10gb, PerGpu: 7}", "Layout: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]"
    )
    files = render(load_definition(text, "x"), "py", Layout("/tmp/tb", "host", 19000))
    assert "Gres=gpu:3g.40gb:8,gpu:2g.20gb:8,gpu:1g.10gb:16" in files["slurm.conf"]
    gres = files["gres.conf"]
    assert "NodeName=shared-st-a100mig-1 Name=gpu Type=3g.40gb File=/tmp/tb/dev/nvidia[0-7]" in gres
    assert "Name=gpu Type=1g.10gb File=/tmp/tb/dev/nvidia[16-31]" in gres


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (("MinCount: 2", "MinCount: 9"), "MinCount 9 exceeds MaxCount 4"),
        (
            ("Mig: {Profile: 1g.10gb, PerGpu: 7}", "Layout: [4g.40gb, 4g.40gb]"),
            "Sharing.Layout: A100 80GB: at most 1 x 4g.40gb",
        ),
        (("InstanceType: p5.48xlarge", "InstanceType: p9.huge"), "unknown InstanceType"),
        (("Mig: {Profile: 1g.10gb, PerGpu: 7}", "Typo: 1"), "Typo"),
        (("Scheduler: slurm", "Scheduler: awsbatch"), "Scheduler"),
    ],
)
def test_bad_definitions_are_one_line_errors(change: tuple[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words) as err:
        load_definition(_example().replace(*change), "cluster.yaml")
    assert "\n" not in str(err.value) and str(err.value).startswith("cluster.yaml: ")


SEED = Path(__file__).with_name("data") / "seed-001-cluster.yaml"


def _seed(**values: str) -> str:
    """The seed's cluster.yaml with its variables filled in, as envsubst does."""
    text = SEED.read_text()
    for name, value in values.items():
        text = text.replace("${" + name + "}", value)
    return text


def test_the_seeds_template_asks_for_its_variables_first() -> None:
    with pytest.raises(ConfigError, match=r"InstanceType: '\$\{INSTANCE\}' is an unexpanded"):
        load_definition(SEED.read_text(), "cluster.yaml")


def test_the_seeds_cluster_yaml_renders_with_one_warning_per_aws_setting() -> None:
    # The seed's own first configuration: 3 x m5.xlarge (its `export` lines).
    defn, warnings = read_definition(_seed(NUM_INSTANCES="3", INSTANCE="m5.xlarge"), "seed")
    assert warnings == [
        f"seed: {path}: an AWS setting, not acted on here (left out of Slurm's files)"
        for path in (
            "HeadNode.Networking", "HeadNode.Ssh", "HeadNode.LocalStorage", "HeadNode.Iam",
            "HeadNode.CustomActions", "Scheduling.SlurmSettings.QueueUpdateStrategy",
            "Scheduling.SlurmQueues.0.CapacityType", "Scheduling.SlurmQueues.0.Networking",
            "Scheduling.SlurmQueues.0.ComputeSettings",
            "Scheduling.SlurmQueues.0.ComputeResources.0.CapacityReservationTarget",
            "SharedStorage.0.FsxOpenZfsSettings", "SharedStorage.1.FsxLustreSettings",
        )
    ]  # fmt: skip
    assert [n.name for n in nodes(defn)] == [
        f"compute-gpu-st-distributed-ml-{i}" for i in (1, 2, 3)
    ]
    conf = render(defn, "py")["slurm.conf"]
    assert "PartitionName=compute-gpu" in conf and "CPUs=4" in conf
    assert "KeyName" not in conf and "arn:aws" not in conf and "${" not in conf


@pytest.mark.parametrize("name", ["slurm.conf", "gres.conf", "podium.yaml"])
def test_golden_seed_on_p5(name: str) -> None:
    # The seed's GPU configuration: p5.48xlarge nodes with EFA.
    defn, _ = read_definition(_seed(NUM_INSTANCES="2", INSTANCE="p5.48xlarge"), "seed")
    files = render(defn, "/opt/podium/bin/python")
    path = GOLDEN / f"seed-p5-{name}"
    if os.environ.get("PODIUM_UPDATE_GOLDEN"):
        path.write_text(files[name])
    assert files[name] == path.read_text()


def test_aws_only_keys_are_set_aside_but_typos_are_still_errors() -> None:
    text = _seed(NUM_INSTANCES="2", INSTANCE="p5.48xlarge").replace("MinCount:", "MinCnt:")
    with pytest.raises(ConfigError, match=r"ComputeResources\.0\.MinCnt: Extra inputs"):
        load_definition(text, "x")
    flexible = _seed(NUM_INSTANCES="2", INSTANCE="p5.48xlarge").replace(
        "          InstanceType: p5.48xlarge",
        "          Instances:\n            - InstanceType: p5.48xlarge",
    )
    assert nodes(load_definition(flexible, "x"))[0].resource.gpus() == (8, "h100")
    mixed = flexible.replace(
        "            - InstanceType: p5.48xlarge",
        "            - InstanceType: p5.48xlarge\n            - InstanceType: p4d.24xlarge",
    )
    with pytest.raises(ConfigError, match="Instances: give one InstanceType"):
        load_definition(mixed, "x")
