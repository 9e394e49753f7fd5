"""`podium health` on this node: real checks, recorded kernel-log input, Nagios exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from podium.node.inventory import declared_bus_id
from tests.integration.conftest import make_cluster, teardown_cluster
from tests.polling import poll

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
    bus = declared_bus_id(0, str(tmp_path))  # where the cluster in tmp_path declares GPU 0
    log.write_text(
        f"kernel: NVRM: Xid (PCI:{bus}): 79, pid=1, name=python, GPU has fallen off the bus.\n"
        "kernel: NVRM: Xid (PCI:0000:00:00): 79, pid=1, name=python, another cluster's GPU\n"
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


def test_health_on_a_fresh_home_makes_it_as_the_daemon_would(tmp_path: Path) -> None:
    """Issue 46: `podium health` before any daemon ran said its own state directory was
    'unknown' (exit 3); it makes it (0711, results 0600) and checks it."""
    log = tmp_path / "kern.log"
    log.write_text("")
    config = tmp_path / "c.yaml"
    config.write_text(f"node: {{name: n0}}\nhealth: {{kernel_log: {log}}}\n")
    home = tmp_path / "fresh" / "home"
    result = _health(home, "--json", "--config", str(config))
    assert result.returncode in (0, 1), (result.stdout, result.stderr)
    disks = [r for r in json.loads(result.stdout) if r["check"] == "disk"]
    assert any(str(home) in r["reason"] and r["status"] in ("ok", "warning") for r in disks)
    assert home.stat().st_mode & 0o777 == 0o711
    assert (home / "health.jsonl").stat().st_mode & 0o777 == 0o600


def test_health_bad_config_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text("health: {kernel_lgo: /x}\n")
    result = _health(tmp_path)
    assert result.returncode == 2
    assert "unknown key 'health.kernel_lgo' (did you mean 'kernel_log'?)" in result.stderr


H100 = Path(__file__).resolve().parents[1] / "unit" / "node" / "data" / "nvml-h100.json"


def recording(tmp_path: Path, count: int, device: str | None = None) -> Path:
    """The recorded H100, `count` times (as NVML would list that many), optionally
    with its device file."""
    gpu = json.loads(H100.read_text())["gpus"][0]
    gpus = []
    for i in range(count):
        one = dict(gpu, minor=i, pci=f"00000000:{0x19 + i:02x}:00.0", uuid=f"GPU-recorded-{i}")
        if device is not None:
            one["device"] = device
        gpus.append(one)
    path = tmp_path / f"nvml-{count}.json"
    path.write_text(json.dumps({"gpus": gpus}))
    return path


def test_a_healthy_declared_cluster_is_healthy_and_xids_come_from_the_kernel() -> None:
    c = make_cluster()
    (c.home / "cluster.yaml").unlink()  # the README's sequence: podium up --gpus N
    c.start("--gpus", "2")
    try:
        result = c.cli("health")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "skipped" in result.stdout and "healthy (exit 0)" in result.stdout
        if not os.access("/dev/kmsg", os.W_OK):
            pytest.skip("/dev/kmsg is not writable here")
        injected = c.cli("inject", "xid", "--gpu", "1", "--code", "13")
        assert injected.returncode == 0, injected.stderr
        assert "written for GPU 1 to /dev/kmsg" in injected.stdout
        c.cli("health")  # runs the checks now (the agent's own run may come first)
        log = (c.home / "health.jsonl").read_text().splitlines()
        found = [json.loads(line) for line in log if "Xid 13" in line]
        assert found and found[0]["gpu"] == 1 and found[0]["status"] == "warning", log
    finally:
        teardown_cluster(c)


def test_declared_gpus_never_reach_the_machines_real_ones(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (mknod, device cgroup)")
    device = tmp_path / "nvidia0"
    os.mknod(device, 0o666 | 0o020000, os.makedev(240, 220))
    c = make_cluster()
    c.env["PODIUM_NVML_REPLAY"] = str(recording(tmp_path, 1, str(device)))
    up = c.cli("up")
    try:
        assert up.returncode == 0, up.stderr
        assert "note: 4 declared GPUs; jobs see none of this machine's 1 real GPU(s) (h100)" in (
            up.stdout
        )
        c.daemon_pid = int((c.home / "podiumd.pid").read_text())
        job = c.submit(
            "--gpus=2", "-o", "real-%j.out", "--wrap",
            f"python3 -c \"import os; os.open('{device}', os.O_RDONLY)\" 2>&1; "
            "echo CUDA=$CUDA_VISIBLE_DEVICES",
        )  # fmt: skip
        c.wait(job)
        out = (c.work / f"real-{job}.out").read_text()
        assert "Operation not permitted" in out, out
        node = json.loads(c.cli("nodes", "--json", check=True).stdout)[0]
        assert "jobs see none" in node["gpu_note"]
    finally:
        teardown_cluster(c)


def test_a_recorded_h100_passes_the_deep_checks(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(
        "node: {name: n0, gpus: {source: nvml}}\n"
        f"health: {{disk_paths: [{tmp_path}], max_disk_used_percent: 100, "
        f"kernel_log: {tmp_path / 'kern.log'}}}\n"
    )
    (tmp_path / "kern.log").write_text("")
    env = dict(
        os.environ, PODIUM_HOME=str(tmp_path), PODIUM_NVML_REPLAY=str(recording(tmp_path, 1))
    )
    result = subprocess.run(
        [sys.executable, "-m", "podium", "health", "--deep", "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    records = {(r["check"], r["gpu"]): r for r in json.loads(result.stdout)}
    assert records[("retired_pages", 0)]["reason"] == "GPU 0: not supported by this GPU or driver"
    assert records[("gpu", None)]["reason"] == "1 GPUs healthy"
    assert records[("dcgm_diag", None)]["skipped"]


def _linked(tmp_path: Path, nvlinks_of_gpu1: list[int]) -> Path:
    """Two recorded H100s with links: GPU 0 healthy, GPU 1 with `nvlinks_of_gpu1`."""
    path = recording(tmp_path, 2)
    data = json.loads(path.read_text())
    links = {"pcie": {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16},
             "fabric": {"state": 3, "status": 0}}  # fmt: skip
    data["gpus"][0].update(links, nvlinks=[1] * 18)
    data["gpus"][1].update(links, nvlinks=nvlinks_of_gpu1)
    path.write_text(json.dumps(data))
    return path


def _rdma(tmp_path: Path, state: str) -> Path:
    """One RDMA port laid out as /sys/class/infiniband shows an mlx5 device's."""
    port = tmp_path / "infiniband" / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    for name, value in (("state", state), ("phys_state", "2: Polling"),
                        ("rate", "400 Gb/sec (4X NDR)"), ("link_layer", "InfiniBand")):  # fmt: skip
        (port / name).write_text(value + "\n")
    return tmp_path / "infiniband"


