"""Containers on the embedded cluster (podium.run.containers.lifecycle): Pyxis' options, enroot's
way (an unprivileged user namespace, the image as an overlay, no daemon).

The images are made here, offline: a busybox-static root with a marker file, an
/etc/environment and an /etc/rc (what enroot writes into the images it imports), as
a root directory and as a squashfs file. Every job runs as a second Unix user.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.test_cleanup import _gone
from tests.integration.test_permissions import _run, other_user
from tests.polling import wait_until

pytestmark = pytest.mark.integration
__all__ = ["other_user"]  # the fixture, imported for pytest

BUSYBOX = shutil.which("busybox")
MKSQUASHFS = shutil.which("mksquashfs")
APPLETS = ("sh", "id", "cat", "ls", "touch", "echo", "sleep", "pwd", "grep", "kill", "env")


def _userns_works() -> bool:
    probe = subprocess.run(
        ["unshare", "--user", "--mount", "true"], capture_output=True, user=65534, group=65534
    )
    return probe.returncode == 0


@pytest.fixture(scope="module")
def images() -> Iterator[dict[str, Path]]:
    """{"dir": a root directory image, "sqsh": the same as squashfs, "junk": a file that
    is no squashfs}, readable by everyone."""
    if BUSYBOX is None or MKSQUASHFS is None:
        pytest.skip("needs Debian's busybox-static and squashfs-tools (.ci/run installs them)")
    if os.geteuid() != 0 or not _userns_works():
        pytest.skip("needs root and unprivileged user namespaces (the container runtime's)")
    base = Path(tempfile.mkdtemp(prefix="podium-images-"))
    base.chmod(0o755)
    root = base / "rootfs"
    for sub in ("bin", "etc", "proc", "sys", "dev", "tmp", "data"):
        (root / sub).mkdir(parents=True)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for applet in APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    (root / "marker").write_text("inside-the-image\n")
    (root / "etc" / "environment").write_text('IMAGE_VAR="from-image"\nKEEP_ME=image-value\n')
    (root / "etc" / "rc").write_text('echo entrypoint-ran\nexec "$@"\n')
    subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
    sqsh = base / "image.sqsh"
    subprocess.run(
        [MKSQUASHFS, str(root), str(sqsh), "-noappend", "-quiet", "-no-progress"],
        check=True,
        capture_output=True,
    )
    sqsh.chmod(0o644)
    junk = base / "junk.sqsh"
    junk.write_text("not a squashfs\n")
    junk.chmod(0o644)
    try:
        yield {"dir": root, "sqsh": sqsh, "junk": junk}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _submit(c: Cluster, user: str, *args: str) -> int:
    done = _run(c, user, "submit", "--parsable", *args)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def _host_mounts(c: Cluster) -> list[str]:
    """Host mount points under the cluster's home or work directory."""
    with open("/proc/self/mountinfo") as fh:
        points = [line.split()[4] for line in fh]
    return [p for p in points if p.startswith((str(c.home), str(c.work)))]


def _layers_left(c: Cluster, user: str) -> list[str]:
    """The containers' state left in `user`'s cache (writable layers, mount points)."""
    run = c.home / "containers" / str(pwd_uid(user)) / "run"
    return sorted(p.name for p in run.iterdir()) if run.exists() else []


def test_a_job_runs_in_its_image_as_its_user_with_what_pyxis_options_ask(
    cluster: Cluster, other_user: str, images: dict[str, Path]
) -> None:
    c = cluster
    data = c.work / "data"
    data.mkdir()
    data.chmod(0o777)
    (data / "input.txt").write_text("host-file\n")
    body = (
        "id -u; cat /marker; pwd; cat input.txt; echo IMAGE_VAR=$IMAGE_VAR KEEP_ME=$KEEP_ME;"
        " touch /data/x 2>/dev/null || echo data-is-read-only; touch /new && echo root-writable;"
        " ls /dev | grep -c null; grep -c overlay /proc/self/mountinfo"
    )
    job_id = _submit(
        c, other_user, f"--container-image={images['sqsh']}",
        f"--container-mounts={data}:/data:ro", "--container-workdir=/data",
        "--container-env=KEEP_ME", "--export=ALL,KEEP_ME=job-value", "-o", "in-%j.out",
        "--wrap", body,
    )  # fmt: skip
    job = c.wait(job_id)
    out = (c.work / f"in-{job_id}.out").read_text().split("\n")
    assert job["state"] == "COMPLETED", (job["reason"], out)
    assert out[0] == str(pwd_uid(other_user))
    assert out[1:4] == ["inside-the-image", "/data", "host-file"]
    assert out[4] == "IMAGE_VAR=from-image KEEP_ME=job-value"  # --container-env keeps the job's
    assert out[5:7] == ["data-is-read-only", "root-writable"]
    assert out[7] == "1" and int(out[8]) >= 1
    assert _host_mounts(c) == []  # the mounts lived in the task's own namespace
    assert _layers_left(c, other_user) == []  # the writable layer is gone


