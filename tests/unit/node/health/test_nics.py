"""RDMA ports (podium.node.health.nics) read from a sysfs tree laid out as the kernel's
/sys/class/infiniband is (the values recorded from mlx5 and EFA devices' files)."""

from __future__ import annotations

from pathlib import Path

from podium.node.health.check_results import Action, Status
from podium.node.health.nics import NicPortCheck, read_ports


def _port(root: Path, device: str, port: str, state: str, phys: str, layer: str) -> None:
    where = root / device / "ports" / port
    where.mkdir(parents=True)
    (where / "state").write_text(state + "\n")
    (where / "phys_state").write_text(phys + "\n")
    (where / "rate").write_text("400 Gb/sec (4X NDR)\n")
    (where / "link_layer").write_text(layer + "\n")


def _node(tmp_path: Path) -> Path:
    root = tmp_path / "infiniband"
    _port(root, "mlx5_0", "1", "4: ACTIVE", "5: LinkUp", "InfiniBand")
    _port(root, "mlx5_1", "1", "1: DOWN", "2: Polling", "InfiniBand")
    _port(root, "mlx5_2", "1", "2: INIT", "5: LinkUp", "InfiniBand")
    _port(root, "efa_0", "1", "4: ACTIVE", "5: LinkUp", "Unspecified")
    return root


def test_ports_are_read_with_their_kind(tmp_path: Path) -> None:
    ports = {p.where: p for p in read_ports(_node(tmp_path))}
    assert list(ports) == ["efa_0 port 1", "mlx5_0 port 1", "mlx5_1 port 1", "mlx5_2 port 1"]
    assert ports["efa_0 port 1"].kind == "EFA" and ports["mlx5_0 port 1"].state == "ACTIVE"
    assert ports["mlx5_1 port 1"].phys_state == "Polling"


def test_fewer_active_ports_than_expected_drain_the_node(tmp_path: Path) -> None:
    root = _node(tmp_path)
    results = NicPortCheck(root, expected=4).run()
    [bad] = [r for r in results if r.status != Status.OK]
    assert (bad.status, bad.action, bad.gpu) == (Status.CRITICAL, Action.DRAIN, None)
    assert bad.reason.startswith("2 of 4 expected RDMA ports ACTIVE (not: mlx5_1 port 1")
    assert "mlx5_2 port 1 (InfiniBand): INIT: link up, not configured by a subnet manager" in (
        bad.reason
    )
    assert all(r.status == Status.OK for r in NicPortCheck(root, expected=2).run())


def test_without_a_count_a_down_port_is_a_warning_saying_how_to_judge_it(tmp_path: Path) -> None:
    results = NicPortCheck(_node(tmp_path)).run()
    warned = [r for r in results if r.status == Status.WARNING]
    assert len(warned) == 2 and all(r.action == Action.RECORD for r in warned)
    assert "set health.nic_ports" in warned[0].reason


def test_no_rdma_device_is_skipped_unless_ports_are_expected(tmp_path: Path) -> None:
    [none] = NicPortCheck(tmp_path / "absent").run()
    assert none.skipped and "no InfiniBand, RoCE or EFA device" in none.reason
    [missing] = NicPortCheck(tmp_path / "absent", expected=8).run()
    assert (missing.status, missing.action) == (Status.CRITICAL, Action.DRAIN)
