"""GPU sharing on the embedded cluster: declared MIG slices scheduled as GPUs, named
by their MIG UUID in CUDA_VISIBLE_DEVICES (batch script and srun steps), shown by
`podium nodes`, fenced with their GPU; shards; MPS shares with their thread share,
memory cap and server directories, never two users on one GPU's MPS server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from podium.server.launch import COMPAT_BIN
from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.test_permissions import _as, other_user  # noqa: F401 (a fixture)
from tests.polling import poll, wait_until

pytestmark = pytest.mark.integration

H100 = Path(__file__).resolve().parents[1] / "unit" / "node" / "data" / "nvml-h100.json"

LAYOUT = "{0: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]}"

SEE = """
echo "batch $CUDA_VISIBLE_DEVICES jobgpus $SLURM_JOB_GPUS" > {work}/seen-$SLURM_JOB_ID
srun sh -c 'echo "step $CUDA_VISIBLE_DEVICES"' >> {work}/seen-$SLURM_JOB_ID
while [ ! -e {work}/gate-$SLURM_JOB_ID ]; do sleep 0.1; done
"""


def mig_cluster(layout: str = LAYOUT) -> Cluster:
    """Two declared H100s, GPU 0 split by `layout`, a kernel log the health agent reads."""
    c = make_cluster(gpus=2)
    kern = c.home / "kern.log"
    kern.write_text("")
    text = (c.home / "cluster.yaml").read_text()
    text = text.replace("memory_mb: 81920}", f"memory_mb: 81920, mig: {layout}}}")
    text += (
        f"health:\n  kernel_log: {kern}\n  interval_s: 0.2\n  retry_s: 1\n"
        f"  deep_interval_s: 100000\n  disk_paths: [{c.home}]\n  max_disk_used_percent: 100\n"
    )
    (c.home / "cluster.yaml").write_text(text)
    return c


@pytest.fixture
def mig() -> Iterator[Cluster]:
    c = mig_cluster()
    c.start()
    try:
        yield c
    finally:
        teardown_cluster(c)


def node(c: Cluster) -> dict[str, Any]:
    data: list[dict[str, Any]] = json.loads(c.cli("nodes", "--json", check=True).stdout)
    return data[0]


def seen(c: Cluster, job_id: int, lines: int = 2, timeout: float = 30) -> list[str]:
    path = c.work / f"seen-{job_id}"
    return poll(lambda: path.read_text().splitlines() if path.exists() else [],
                lambda seen: len(seen) >= lines, f"{lines} lines in {path}", timeout)  # fmt: skip
    raise AssertionError(f"job {job_id} did not write what it saw: {c.job(job_id)['state']}")


def test_a_slice_is_scheduled_named_by_its_uuid_and_shown_with_its_job(mig: Cluster) -> None:
    script = mig.script(SEE.format(work=mig.work))
    small = mig.submit("--gres=gpu:1g.10gb:1", str(script))
    slurm_name = mig.submit("--gpus=nvidia_h100_80gb_hbm3_3g.40gb:1", str(script))
    whole = mig.submit("--gpus=1", str(script))
    shown = {g["index"]: g for g in node(mig)["gpus"]}
    assert sorted(shown) == [1, 2, 4, 5, 6]  # GPU 1 whole, GPU 0's slices by start (2 + start)
    assert [shown[i]["type"] for i in (2, 4, 5, 6)] == ["2g.20gb", "1g.10gb", "1g.10gb", "3g.40gb"]
    assert all(shown[i]["parent"] == 0 for i in (2, 4, 5, 6)) and shown[1]["parent"] is None

    batch, step = seen(mig, small)
    index = int(batch.split()[-1])
    assert shown[index]["type"] == "1g.10gb"
    assert batch == f"batch {shown[index]['uuid']} jobgpus {index}"
    assert step == f"step {shown[index]['uuid']}" and shown[index]["uuid"].startswith("MIG-")
    assert seen(mig, slurm_name)[0] == f"batch {shown[6]['uuid']} jobgpus 6"
    assert seen(mig, whole) == ["batch 1 jobgpus 1", "step 1"]

    owners = {g["index"]: g["job_id"] for g in node(mig)["gpus"]}
    assert (owners[index], owners[6], owners[1]) == (small, slurm_name, whole)
    table = mig.cli("nodes", check=True).stdout
    assert "1g.10gb of GPU 0" in table and "3g.40gb of GPU 0" in table
    scontrol = subprocess.run(
        [f"{COMPAT_BIN}/scontrol", "show", "node"],
        capture_output=True,
        text=True,
        env=mig.env,
        check=True,
    ).stdout
    assert "Gres=gpu:h100:1,gpu:2g.20gb:1,gpu:1g.10gb:2,gpu:3g.40gb:1 " in scontrol
    for j in (small, slurm_name, whole):
        (mig.work / f"gate-{j}").touch()
        assert mig.wait(j)["state"] == "COMPLETED"


def refused_in_one_line(c: Cluster, cases: list[tuple[list[str], str]]) -> None:
    """Each submit of `cases` (options, what the error says) fails with that one line."""
    for args, message in cases:
        result = c.cli("submit", *args, "--wrap", "true")
        assert result.returncode != 0
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_requests_no_slice_can_meet_are_refused_at_submit(mig: Cluster) -> None:
    refused_in_one_line(
        mig,
        [
            (["--gpus=2"], "asks for 2 whole GPU(s) but node node0 has 1 x 'h100' whole and MIG"),
            (["--gres=gpu:1g.10gb:15"], "asks for 15 x 1g.10gb but node node0 can have at most"),
            (["--gpus=1g.5gb:1"], "GPU type '1g.5gb' but node node0 has 1 x 'h100' whole"),
        ],
    )


def test_several_slices_run_one_task_each_or_are_refused(mig: Cluster) -> None:
    """Issue 46: CUDA uses one MIG device per process, yet a 2-slice job of one task
    was admitted with both UUIDs. It is refused in one line; with a task per slice,
    srun binds each task to its own slice (the batch shell sees both, as Slurm's)."""
    refused_in_one_line(
        mig, [(["--gres=gpu:1g.10gb:2"], "CUDA uses one MIG slice per process, so run one task")]
    )
    job = mig.submit(
        "--gres=gpu:1g.10gb:2", "-n", "2", "-o", str(mig.work / "pair-%j.out"), "--wrap",
        "srun sh -c 'echo $SLURM_PROCID $CUDA_VISIBLE_DEVICES'",
    )  # fmt: skip
    assert mig.wait(job)["state"] == "COMPLETED"
    lines = sorted((mig.work / f"pair-{job}.out").read_text().split("\n")[:-1])
    slices = {g["uuid"] for g in node(mig)["gpus"] if g["type"] == "1g.10gb"}
    assert [line.split()[0] for line in lines] == ["0", "1"], lines
    seen_by = [line.split()[1] for line in lines]
    assert set(seen_by) == slices and len(set(seen_by)) == 2, lines  # one each, both used


def test_a_profile_not_in_the_layout_waits_for_an_admin(mig: Cluster) -> None:
    job = mig.submit("--gpus=7g.80gb:1", "--wrap", "true")
    mig.wait_reason(job, "ReqNodeNotAvail")  # until GPU 1 is split (podium mig advise)
    advice = json.loads(mig.cli("mig", "advise", "--json", check=True).stdout)
    (change,) = [g for g in advice["gpus"] if g["changes"]]
    assert change["advised"] == ["7g.80gb"] and change["admits"] == [job]
    # GPU 0, idle, is re-split rather than GPU 1: the whole GPU stays free (a larger
    # free device for the next job)
    assert change["gpu"] == 0 and advice["after"]["largest_free"] == 7


def test_a_fault_on_the_gpu_fences_its_slices_and_stops_only_their_jobs(mig: Cluster) -> None:
    script = mig.script(SEE.format(work=mig.work))
    on_slice = mig.submit("--gres=gpu:1g.10gb:1", str(script))
    on_other_slice = mig.submit("--gres=gpu:2g.20gb:1", str(script))
    on_gpu1 = mig.submit("--gpus=1", str(script))
    for j in (on_slice, on_other_slice, on_gpu1):
        seen(mig, j)
    mig.cli("inject", "xid", "--gpu", "0", "--code", "79", check=True)
    for j in (on_slice, on_other_slice):
        ended = mig.wait(j, timeout=30)
        assert ended["state"] == "NODE_FAIL" and "Xid 79 on GPU 0" in ended["reason"]
    assert mig.job(on_gpu1)["state"] == "RUNNING"
    slices = [g for g in node(mig)["gpus"] if g["parent"] == 0]
    assert slices and all(g["health"]["fenced"] for g in slices)
    later = mig.submit("--gres=gpu:1g.10gb:1", "--wrap", "true")
    mig.wait_reason(later, "ReqNodeNotAvail")  # nothing lands on a fenced GPU's slices
    (mig.work / f"gate-{on_gpu1}").touch()
    assert mig.wait(on_gpu1)["state"] == "COMPLETED"


def test_a_layout_the_gpu_cannot_take_stops_podium_up_in_one_line() -> None:
    c = mig_cluster("{0: [4g.40gb, 4g.40gb]}")
    try:
        result = c.cli("up")
        assert result.returncode != 0
        assert "mig: GPU 0: H100 80GB: at most 1 x 4g.40gb" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    finally:
        teardown_cluster(c)


SHARE = """
echo "gpus $CUDA_VISIBLE_DEVICES jobgpus $SLURM_JOB_GPUS" > {work}/seen-$SLURM_JOB_ID
env | grep -E '^(CUDA_MPS|PODIUM_MPS)' | sort >> {work}/seen-$SLURM_JOB_ID
while [ ! -e {work}/gate-$SLURM_JOB_ID ]; do sleep 0.1; done
"""


@pytest.fixture
def shared() -> Iterator[Cluster]:
    """Two declared H100s: GPU 0 in 2 shards, GPU 1 shared by MPS (100 units)."""
    c = make_cluster(gpus=2)
    text = (
        (c.home / "cluster.yaml")
        .read_text()
        .replace("memory_mb: 81920}", "memory_mb: 81920, sharing: {0: {shards: 2}, 1: {mps: 100}}}")
    )
    (c.home / "cluster.yaml").write_text(text)
    c.start()
    try:
        yield c
    finally:
        teardown_cluster(c)


def test_shards_share_a_gpu_with_no_fence(shared: Cluster) -> None:
    script = shared.script(SHARE.format(work=shared.work))
    first = shared.submit("--gres=shard:1", str(script))
    second = shared.submit("--gres=shard:1", str(script))
    third = shared.submit("--gres=shard:1", str(script))
    for j in (first, second):
        assert seen(shared, j, lines=1)[0] == "gpus 0 jobgpus 0"
    shared.wait_reason(third, "Resources")  # the GPU's two shards are taken
    gpu0 = next(g for g in node(shared)["gpus"] if g["index"] == 0)
    assert gpu0["share"] == {"kind": "shard", "units": 2, "used": 2, "jobs": [first, second]}
    assert "shard 2/2" in shared.cli("nodes", check=True).stdout
    for j in (first, second, third):
        (shared.work / f"gate-{j}").touch()
    assert shared.wait(third)["state"] == "COMPLETED"


def test_an_mps_share_gets_its_threads_memory_cap_and_server_dirs(shared: Cluster) -> None:
    script = shared.script(SHARE.format(work=shared.work))
    half = shared.submit("--gres=mps:50", str(script))
    capped = shared.submit("--gres=mps:30", "--mem-per-gpu=10G", str(script))
    uid = os.getuid()
    pipe = shared.home / "mps" / f"gpu1-{uid}" / "pipe"
    lines = seen(shared, half, lines=5)
    assert lines[0] == "gpus declared-1 jobgpus 1"  # an MPS GPU by UUID: servers renumber
    assert f"CUDA_MPS_PIPE_DIRECTORY={pipe}" in lines
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50" in lines
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=40G" in lines
    assert pipe.is_dir() and (pipe.stat().st_mode & 0o777) == 0o700
    if shutil.which("nvidia-cuda-mps-control") is None:  # no driver here: said, not hidden
        note = "PODIUM_MPS_NOTE=nvidia-cuda-mps-control not found: the job shares GPU 1"
        assert any(line.startswith(note) for line in lines), lines
    capped_lines = seen(shared, capped, lines=5)
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30" in capped_lines
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10G" in capped_lines
    gpu1 = next(g for g in node(shared)["gpus"] if g["index"] == 1)
    assert gpu1["share"] == {"kind": "mps", "units": 100, "used": 80, "jobs": [half, capped]}
    too_big = shared.submit("--gres=mps:30", "--wrap", "true")
    shared.wait_reason(too_big, "Resources")  # 20 units left
    for j in (half, capped):
        (shared.work / f"gate-{j}").touch()
    assert shared.wait(too_big)["state"] == "COMPLETED"
    acct = {j["job_id"]: j for j in json.loads(shared.cli("acct", "--json", check=True).stdout)}
    done = acct[half]  # charged by its share: half a GPU
    assert (done["gpu_type"], done["gpus"], done["gpu_share"]) == ("mps", 50, 0.5)
    assert done["gpu_seconds"] == pytest.approx(done["elapsed_s"] * 0.5, abs=0.01)
    assert "mps:50 (0.5)" in shared.cli("acct", check=True).stdout


def test_two_users_mps_jobs_never_share_a_gpu(
    shared: Cluster,
    other_user: str,  # noqa: F811 (the fixture)
) -> None:
    script = shared.script(SHARE.format(work=shared.work))
    mine = shared.submit("--gres=mps:10", str(script))
    seen(shared, mine, lines=1)
    theirs = _as(shared, other_user, "submit", "--parsable", "--gres=mps:10", "--wrap", "true")
    assert theirs.returncode == 0, theirs.stderr
    waiting = int(theirs.stdout)
    shared.wait_reason(waiting, "Resources")  # 90 units free, but the GPU's server is mine
    (shared.work / f"gate-{mine}").touch()
    assert shared.wait(waiting)["state"] == "COMPLETED"


def test_shares_no_gpu_can_give_are_refused_at_submit(shared: Cluster) -> None:
    refused_in_one_line(
        shared,
        [
            (["--gres=mps:101"], "mps:101 is over 100"),
            (["--gres=shard:3"], "asks for shard:3 but on node node0 its GPUs have 2 shard units"),
            (["--gpus=1"], "asks for 1 whole GPU(s) but node node0 has 0 x 'h100' whole"),
        ],
    )


def test_mig_advise_splits_the_idle_gpu_for_the_waiting_slices(mig: Cluster) -> None:
    script = mig.script(SEE.format(work=mig.work))
    running = [mig.submit("--gres=gpu:1g.10gb:1", str(script)) for _ in range(2)]
    waiting = [mig.submit("--gres=gpu:1g.10gb:1", "--wrap", "true") for _ in range(3)]
    for j in running:
        seen(mig, j)
    mig.wait_reason(waiting[0], "Resources")
    data = json.loads(mig.cli("mig", "advise", "--json", check=True).stdout)
    by_gpu = {g["gpu"]: g for g in data["gpus"]}
    assert by_gpu[0]["changes"] is False  # busy: kept
    assert by_gpu[1]["now"] == [] and by_gpu[1]["changes"] is True  # idle and whole
    assert by_gpu[1]["advised"].count("1g.10gb") >= 3 and by_gpu[1]["drain"] == []
    assert by_gpu[1]["admits"] == sorted(waiting)
    assert (data["before"]["admitted"], data["after"]["admitted"]) == (0, 3)
    assert '"1g.10gb":' in data["configs"]["mig_parted"]
    text = mig.cli("mig", "advise", check=True).stdout
    assert "admit 3 pending GPU job(s) (now 0); 0 GPU(s) to drain" in text
    assert "nvidia-mig-parted apply" in text and "NodeName=node0 Gres=" in text
    shown = {g["index"] for g in node(mig)["gpus"]}
    assert shown == {1, 2, 4, 5, 6}  # advice only: the layout is unchanged
    # the administrator takes the advice: GPU 1, idle, is split at once, checked and
    # returned to service, and the waiting jobs run on its new slices
    applied = mig.cli("mig", "apply", "--advised", check=True).stdout
    assert applied.startswith("node0 GPU 1: whole -> ") and "idle: applies now" in applied
    slices = {g["index"]: g["type"] for g in node(mig)["gpus"] if g["parent"] == 1}
    assert list(slices.values()).count("1g.10gb") >= 3
    for j in waiting:
        ended = mig.wait(j)
        assert ended["state"] == "COMPLETED"
        assert [slices.get(i) for i in ended["gpu_ids"]] == ["1g.10gb"]  # GPU 1's new slices
    for j in running:
        (mig.work / f"gate-{j}").touch()


def test_mig_advise_with_nothing_waiting_changes_nothing(cluster: Cluster) -> None:
    result = cluster.cli("mig", "advise")
    assert result.returncode == 0, result.stderr
    assert "admit 0 pending GPU job(s) (now 0); 0 GPU(s) to drain" in result.stdout
    assert "nothing to change" in result.stdout and "mig-parted" not in result.stdout


def _replayed_h100(tmp_path: Path) -> tuple[Cluster, Callable[..., None]]:
    """A daemon on a recorded H100 (NVML's seam, sampled every 0.2 s), and a function
    that rewrites the recording: its running processes [[pid, MiB]] and its accounting
    ({"mode", "processes": [[pid, start epoch s, max MiB]]})."""
    recording = tmp_path / "nvml.json"
    gpu = json.loads(H100.read_text())["gpus"][0]

    def record(processes: list[list[int]], accounting: dict[str, Any] | None = None) -> None:
        tmp = recording.with_suffix(".tmp")
        kept = dict(gpu, processes=processes, accounting=accounting or {"mode": 0})
        tmp.write_text(json.dumps({"gpus": [kept]}))
        tmp.replace(recording)  # the daemon reads it whole or not at all

    record([])
    c = make_cluster(gpus=1)
    text = (
        (c.home / "cluster.yaml")
        .read_text()
        .replace(
            "gpus: {source: declared, count: 1, type: h100, memory_mb: 81920}",
            "gpus: {source: nvml}",
        )
    )
    (c.home / "cluster.yaml").write_text(text + "health: {gpu_memory_sample_s: 0.2}\n")
    c.env["PODIUM_NVML_REPLAY"] = str(recording)
    c.start()
    return c, record


def _gated_gpu_job(c: Cluster) -> tuple[int, int]:
    """A one-GPU job whose shell waits for `gate` in the work directory: (job, its pid)."""
    job = c.submit(
        "--gpus=1", "--wrap",
        f"echo $$ > {c.work}/pid; while [ ! -e {c.work}/gate ]; do sleep 0.1; done",
    )  # fmt: skip
    pid_file = c.work / "pid"
    wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() != "", "the job's pid")
    return job, int(pid_file.read_text())


