"""`podium k8s device-plugin` renders from a cluster config, in one line when it cannot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml


def podium(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PODIUM_HOME=str(home))
    return subprocess.run(
        [sys.executable, "-m", "podium", *args], capture_output=True, text=True, env=env
    )


def test_device_plugin_and_mig_parted_from_the_config(tmp_path: Path) -> None:
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "node:\n  gpus: {source: declared, count: 2, type: h100, memory_mb: 81920,\n"
        "         mig: {0: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]}, sharing: {1: {shards: 4}}}\n"
    )
    parted = tmp_path / "mig.yaml"
    result = podium(tmp_path, "k8s", "device-plugin", "--mig-parted", str(parted))
    assert result.returncode == 0, result.stderr
    plugin = yaml.safe_load(result.stdout)
    assert plugin["flags"]["migStrategy"] == "mixed"
    assert plugin["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 4
    devices = yaml.safe_load(parted.read_text())["mig-configs"]["podium-advised"][0]
    assert devices["mig-devices"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert "nvidia.com/mig.config=podium-advised" in result.stderr


def test_what_the_plugin_cannot_say_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(
        "node:\n  gpus: {source: declared, count: 2, type: h100, sharing: {1: {mps: 100}}}\n"
    )
    result = podium(tmp_path, "k8s", "device-plugin")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "shares every GPU of a node alike" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    missing = podium(tmp_path / "nowhere", "k8s", "device-plugin")
    assert missing.returncode != 0 and "no cluster config at" in missing.stderr
