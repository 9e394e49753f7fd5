"""An Xid is acted on as the kernel logs it, with the default health interval (30 s)
(issue 26, item 11): the kernel's log is followed, from a file and from /dev/kmsg."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from podium.cli.inject import xid_line
from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.test_resiliency import RECORD_RUN, gpu_health, nodes, runs, until

pytestmark = pytest.mark.integration
KMSG = Path("/dev/kmsg")


def _default_interval_cluster(log_file: bool) -> Cluster:
    """A cluster whose health agent reads HOME/kern.log (`log_file`) or /dev/kmsg."""
    c = make_cluster(gpus=4, cpus=8)
    (c.home / "kern.log").write_text("")
    where = f"  kernel_log: {c.home / 'kern.log'}\n" if log_file else ""
    with open(c.home / "cluster.yaml", "a") as fh:  # interval_s stays at its default, 30 s
        fh.write(f"health:\n{where}  disk_paths: [{c.home}]\n  max_disk_used_percent: 100\n")
    return c


def _fault_to_requeue(c: Cluster, write_xid: Callable[[str], None]) -> float:
    """Seconds from an Xid for a running job's GPU to the job's second run."""
    script = c.script(RECORD_RUN.format(work=c.work))
    job = c.submit("--gpus=1", "--auto-resume=1", str(script))
    c.wait(job, {"RUNNING"})
    until(lambda: runs(c, job), what="the job to start")
    time.sleep(1)  # the first quick checks are long done: the next are 30 s away
    gpu = c.job(job)["gpu_ids"][0]
    write_xid(nodes(c)["gpus"][gpu]["bus_id"])
    fault = time.monotonic()
    until(lambda: len(runs(c, job)) == 2, timeout=20, what="the job to restart")
    took = time.monotonic() - fault
    assert gpu_health(c, gpu)["fenced"] and gpu_health(c, gpu)["fault"] == "xid-79"
    (c.work / f"gate-{job}").touch()
    assert c.wait(job)["state"] == "COMPLETED"
    return took


def test_an_xid_in_the_kernel_log_file_restarts_the_job_within_seconds() -> None:
    c = _default_interval_cluster(log_file=True)
    kern = c.home / "kern.log"
    c.start()
    try:

        def write(bus: str) -> None:
            with open(kern, "a") as fh:
                fh.write(xid_line(bus, 79, time.clock_gettime(time.CLOCK_BOOTTIME)))

        assert _fault_to_requeue(c, write) < 5  # the interval is 30 s
    finally:
        teardown_cluster(c)


def test_an_xid_from_the_kernel_itself_restarts_the_job_within_seconds() -> None:
    """Through the real /dev/kmsg (the default source), as the driver writes it; the
    GPU's bus id is this test cluster's own, so a second daemon following the same
    kernel log (a bystander) fences nothing and keeps its node in service."""
    if os.geteuid() != 0 or not os.access(KMSG, os.R_OK | os.W_OK):
        pytest.skip("needs root and a readable, writable /dev/kmsg")
    c = _default_interval_cluster(log_file=False)
    bystander = _default_interval_cluster(log_file=False)
    c.start()
    bystander.start()
    try:

        def write(bus: str) -> None:
            fd = os.open(KMSG, os.O_WRONLY)
            try:
                os.write(fd, f"<3>NVRM: Xid (PCI:{bus}): 79, pid=1, name=test, fell off\n".encode())
            finally:
                os.close(fd)

        assert _fault_to_requeue(c, write) < 5
        time.sleep(1)  # the bystander follows the same log as fast
        node = nodes(bystander)
        assert node["state"] not in ("drained", "draining"), node
        assert not any(g["health"]["fenced"] for g in node["gpus"]), node["gpus"]
    finally:
        teardown_cluster(bystander)
        teardown_cluster(c)