def _acct(c: Cluster) -> dict[int, dict[str, Any]]:
    return {j["job_id"]: j for j in json.loads(c.cli("acct", "--json", check=True).stdout)}


def test_acct_keeps_a_jobs_gpu_memory_high_water_mark(tmp_path: Path) -> None:
    """A recorded H100 (NVML's seam): the processes NVML lists for the GPU are the
    job's own shell, holding 3000 then 1000 MiB; acct keeps 3000."""
    c, record = _replayed_h100(tmp_path)
    try:
        job, pid = _gated_gpu_job(c)
        for mib in (3000, 1000):
            record([[pid, mib]])
            poll(lambda: c.job(job).get("gpu_mem_peak_mb"), lambda peak: peak == 3000,
                 "the peak of 3000 MiB", 30)  # fmt: skip
            time.sleep(0.5)  # samples of the lower figure come and go
        record([])
        (c.work / "gate").touch()
        assert c.wait(job)["state"] == "COMPLETED"
        assert _acct(c)[job]["gpu_mem_peak_mb"] == 3000
    finally:
        teardown_cluster(c)


def test_a_job_no_sample_saw_has_its_peak_from_nvml_accounting(tmp_path: Path) -> None:
    """Issue 46: GPU_MEM_MB stayed empty for jobs shorter than the sampling interval.
    No sample ever lists this job's process; NVML's accounting (mode on, as an
    administrator sets it) keeps its 4,000 MiB high-water mark, and another process
    that ran before the job is not counted."""
    c, record = _replayed_h100(tmp_path)
    try:
        job, pid = _gated_gpu_job(c)
        now = time.time()
        record([], {"mode": 1, "processes": [[pid, now, 4000], [pid + 1, now - 3600, 70000]]})
        (c.work / "gate").touch()
        assert c.wait(job)["state"] == "COMPLETED"
        wait_until(lambda: _acct(c)[job]["gpu_mem_peak_mb"] == 4000, "the accounted peak")
    finally:
        teardown_cluster(c)
