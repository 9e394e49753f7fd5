"""`podium mig apply`'s planner and applier: what it refuses, the commands it runs
(recorded through the runner seam, never on a GPU), what it reads back, and the node's
devices after it (every other device keeps its number)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from podium.api.health import Label, Remedy
from podium.config.cluster import ClusterConfig, parse_config
from podium.errors import PermissionDenied, SpecError
from podium.node.inventory import declared, read_nvml
from podium.node.nvml_replay import RecordedNvml
from podium.node.slices import resolve_slices
from podium.server.local_node import LocalNode
from podium.server.mig_apply import MigApplier, parse_layout
from podium.store.db import Store
from podium.store.health_table import HealthTable
from podium.store.mig_layouts import MigLayouts

MIG_H100 = Path(__file__).parents[1] / "node" / "data" / "nvml-h100-mig.json"
CONFIG = (
    "node: {name: n0, cpus: 4, memory_mb: 4000, gpus: {source: declared, count: 3, "
    "type: h100, memory_mb: 81920, mig: {0: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb], "
    "1: [7g.80gb]}, sharing: {2: {mps: 100}}}}\n"
)


class Recorder:
    """Stands in for subprocess.run: records each argv, answers `codes` in turn."""

    def __init__(self, *codes: int) -> None:
        self.argvs: list[list[str]] = []
        self.codes = list(codes)

    def __call__(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.argvs.append(list(argv))
        code = self.codes.pop(0) if self.codes else 0
        return subprocess.CompletedProcess(argv, code, "", "Insufficient Permissions\n")


def applier(
    tmp_path: Path, config: ClusterConfig, node: LocalNode, real: bool = False, **kw: Any
) -> MigApplier:
    tmp_path.mkdir(exist_ok=True)
    store = Store(tmp_path / "db")
    return MigApplier(
        config, node, MigLayouts(store), HealthTable(store), real, clock=lambda: 5.0, **kw
    )


def declared_node() -> tuple[ClusterConfig, LocalNode]:
    config = parse_config(CONFIG, "cluster.yaml")
    gpus = declared(config.node.gpus)
    return config, LocalNode.from_config(config, gpus, resolve_slices(config.node.gpus, gpus))


def test_layouts_are_profiles_joined_by_commas_or_whole() -> None:
    assert parse_layout("3g.40gb,1g.10gb") == parse_layout("3g.40gb+1g.10gb")
    assert parse_layout(" whole ") == []
    with pytest.raises(SpecError, match="or 'whole'"):
        parse_layout("3g.40gb,,1g.10gb")


def test_a_request_drains_the_gpu_and_names_its_jobs(tmp_path: Path) -> None:
    config, node = declared_node()
    migs = applier(tmp_path, config, node)
    # job 4 holds a slice of GPU 0 (3 + 8 * 0 + start 0), job 5 GPU 1's
    running: list[Any] = [
        {"job_id": 4, "start_time": 100.0, "time_limit_s": 60, "gpu_ids": "[3]"},
        {"job_id": 5, "start_time": 100.0, "time_limit_s": None, "gpu_ids": "[11]"},
    ]
    answer = migs.request("root", True, 0, ["7g.80gb"], running, 10.0)
    assert answer["now"] == ["2g.20gb", "1g.10gb", "1g.10gb", "3g.40gb"]
    assert answer["drain"] == [{"job_id": 4, "expected_end": 160.0}]
    h = migs.health.get("n0", 0)
    assert (h.label, h.fenced, h.remedy) == (Label.PENDING_MIG_APPLY, True, Remedy.MIG_APPLY)
    assert migs.plans.planned("n0", 0) == ["7g.80gb"]
    # a second request replaces the plan while it waits
    migs.request("root", True, 0, ["4g.40gb", "3g.40gb"], [], 11.0)
    assert migs.plans.planned("n0", 0) == ["4g.40gb", "3g.40gb"]


@pytest.mark.parametrize(
    ("admin", "gpu", "layout", "error", "message"),
    [
        (False, 0, ["7g.80gb"], PermissionDenied, "only an administrator"),
        (True, 5, ["7g.80gb"], SpecError, "node n0 has no GPU 5 (it has 0-2)"),
        (True, 2, ["7g.80gb"], SpecError, "GPU 2 is shared by mps (node.gpus.sharing)"),
        (True, 0, ["4g.40gb", "4g.40gb"], SpecError, "GPU 0: H100 80GB: at most 1 x 4g.40gb"),
        (True, 1, ["7g.80gb"], SpecError, "GPU 1 is already 7g.80gb: nothing to apply"),
    ],
)
def test_bad_requests_change_nothing(
    tmp_path: Path, admin: bool, gpu: int, layout: list[str], error: type, message: str
) -> None:
    config, node = declared_node()
    migs = applier(tmp_path, config, node)
    with pytest.raises(error, match=re.escape(message)):
        migs.request("ann", admin, gpu, layout, [], 1.0)
    assert not any(h.fenced for h in migs.health.all())
    assert migs.plans.planned("n0", gpu) is None


def test_a_fenced_gpu_is_resumed_before_it_is_re_split(tmp_path: Path) -> None:
    from podium.api.health import Health

    config, node = declared_node()
    migs = applier(tmp_path, config, node)
    migs.health.put(Health("n0", 0, Label.PENDING_RESET, True, "xid-48", "Xid 48"), 1.0)
    with pytest.raises(SpecError, match=r"resume it first \(podium resume --gpu 0\)"):
        migs.request("root", True, 0, ["7g.80gb"], [], 2.0)


def test_a_declared_gpu_is_re_split_and_the_others_keep_their_numbers(tmp_path: Path) -> None:
    config, node = declared_node()
    migs = applier(tmp_path, config, node, run=Recorder())
    before = {d.index: d for d in node.devices if d.physical != 0}
    migs.request("root", True, 0, ["3g.40gb", "3g.40gb"], [], 1.0)
    done = migs.apply(0)
    assert done == "GPU 0 is 3g.40gb+3g.40gb (declared GPU: no command)"
    assert {d.index: d for d in node.devices if d.physical != 0} == before
    mine = [(d.index, d.type, d.start) for d in node.devices if d.parent == 0]
    assert mine == [(3, "3g.40gb", 0), (7, "3g.40gb", 4)]
    assert node.parts[7] == pytest.approx(3 / 7)
    assert config.node.gpus.mig[0] == ["3g.40gb", "3g.40gb"]  # what admission reads
    assert migs.plans.planned("n0", 0) is None
    assert migs.plans.all_applied("n0") == {0: ["3g.40gb", "3g.40gb"]}
    migs.request("root", True, 1, [], [], 2.0)  # GPU 1 back to whole: MIG off
    migs.apply(1)
    assert [d.index for d in node.devices if d.physical == 1] == [1]
    assert 1 not in config.node.gpus.mig


def test_real_gpus_use_nvidia_smi_largest_first_and_read_the_slices_back(
    tmp_path: Path,
) -> None:
    nvml = RecordedNvml.from_file(MIG_H100)
    gpus = read_nvml(nvml)
    assert gpus is not None
    config = ClusterConfig.model_validate(
        {"node": {"name": "n0", "cpus": 1, "memory_mb": 1000, "gpus": {"source": "nvml"}}}
    )
    node = LocalNode.from_config(config, gpus, [])  # GPU 0 whole until the apply
    run = Recorder(0, 1, 1)  # nothing to destroy: those two fail, and may
    migs = applier(tmp_path, config, node, real=True, nvml=nvml, run=run, which=_only("nvidia-smi"))
    migs.request("root", True, 0, ["1g.10gb", "3g.40gb", "1g.10gb", "2g.20gb"], [], 1.0)
    migs.apply(0)
    assert run.argvs == [
        ["nvidia-smi", "-i", "0", "-mig", "1"],
        ["nvidia-smi", "mig", "-i", "0", "-dci"],
        ["nvidia-smi", "mig", "-i", "0", "-dgi"],
        ["nvidia-smi", "mig", "-i", "0", "-cgi", "3g.40gb,2g.20gb,1g.10gb,1g.10gb", "-C"],
    ]
    assert sorted(d.type for d in node.devices if d.parent == 0) == [
        "1g.10gb",
        "1g.10gb",
        "2g.20gb",
        "3g.40gb",
    ]


def test_a_failed_or_wrong_apply_raises_in_one_line(tmp_path: Path) -> None:
    nvml = RecordedNvml.from_file(MIG_H100)
    gpus = read_nvml(nvml)
    assert gpus is not None
    config = ClusterConfig.model_validate(
        {"node": {"name": "n0", "cpus": 1, "memory_mb": 1000, "gpus": {"source": "nvml"}}}
    )
    node = LocalNode.from_config(config, gpus, [])
    parted = applier(
        tmp_path, config, node, real=True, nvml=nvml, run=Recorder(3), which=lambda _: "/x"
    )
    parted.request("root", True, 0, ["7g.80gb"], [], 1.0)
    with pytest.raises(RuntimeError) as failed:
        parted.apply(0)
    assert "nvidia-mig-parted apply -f " in str(failed.value)
    assert str(failed.value).endswith("-c podium-advised exited 3: Insufficient Permissions")
    devices = list(node.devices)
    wrong = applier(
        tmp_path / "b", config, node, real=True, nvml=nvml, run=Recorder(), which=lambda _: "/x"
    )
    wrong.request("root", True, 0, ["7g.80gb"], [], 1.0)
    with pytest.raises(RuntimeError, match=r"GPU 0 reads back as 3g.40gb\+2g.20gb"):
        wrong.apply(0)  # the recorded GPU did not change: never schedule what is not there
    assert node.devices == devices
    none = applier(tmp_path / "c", config, node, real=True, nvml=nvml, which=lambda _: None)
    none.request("root", True, 0, ["7g.80gb"], [], 1.0)
    with pytest.raises(RuntimeError, match="neither nvidia-mig-parted nor nvidia-smi"):
        none.apply(0)


def _only(name: str) -> Any:
    return lambda tool: f"/usr/bin/{tool}" if tool == name else None