def test_links_and_rdma_ports_are_checked_beyond_the_gpu(tmp_path: Path) -> None:
    """Issue 46: health stopped at the GPU. NVLink (count against the H100's 18), the
    PCIe link, the NVSwitch fabric and the RDMA ports are checked; a link down resets
    its GPU, a port down where one must be up drains the node."""
    (tmp_path / "kern.log").write_text("")
    (tmp_path / "cluster.yaml").write_text(
        "node: {name: n0, gpus: {source: nvml}}\n"
        f"health: {{disk_paths: [{tmp_path}], max_disk_used_percent: 100, "
        f"kernel_log: {tmp_path / 'kern.log'}, nic_ports: 1, "
        f"nic_sysfs: {_rdma(tmp_path, '1: DOWN')}}}\n"
    )
    down = [1] * 5 + [0] + [1] * 12
    env = dict(os.environ, PODIUM_HOME=str(tmp_path),
               PODIUM_NVML_REPLAY=str(_linked(tmp_path, down)))  # fmt: skip
    result = subprocess.run([sys.executable, "-m", "podium", "health", "--json"],
                            capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    records = {(r["check"], r["gpu"]): r for r in json.loads(result.stdout)}
    assert records[("nvlink", 0)]["status"] == "ok"
    nvlink = records[("nvlink", 1)]
    assert (nvlink["status"], nvlink["action"]) == ("critical", "reset")
    assert nvlink["reason"] == "GPU 1: 17 of 18 NVLinks active (down: 5)"
    assert records[("pcie", 1)]["status"] == records[("fabric", 1)]["status"] == "ok"
    nic = records[("nic", None)]
    assert (nic["status"], nic["action"]) == ("critical", "drain")
    assert (
        nic["reason"]
        == "0 of 1 expected RDMA ports ACTIVE (not: mlx5_0 port 1 (InfiniBand): DOWN (Polling))"
    )


def test_the_agent_fences_a_gpu_whose_nvlink_is_down(tmp_path: Path) -> None:
    c = make_cluster(gpus=2)
    kern = c.home / "kern.log"
    kern.write_text("")
    text = (
        (c.home / "cluster.yaml")
        .read_text()
        .replace(
            "gpus: {source: declared, count: 2, type: h100, memory_mb: 81920}",
            "gpus: {source: nvml}",
        )
    )
    text += (f"health: {{kernel_log: {kern}, interval_s: 0.2, deep_interval_s: 100000, "
             f"disk_paths: [{c.home}], max_disk_used_percent: 100}}\n")  # fmt: skip
    (c.home / "cluster.yaml").write_text(text)
    c.env["PODIUM_NVML_REPLAY"] = str(_linked(tmp_path, [1] * 17 + [0]))
    c.start()
    try:
        node = poll(
            lambda: json.loads(c.cli("nodes", "--json", check=True).stdout)[0],
            lambda node: node["gpus"][1]["health"]["fenced"], "GPU 1 fenced", 30,
        )  # fmt: skip
        health = node["gpus"][1]["health"]
        assert "NVLinks active" in (health["reason"] or ""), health
        assert not node["gpus"][0]["health"]["fenced"]
    finally:
        teardown_cluster(c)
