"""The configs that apply advised MIG layouts, pinned by golden files (regenerate
after an intended change with PODIUM_UPDATE_GOLDEN=1)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from podium.config.cluster import parse_config
from podium.node.mig_config import as_json, mig_parted, podium_lines, slurm_lines

GOLDEN = Path(__file__).with_name("golden")
LAYOUTS = {
    0: ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"),
    1: (),
    2: ("1g.10gb",) * 7,
}


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("mig-parted.yaml", mig_parted(LAYOUTS)),
        ("mig-slurm.txt", slurm_lines("gpu-node-1", "h100", LAYOUTS)),
        ("mig-podium.yaml", podium_lines(LAYOUTS)),
    ],
)
def test_golden_mig_configs(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PODIUM_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_the_configs_read_back_as_what_they_say() -> None:
    parted = yaml.safe_load(mig_parted(LAYOUTS))["mig-configs"]["podium-advised"]
    assert parted[0] == {
        "devices": [0],
        "mig-enabled": True,
        "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    }
    assert parted[1] == {"devices": [1], "mig-enabled": False}
    podium = yaml.safe_load(podium_lines(LAYOUTS))
    podium["node"]["gpus"].update(source="declared", count=3, type="h100", memory_mb=81920)
    config = parse_config(yaml.safe_dump(podium), "advised.yaml")  # checks the layouts
    assert config.node.gpus.mig == {0: list(LAYOUTS[0]), 2: list(LAYOUTS[2])}
    assert json.loads(as_json(LAYOUTS))["1"] == []
    gres = slurm_lines("n", "h100", LAYOUTS).splitlines()[-1]
    assert gres == "NodeName=n Gres=gpu:1g.10gb:9,gpu:2g.20gb:1,gpu:3g.40gb:1,gpu:h100:1"
