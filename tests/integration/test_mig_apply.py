"""`podium mig apply` on the embedded cluster: the GPU is drained (its running job
finishes, nothing new lands on it), re-split by the configured command (a recorder
standing in for nvidia-mig-parted: these machines have no GPU), health-checked and
returned to service with its new slices, every other device keeping its number; the
layout outlives a restart of the daemon."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import Cluster, teardown_cluster
from tests.integration.test_gpu_sharing import SEE, mig_cluster, node, seen
from tests.polling import poll

pytestmark = pytest.mark.integration


def recording_cluster() -> tuple[Cluster, Path]:
    """mig_cluster() whose mig_apply_command records its arguments."""
    c = mig_cluster()
    log = c.home / "mig-apply.log"
    recorder = c.home / "record-mig-apply"
    recorder.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    recorder.chmod(0o755)
    text = (c.home / "cluster.yaml").read_text()
    text = text.replace(
        "  max_disk_used_percent: 100\n",
        "  max_disk_used_percent: 100\n"
        f'  mig_apply_command: "{recorder} --gpu {{gpu}} --layout {{layout}} -f {{config}}"\n',
    )
    (c.home / "cluster.yaml").write_text(text)
    return c, log


def wait_split(c: Cluster, gpu: int, profiles: list[str], timeout: float = 30) -> None:
    """Until GPU `gpu` is back in service as `profiles`."""
    poll(
        lambda: [g for g in node(c)["gpus"] if g["parent"] == gpu],
        lambda parts: sorted(g["type"] for g in parts) == sorted(profiles)
        and not any(g["health"]["fenced"] for g in parts),
        f"GPU {gpu} back in service as {profiles}", timeout,
    )  # fmt: skip


def test_apply_drains_re_splits_checks_and_returns_the_gpu() -> None:
    c, log = recording_cluster()
    c.start()
    try:
        script = str(c.script(SEE.format(work=c.work)))
        on_slice = c.submit("--gres=gpu:1g.10gb:1", script)
        on_gpu1 = c.submit("--gpus=1", script)
        seen(c, on_slice)
        seen(c, on_gpu1)

        out = c.cli("mig", "apply", "--gpu", "0", "--layout", "7g.80gb", check=True).stdout
        assert "GPU 0: 2g.20gb+1g.10gb+1g.10gb+3g.40gb -> 7g.80gb: drained, waits for " in out
        assert f"job {on_slice} (ends " in out
        later = c.submit("--gres=gpu:1g.10gb:1", "--wrap", "true")
        c.wait_reason(later, "ReqNodeNotAvail")  # nothing new lands on the draining GPU
        slices = [g for g in node(c)["gpus"] if g["parent"] == 0]
        assert {g["health"]["label"] for g in slices} == {"unschedulable-pending-mig-apply"}
        assert c.job(on_slice)["state"] == "RUNNING" and not log.exists()  # a drain

        (c.work / f"gate-{on_slice}").touch()
        assert c.wait(on_slice)["state"] == "COMPLETED"
        wait_split(c, 0, ["7g.80gb"])
        (recorded,) = log.read_text().splitlines()
        assert recorded.startswith("--gpu 0 --layout 7g.80gb -f /")
        gpus = {g["index"]: g for g in node(c)["gpus"]}
        assert sorted(gpus) == [1, 2]  # the slice at start 0 of GPU 0: 2 + 0
        assert gpus[1]["job_id"] == on_gpu1 and c.job(on_gpu1)["state"] == "RUNNING"

        big = c.submit("--gpus=7g.80gb:1", script)
        batch, _step = seen(c, big)
        assert batch == f"batch {gpus[2]['uuid']} jobgpus 2"
        for j in (big, on_gpu1):
            (c.work / f"gate-{j}").touch()
            assert c.wait(j)["state"] == "COMPLETED"
        c.cli("cancel", str(later), check=True)

        c.stop()
        c.start()  # declared GPUs keep the applied layout, as the hardware would
        assert [g["type"] for g in node(c)["gpus"] if g["parent"] == 0] == ["7g.80gb"]
    finally:
        teardown_cluster(c)


def test_bad_requests_are_one_line_and_change_nothing() -> None:
    c, log = recording_cluster()
    c.start()
    try:
        cases = [
            (
                ["--gpu", "0", "--layout", "4g.40gb,4g.40gb"],
                "GPU 0: H100 80GB: at most 1 x 4g.40gb",
            ),
            (["--gpu", "7", "--layout", "7g.80gb"], "node node0 has no GPU 7 (it has 0-1)"),
            (["--gpu", "0", "--layout", "1g.5gb"], "'1g.5gb' is not a MIG profile of the H100"),
            (
                ["--gpu", "0", "--layout", "3g.40gb,2g.20gb,1g.10gb,1g.10gb"],
                "GPU 0 is already 2g.20gb+1g.10gb+1g.10gb+3g.40gb: nothing to apply",
            ),
            (["--gpu", "0", "--layout", ",,"], "is not a list of MIG profiles"),
            (["--layout", "7g.80gb"], "--layout needs --gpu N"),
        ]
        for args, message in cases:
            result = c.cli("mig", "apply", *args)
            assert result.returncode != 0, args
            assert message in result.stderr, (args, result.stderr)
            assert len(result.stderr.strip().splitlines()) == 1
        assert not any(g["health"]["fenced"] for g in node(c)["gpus"])
        assert not log.exists()
    finally:
        teardown_cluster(c)