def test_read_only_mounts_keep_the_flags_their_source_locks(
    cluster: Cluster, other_user: str, images: dict[str, Path]
) -> None:
    """A read-only container whose image, and a ro bind whose source, sit under mounts
    that are nosuid, nodev, noatime (and noexec for the data): the job's user
    namespace locks those flags, and both read-only remounts keep them (they failed
    with EPERM when they dropped one), the data stays noexec inside."""
    c = cluster
    base = Path(tempfile.mkdtemp(prefix="podium-locked-"))
    base.chmod(0o755)
    image, data = base / "image", base / "data"
    shutil.copytree(images["dir"], image, symlinks=True)
    data.mkdir(mode=0o755)
    (data / "input.txt").write_text("locked-data\n")
    (data / "tool").write_text("#!/bin/sh\necho ran\n")
    subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)
    (data / "tool").chmod(0o755)
    mounted: list[Path] = []
    try:
        for where, flags in ((image, "nosuid,nodev,noatime"), (data, "ro,nosuid,nodev,noexec")):
            subprocess.run(["mount", "--bind", str(where), str(where)], check=True)
            mounted.append(where)
            subprocess.run(["mount", "-o", f"remount,bind,{flags}", str(where)], check=True)
        job_id = _submit(
            c, other_user, f"--container-image={image}", "--container-readonly",
            f"--container-mounts={data}:/data:ro", "-o", "locked-%j.out", "--wrap",
            "cat /marker /data/input.txt; /data/tool 2>/dev/null || echo noexec-kept;"
            " touch /new 2>/dev/null || echo root-read-only",
        )  # fmt: skip
        job = c.wait(job_id)
        out = (c.work / f"locked-{job_id}.out").read_text().split()
        assert job["state"] == "COMPLETED", (job["reason"], out)
        assert out == ["inside-the-image", "locked-data", "noexec-kept", "root-read-only"]
    finally:
        for where in reversed(mounted):
            subprocess.run(["umount", str(where)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def pwd_uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


def test_exit_codes_signals_and_the_entrypoint_are_the_tasks_own(
    cluster: Cluster, other_user: str, images: dict[str, Path]
) -> None:
    c = cluster
    image = f"--container-image={images['dir']}"
    failed = _submit(c, other_user, image, "--wrap", "exit 7")
    killed = _submit(c, other_user, image, "--wrap", "kill -9 $$")
    entry = _submit(
        c, other_user, image, "--container-entrypoint", "-o", "rc-%j.out", "--wrap", "echo script"
    )
    readonly = _submit(
        c, other_user, image, "--container-readonly", "-o", "ro-%j.out",
        "--wrap", "touch /new 2>/dev/null || echo root-read-only",
    )  # fmt: skip
    assert (c.wait(failed)["state"], c.wait(failed)["exit_code"]) == ("FAILED", 7)
    assert c.wait(killed)["signal"] == signal.SIGKILL
    assert c.wait(entry)["state"] == "COMPLETED"
    assert (c.work / f"rc-{entry}.out").read_text() == "entrypoint-ran\nscript\n"
    assert c.wait(readonly)["state"] == "COMPLETED"
    assert (c.work / f"ro-{readonly}.out").read_text() == "root-read-only\n"


@pytest.mark.parametrize("how", ["cancel", "timeout", "supervisor killed"])
def test_a_stopped_container_job_leaves_no_process_and_no_mount(
    cluster: Cluster, other_user: str, images: dict[str, Path], how: str
) -> None:
    c = cluster
    pids = c.work / "pids"
    pids.mkdir(mode=0o777)
    pids.chmod(0o777)
    limit = ["--time=0:02"] if how == "timeout" else []
    job_id = _submit(
        c, other_user, f"--container-image={images['sqsh']}", f"--container-mounts={pids}:/pids",
        *limit, "--wrap", "sleep 300 & echo $! > /pids/child; echo $$ > /pids/shell; wait",
    )  # fmt: skip
    c.wait(job_id, {"RUNNING"})

    def written(name: str) -> bool:  # a whole line: the pid and echo's newline
        return (pids / name).exists() and (pids / name).read_text().endswith("\n")

    wait_until(lambda: written("child") and written("shell"), "the job starts its processes")
    procs = [int((pids / name).read_text()) for name in ("child", "shell")]
    if how == "cancel":
        c.cli("cancel", str(job_id), check=True)
    elif how == "supervisor killed":
        started = json.loads((c.home / "jobs" / str(job_id) / "started.json").read_text())
        os.kill(started["pid"], signal.SIGKILL)
    state = c.wait(job_id)["state"]
    assert state == {"cancel": "CANCELLED", "timeout": "TIMEOUT"}.get(how, "NODE_FAIL")
    assert all(_gone(pid) for pid in procs)
    assert _host_mounts(c) == []


def test_a_named_container_keeps_its_changes_for_the_next_job(
    cluster: Cluster, other_user: str, images: dict[str, Path]
) -> None:
    c = cluster
    named = [f"--container-image={images['sqsh']}", "--container-name=lab-env"]
    first = _submit(c, other_user, *named, "--wrap", "echo installed > /opt-state")
    assert c.wait(first)["state"] == "COMPLETED"
    second = _submit(c, other_user, *named, "-o", "named-%j.out", "--wrap", "cat /opt-state")
    assert c.wait(second)["state"] == "COMPLETED"
    assert (c.work / f"named-{second}.out").read_text() == "installed\n"
    fresh = _submit(
        c, other_user, f"--container-image={images['sqsh']}", "-o", "fresh-%j.out",
        "--wrap", "cat /opt-state 2>/dev/null || echo absent",
    )  # fmt: skip
    c.wait(fresh)
    assert (c.work / f"fresh-{fresh}.out").read_text() == "absent\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--container-image=/nonexistent/image.sqsh"], "/nonexistent/image.sqsh does not exist"),
        (["--container-image=nvcr.io#Nvidia/PyTorch:24.07"], "with a lower-case IMAGE"),
        (["--container-image=docker://x#y#z"], "is not an image reference"),
        (["--container-image=/x.sqsh", "--container-mounts=data:/data"], "must be absolute"),
        (["--container-image=/x.sqsh", "--container-mounts=/a:/b:bogus"], "unknown flag 'bogus'"),
        (["--container-mounts=/a:/b"], "needs --container-image"),
        (["--container-image=/x.sqsh", "--container-workdir=rel"], "an absolute path"),
        (["--container-image=/x.sqsh", "--container-save=/x.tar"], ".sqsh file"),
    ],
)
def test_bad_container_options_get_a_one_line_error_at_submit(
    cluster: Cluster, args: list[str], expected: str
) -> None:
    done = cluster.cli("submit", *args, "--wrap", "true")
    assert done.returncode != 0
    assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_an_image_that_is_no_squashfs_fails_the_job_with_the_reason(
    cluster: Cluster, other_user: str, images: dict[str, Path]
) -> None:
    c = cluster
    bad = _submit(c, other_user, f"--container-image={images['junk']}", "--wrap", "true")
    good = _submit(c, other_user, f"--container-image={images['dir']}", "--wrap", "true")
    job = c.wait(bad)
    assert job["state"] == "FAILED"
    assert "not a squashfs you can read" in job["reason"], job["reason"]
    assert c.wait(good)["state"] == "COMPLETED"  # the daemon and other jobs carry on


