"""The Kubernetes test cluster for integration tests: scripts/k8s-testbed built (cached
in ~/.cache/podium-k8s), started in a temporary directory on loopback, stopped by pid.

`start_cluster(port_base)` is a generator for module-scoped fixtures: it yields the
directory (kubeconfig, podium.yaml) and the testbed's small API client (kube.py). It
skips where the cluster cannot be had (not root, no Go, the module proxy unreachable).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.polling import poll
from tests.workers import port_base as worker_port_base

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "k8s-testbed"
OFFLINE = ("proxy.golang.org", "dial tcp", "i/o timeout", "no such host", "TLS handshake")


def kube_module() -> Any:
    spec = importlib.util.spec_from_file_location("k8s_testbed_kube", SCRIPTS / "kube.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_cluster(port_base: int, podium_config: str | None = None) -> Iterator[tuple[Path, Any]]:
    """Build (or take from the cache), start, yield (directory, api), stop. With
    `podium_config` (YAML text), the nodes' GPUs are what its node.gpus advertises.
    `port_base` is the module's nominal base, moved into this xdist worker's range."""
    port_base = worker_port_base(port_base)
    if os.geteuid() != 0:
        pytest.skip("the Kubernetes test cluster binds a mount point for Kueue: needs root")
    for tool in ("go", "openssl", "unshare"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: the Kubernetes test cluster needs it")
    build = subprocess.run(
        ["bash", str(SCRIPTS / "build.sh")], capture_output=True, text=True, timeout=3600
    )
    if build.returncode != 0:
        if any(word in build.stderr for word in OFFLINE):
            pytest.skip(f"the Go module proxy cannot be reached: {build.stderr[-300:]}")
        raise AssertionError(f"build.sh failed: {build.stderr[-3000:]}")
    directory = Path(tempfile.mkdtemp(prefix="podium-k8s-"))
    env = dict(os.environ, PODIUM_PYTHON=sys.executable)
    extra = []
    if podium_config is not None:
        (directory / "gpus.yaml").write_text(podium_config)
        extra = ["--podium-config", str(directory / "gpus.yaml")]
    up = subprocess.run(
        ["bash", str(SCRIPTS / "up.sh"), str(directory), "--port-base", str(port_base), *extra],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert up.returncode == 0 and "ready" in up.stdout, up.stderr[-3000:]
    pids = [int(p.read_text()) for p in (directory / "run").glob("*.pid")]
    try:
        yield directory, kube_module().Api(str(directory / "kubeconfig"))
    finally:
        subprocess.run(["bash", str(SCRIPTS / "down.sh"), str(directory)], timeout=120)
        left = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
        shutil.rmtree(directory, ignore_errors=True)
        assert not left, f"down.sh left processes {left}"


def wait_for(api: Any, path: str, test: Any, timeout: float = 60) -> Any:
    """GET `path` until `test(data)` holds; the data (AssertionError after `timeout`)."""
    _, data = poll(
        lambda: api.call("GET", path), lambda got: got[0] == 200 and test(got[1]),
        f"{path} never got there", timeout,
    )  # fmt: skip
    return data
