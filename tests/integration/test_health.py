"""`podium health` on this node: real checks, recorded kernel-log input, Nagios exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _health(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PODIUM_HOME=str(home))
    return subprocess.run(
        [sys.executable, "-m", "podium", "health", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_health_reports_an_xid_on_a_declared_gpu(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(
        "kernel: NVRM: Xid (PCI:0000:00:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
    )
    (tmp_path / "cluster.yaml").write_text(
        "node: {name: n0, gpus: {source: declared, count: 2, type: h100}}\n"
        f"health: {{kernel_log: {log}, disk_paths: [{tmp_path}], max_disk_used_percent: 100}}\n"
    )
    result = _health(tmp_path, "--json")
    assert result.returncode == 2, result.stderr
    records = json.loads(result.stdout)
    xid = next(r for r in records if r["check"] == "xid")
    assert (xid["status"], xid["action"], xid["gpu"]) == ("critical", "reboot", 0)
    lines = (tmp_path / "health.jsonl").read_text().splitlines()
    assert len(lines) == len(records) and json.loads(lines[0])["check"] == records[0]["check"]
    table = _health(tmp_path)  # the Xid was already read: nothing new now
    assert "no new Xid events" in table.stdout and table.returncode in (0, 3)


def test_health_bad_config_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text("health: {kernel_lgo: /x}\n")
    result = _health(tmp_path)
    assert result.returncode == 2
    assert "unknown key 'health.kernel_lgo' (did you mean 'kernel_log'?)" in result.stderr