def test_srun_runs_a_step_in_an_image_the_seeds_workflow(
    cluster: Cluster, images: dict[str, Path]
) -> None:
    """A bare batch script whose srun step runs inside the image, every task in it."""
    c = cluster
    script = c.script(
        "echo batch-on-host $(test -e /marker && echo has-marker || echo no-marker)\n"
        f"srun -n 2 --container-image={images['sqsh']} --container-mounts={c.work}:/work "
        "--container-workdir=/work sh -c 'echo task $SLURM_PROCID $(cat /marker) $(pwd)'\n"
        f"srun --container-image={images['sqsh']} --container-save={c.work}/step.sqsh"
        " sh -c 'echo from-a-step > /state' && test -s step.sqsh && echo step-saved\n"
        f"srun --container-image={images['sqsh']} --container-mounts=/nonexistent:/x true"
        " || echo bad-mount-refused\n",
        "step.sh",
    )
    job_id = c.submit("-n", "2", "-o", "step-%j.out", str(script))
    job = c.wait(job_id)
    lines = (c.work / f"step-{job_id}.out").read_text().splitlines()
    assert job["state"] == "COMPLETED", (job["reason"], lines)
    assert lines[0] == "batch-on-host no-marker"
    assert sorted(lines[1:3]) == [
        "task 0 inside-the-image /work",
        "task 1 inside-the-image /work",
    ]
    assert lines[3] == "step-saved"
    assert "bad-mount-refused" in lines[-1]
    assert _layers_left(c, "root") == []
    assert _host_mounts(c) == []


