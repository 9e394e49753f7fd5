from __future__ import annotations

from pathlib import Path

from podium.run.bpfdev import deny_program
from podium.run.cgroups import Layout, enforcement, parse_layout

HYBRID_MOUNTS = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/devices cgroup rw,relatime,devices 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
HYBRID_OWN = "4:memory:/process_api/6be6\n3:cpuset:/\n5:devices:/\n0::/\n"


def test_the_hybrid_layout_these_machines_have() -> None:
    layout = parse_layout(HYBRID_MOUNTS, HYBRID_OWN)
    assert layout.v2 == Path("/sys/fs/cgroup/unified") and layout.own_v2 == "/"
    assert layout.v1 == {
        "cpuset": Path("/sys/fs/cgroup/cpuset"),
        "memory": Path("/sys/fs/cgroup/memory"),
        "devices": Path("/sys/fs/cgroup/devices"),
    }
    assert layout.own_v1["memory"] == "/process_api/6be6"


def test_pure_v2() -> None:
    layout = parse_layout(
        "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n", "0::/system.slice/podium.service\n"
    )
    assert layout.v2 == Path("/sys/fs/cgroup") and layout.v1 == {}
    assert layout.own_v2 == "/system.slice/podium.service"


def test_what_is_only_accounted_is_said() -> None:
    report = enforcement(Layout(), root=False, v2_base=None, cpus_known=True, devices_known=True)
    assert all(v.startswith(("accounted only", "tracked")) for v in report.values())
    assert "not root" in report["memory"]
    report = enforcement(Layout(), root=True, v2_base=None, cpus_known=False, devices_known=False)
    assert "more CPUs than this machine has" in report["cpus"]
    assert "name no device files" in report["devices"]


def test_the_device_program_denies_exactly_the_listed_devices() -> None:
    program = deny_program([("c", 195, 1), ("c", 195, 2)])
    assert len(program) % 8 == 0
    assert len(program) // 8 == 4 + 5 * 2 + 2  # prologue, 5 per device, allow + exit
