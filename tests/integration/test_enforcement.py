"""What a job asked for is enforced, and a job's processes die before its resources are
reused: cgroup memory, cpuset and device limits (v1/hybrid or v2, whichever this
machine has), leftovers of a killed supervisor, a full state disk, and a preemption
interrupted by a daemon restart.

Needs root for cgroups, mknod and tmpfs; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from podium.run.cgroups import current_layout
from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.polling import poll, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (cgroups, mknod, tmpfs)"),
]

# Character devices on a major reserved for local use: no driver answers them, so an
# open that the cgroup allows fails with ENXIO, one it denies with EPERM.
MAJOR = 240
OPEN_ALL = """
import errno, os, sys
for path in sys.argv[1:]:
    try:
        os.close(os.open(path, os.O_RDONLY))
        print(path, "opened")
    except OSError as exc:
        print(path, errno.errorcode[exc.errno])
"""


def _has_controller(name: str) -> bool:
    """Whether this machine's cgroups offer the controller (v1, or v2 to Podium's group)."""
    layout = current_layout()
    return name in layout.v1 or name in layout.v2_controllers(layout.own_v2)


def _enforced(status: str, controller: str) -> bool:
    """The node's enforcement line says enforced where the controller exists, and says
    why not where it does not (a GPU machine in a microVM may lack cpuset and memory)."""
    if _has_controller(controller):
        return status.startswith("enforced")
    return status.startswith("accounted only") and controller in status


def _until(predicate: Callable[[], object], timeout: float = 30, what: str = "condition") -> None:
    wait_until(predicate, what, timeout)


@pytest.fixture
def gpu_devices() -> Iterator[list[Path]]:
    directory = Path(tempfile.mkdtemp(prefix="podium-dev-"))
    paths = []
    for i in range(4):
        path = directory / f"gpu{i}"
        os.mknod(path, 0o666 | 0o020000, os.makedev(MAJOR, 100 + i))
        paths.append(path)
    try:
        yield paths
    finally:
        for path in paths:
            path.unlink(missing_ok=True)
        directory.rmdir()


def test_memory_over_the_limit_ends_out_of_memory(cluster: Cluster) -> None:
    c = cluster
    job = c.submit(
        "--mem=100M", "-o", "oom-%j.out", "--wrap",
        "python3 -c \"b = b'x' * (400 << 20); print('survived')\"",
    )  # fmt: skip
    done = c.wait(job, timeout=60)
    if not _has_controller("memory"):
        pytest.skip("no memory controller on this machine")
    assert done["state"] == "OUT_OF_MEMORY", done
    assert "OutOfMemory" in done["reason"] and "100 MiB" in done["reason"]
    assert "survived" not in (c.work / f"oom-{job}.out").read_text()
    small = c.submit("--mem=200M", "--wrap", "python3 -c \"b = b'x' * (50 << 20)\"")
    assert c.wait(small)["state"] == "COMPLETED"


def test_cpus_are_given_by_id_and_confined() -> None:
    cpus = len(os.sched_getaffinity(0))
    c = make_cluster(cpus=cpus)
    c.start()
    try:
        show = "grep Cpus_allowed_list /proc/self/status; sleep 2"
        jobs = [c.submit("-c", "1", "-o", f"cpu{i}-%j.out", "--wrap", show) for i in range(2)]
        seen = []
        for i, job in enumerate(jobs):
            assert c.wait(job)["state"] == "COMPLETED"
            seen.append((c.work / f"cpu{i}-{job}.out").read_text().split()[-1])
        assert all("," not in s and "-" not in s for s in seen), seen  # one CPU each
        if cpus >= 2:
            assert seen[0] != seen[1]  # they ran together, on different CPUs
        nodes = json.loads(c.cli("nodes", "--json", check=True).stdout)
        assert _enforced(nodes[0]["enforcement"]["cpus"], "cpuset"), nodes[0]["enforcement"]
    finally:
        teardown_cluster(c)


def test_a_job_cannot_open_a_gpu_it_was_not_given(gpu_devices: list[Path]) -> None:
    devices = ", ".join(str(p) for p in gpu_devices)
    c = make_cluster(gpus=4)
    config = (
        (c.home / "cluster.yaml")
        .read_text()
        .replace(
            "type: h100, memory_mb: 81920}", f"type: h100, memory_mb: 81920, devices: [{devices}]}}"
        )
    )
    (c.home / "cluster.yaml").write_text(config)
    (c.work / "open_all.py").write_text(OPEN_ALL)
    c.start()
    try:
        paths = " ".join(str(p) for p in gpu_devices)
        one = c.submit("--gpus=1", "-o", "one-%j.out", "--wrap", f"python3 open_all.py {paths}")
        none = c.submit("-o", "none-%j.out", "--wrap", f"python3 open_all.py {paths}")
        given = c.wait(one)["gpu_ids"]
        c.wait(none)
        results = dict(
            line.split() for line in (c.work / f"one-{one}.out").read_text().splitlines()
        )
        for i, path in enumerate(gpu_devices):
            assert results[str(path)] == ("ENXIO" if i in given else "EPERM"), results
        results = dict(
            line.split() for line in (c.work / f"none-{none}.out").read_text().splitlines()
        )
        assert set(results.values()) == {"EPERM"}, results
        enforcement = json.loads(c.cli("nodes", "--json", check=True).stdout)[0]["enforcement"]
        assert enforcement["devices"].startswith("enforced"), enforcement
        assert _enforced(enforcement["memory"], "memory"), enforcement
    finally:
        teardown_cluster(c)


def test_a_killed_supervisors_job_is_stopped_before_its_gpus_are_reused(
    cluster: Cluster,
) -> None:
    c = cluster
    pids = c.work / "pids"
    script = c.script(
        f'sleep 300 & echo $! >> {pids}\n'
        f'setsid sleep 300 & echo $! >> {pids}\n'
        f'echo $$ >> {pids}\nwait\n',
        "long.sh",
    )  # fmt: skip
    job = c.submit("--gpus=4", "--auto-resume=1", str(script))
    c.wait(job, {"RUNNING"})
    _until(lambda: pids.exists() and len(pids.read_text().split()) == 3, what="the job's pids")
    first = [int(p) for p in pids.read_text().split()]
    supervisor = json.loads((c.home / "jobs" / str(job) / "started.json").read_text())["pid"]
    os.kill(supervisor, signal.SIGKILL)
    next_job = c.submit("--gpus=4", "--wrap", "cat /proc/[0-9]*/cmdline > /dev/null; echo ok")
    # The requeued run may start only once every process of the first run is gone.
    _until(lambda: len(pids.read_text().split()) >= 6, timeout=60, what="the second run")
    for pid in first:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    events = [e["kind"] for e in c.job(job)["events"]]
    assert events.count("start") == 2 and "requeue" in events
    c.cli("cancel", str(job), check=True)
    assert c.wait(next_job, timeout=60)["state"] == "COMPLETED"


def test_a_full_state_disk_loses_no_outcome() -> None:
    mount = Path(tempfile.mkdtemp(prefix="podium-tmpfs-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)])
    if done.returncode != 0:
        os.rmdir(mount)
        pytest.skip("cannot mount a tmpfs here")
    c = make_cluster()
    home = mount / "home"
    subprocess.run(["cp", "-a", str(c.home), str(home)], check=True)
    state = Cluster(home, c.work)  # state on the small disk, outputs elsewhere
    state.env["PODIUM_HOME"] = str(home)
    try:
        state.start()
        runs = c.work / "runs"
        held = state.submit("--hold", "--wrap", "true")
        jobs = [
            state.submit("--auto-resume=2", "--wrap", f"echo run >> {runs}; sleep 2")
            for _ in range(3)
        ]
        for job in jobs:
            state.wait(job, {"RUNNING"})
        filler = mount / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True)
        for job in jobs:
            record = state.wait(job, timeout=60)
            assert record["state"] == "COMPLETED" and record["restart_count"] == 0, record
        assert runs.read_text().split() == ["run"] * 3
        for args in (["submit", "--wrap", "true"], ["hold", str(held)], ["cancel", str(held)]):
            result = state.cli(*args)
            err = result.stderr.strip()
            assert "\n" not in err and "internal error" not in err and "Traceback" not in err
            # It may still work (SQLite reuses room in its WAL); if not, it says why.
            assert result.returncode == 0 or "state disk is full" in err, err
        assert state.alive()
        filler.unlink()
        result = poll(
            lambda: state.cli("submit", "--parsable", "--wrap", "true"),
            lambda done: done.returncode == 0, "a submission once the disk has room", 60,
        )  # fmt: skip
        assert state.wait(int(result.stdout))["state"] == "COMPLETED"
    finally:
        teardown_cluster(state)
        subprocess.run(["umount", "-l", str(mount)])
        os.rmdir(mount)
        teardown_cluster(c)


def test_a_preemption_survives_a_daemon_restart() -> None:
    c = make_cluster(
        kill_wait=6.0,
        extra="qos:\n  - {name: high, priority: 1000, preempt: [low]}\n"
        "  - {name: normal, priority: 100}\n  - {name: low, priority: 10, preempt_mode: cancel}\n",
    )
    c.start()
    try:
        victim = c.submit(
            "--qos=low", "--gpus=4", "--wrap",
            f"trap 'touch {c.work}/term; sleep 3; exit 0' TERM; touch {c.work}/ready; "
            "sleep 120 & wait",
        )  # fmt: skip
        c.wait(victim, {"RUNNING"})
        # Preempt only once the trap is set: a signal before it would kill the shell.
        _until(lambda: (c.work / "ready").exists(), what="the victim's trap")
        urgent = c.submit("--qos=high", "--gpus=1", "--wrap", "true")
        _until(lambda: (c.work / "term").exists(), what="the preemption signal")
        c.kill9()
        c.start()
        job = c.wait(victim, timeout=30)
        assert job["state"] == "PREEMPTED" and job["restart_count"] == 0, job
        assert c.wait(urgent, timeout=30)["state"] == "COMPLETED"
    finally:
        teardown_cluster(c)