GPU_PROBE = (
    "echo CVD=$CUDA_VISIBLE_DEVICES; echo LD=$LD_LIBRARY_PATH;"
    " ls /usr/local/nvidia/lib64 /usr/local/nvidia/bin 2>/dev/null | grep -v : | grep . | sort;"
    " nvidia-smi 2>/dev/null || echo no-nvidia-smi; ls {devices} 2>/dev/null | grep -c gpu; true"
)


@pytest.fixture
def gpu_cluster(images: dict[str, Path]) -> Iterator[tuple[Cluster, Path]]:
    """A daemon with 4 declared GPUs, each with its own device node (on a major no
    driver answers), and a declared driver: a libnvidia-ml, a libcuda and an
    nvidia-smi (a script the image's busybox runs) in a directory everyone can read.

    The driver's directory is a real mount, read-only, nosuid, nodev and noatime, as
    the NVIDIA container toolkit leaves a driver in a container (a lent H100 machine):
    in the job's user namespace the kernel locks those flags, and a read-only remount
    that drops one fails with EPERM."""
    if os.geteuid() != 0:
        pytest.skip("needs root (mknod, mount)")
    base = Path(tempfile.mkdtemp(prefix="podium-driver-"))
    base.chmod(0o755)
    devices = base / "dev"
    devices.mkdir(mode=0o755)
    for i in range(4):
        os.mknod(devices / f"gpu{i}", 0o666 | 0o020000, os.makedev(240, 110 + i))
    driver = base / "driver"
    lib = driver / "lib"
    lib.mkdir(mode=0o755, parents=True)
    for name in ("libnvidia-ml", "libcuda"):
        (lib / f"{name}.so.580.82").write_text("not really ELF\n")
        (lib / f"{name}.so.1").symlink_to(f"{name}.so.580.82")
    smi = driver / "nvidia-smi"
    smi.write_text('#!/bin/sh\necho "GPU 0: Declared H100 (UUID: GPU-declared)"\n')
    subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)
    smi.chmod(0o755)
    subprocess.run(["mount", "--bind", str(driver), str(driver)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro,nosuid,nodev,noatime", str(driver)], check=True)
    nodes = ", ".join(str(devices / f"gpu{i}") for i in range(4))
    files = ", ".join([str(lib / "libnvidia-ml.so.1"), str(lib / "libcuda.so.1"), str(smi)])
    c = make_cluster()
    config = (
        (c.home / "cluster.yaml")
        .read_text()
        .replace(
            "memory_mb: 81920}", f"memory_mb: 81920, devices: [{nodes}], driver_files: [{files}]}}"
        )
    )
    (c.home / "cluster.yaml").write_text(config)
    c.start()
    try:
        yield c, devices
    finally:
        teardown_cluster(c)
        subprocess.run(["umount", str(driver)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_a_container_gets_its_gpus_and_the_driver_nvidia_variables_ask_for(
    gpu_cluster: tuple[Cluster, Path], other_user: str, images: dict[str, Path]
) -> None:
    """As enroot's nvidia hook: no NVIDIA_VISIBLE_DEVICES, no driver (the job's device
    nodes only); "all" with the default capability, utility (libnvidia-ml and
    nvidia-smi, not libcuda); compute adds libcuda; "none" keeps the driver without
    devices; an unknown capability fails the job with the reason, in its output file."""
    c, devices = gpu_cluster
    probe = GPU_PROBE.format(devices=devices)
    image = f"--container-image={images['sqsh']}"

    def run(*env: str) -> tuple[dict[str, object], list[str]]:
        export = ["--export=ALL," + ",".join(env)] if env else []
        job_id = _submit(
            c, other_user, image, "--gpus=2", *export, "-o", "gpu-%j.out", "--wrap", probe
        )
        job = c.wait(job_id)
        out = c.work / f"gpu-{job_id}.out"
        return job, out.read_text().splitlines() if out.exists() else []

    job, plain = run()
    assert job["state"] == "COMPLETED", (job["reason"], plain)
    assert plain == ["CVD=0,1", "LD=", "no-nvidia-smi", "2"]
    job, utility = run("NVIDIA_VISIBLE_DEVICES=all")
    assert job["state"] == "COMPLETED", (job["reason"], utility)
    assert utility[0] == "CVD=0,1" and utility[1] == "LD=/usr/local/nvidia/lib64"
    assert utility[2:-2] == [
        "libnvidia-ml.so",
        "libnvidia-ml.so.1",
        "libnvidia-ml.so.580.82",
        "nvidia-smi",
    ]
    assert utility[-2:] == ["GPU 0: Declared H100 (UUID: GPU-declared)", "2"]
    job, compute = run("NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility")
    assert job["state"] == "COMPLETED" and "libcuda.so.1" in compute, compute
    job, none = run("NVIDIA_VISIBLE_DEVICES=none")
    assert job["state"] == "COMPLETED" and none[0] == "CVD=" and none[-1] == "0", none
    assert "libnvidia-ml.so.1" in none
    job, failed = run("NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=cmpute")
    assert job["state"] == "FAILED" and job["exit_code"] == 1
    assert "unknown capability 'cmpute'" in str(job["reason"]), job["reason"]
    assert failed == [f"podium: error: {job['reason']}"]  # in its output file, as Slurm's
    out = c.work / f"gpu-{job['job_id']}.out"
    assert out.stat().st_uid == pwd_uid(other_user)  # written as the job's user
    assert _host_mounts(c) == []


def test_container_save_keeps_what_the_job_left_in_a_squashfs(
    cluster: Cluster, other_user: str, images: dict[str, Path]
) -> None:
    """--container-save (Pyxis'): the image with the job's changes, deletions included,
    saved as its user; a later job runs in it; a save that cannot be written fails the
    job with the reason."""
    c = cluster
    saved = c.work / "saved.sqsh"
    first = _submit(
        c, other_user, f"--container-image={images['sqsh']}", "--container-save=saved.sqsh",
        "--wrap", "echo kept > /kept-file; rm /marker",
    )  # fmt: skip
    assert c.wait(first)["state"] == "COMPLETED"
    assert saved.is_file() and saved.stat().st_uid == pwd_uid(other_user)
    second = _submit(
        c, other_user, f"--container-image={saved}", "-o", "saved-%j.out",
        "--wrap", "cat /kept-file; test -e /marker || echo marker-gone",
    )  # fmt: skip
    assert c.wait(second)["state"] == "COMPLETED"
    assert (c.work / f"saved-{second}.out").read_text() == "kept\nmarker-gone\n"
    bad = _submit(
        c, other_user, f"--container-image={images['sqsh']}",
        "--container-save=/nonexistent/x.sqsh", "--wrap", "true",
    )  # fmt: skip
    job = c.wait(bad)
    assert job["state"] == "FAILED" and "--container-save=/nonexistent/x.sqsh" in job["reason"]
    assert _host_mounts(c) == [] and _layers_left(c, other_user) == []
