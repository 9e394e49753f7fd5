"""Images pulled by reference: `podium image import` from a real registry (Debian's
docker-registry, started here on loopback), the per-user cache, and jobs whose
`--container-image=docker://...` is pulled at their start as their user (Pyxis'
way), including a pull that fails and one cancelled midway. The images are built
here, offline (tests/imagekit.py)."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import imagekit
from tests.integration.conftest import Cluster
from tests.integration.test_containers import _submit, _userns_works
from tests.integration.test_permissions import other_user
from tests.polling import poll, wait_until

pytestmark = pytest.mark.integration
__all__ = ["other_user"]  # the fixture, imported for pytest

REGISTRY = shutil.which("docker-registry")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real registry (Debian's docker-registry) on loopback, holding lab/busybox:1;
    its address."""
    if REGISTRY is None or imagekit.BUSYBOX is None or shutil.which("mksquashfs") is None:
        pytest.skip("needs Debian's docker-registry, busybox-static and squashfs-tools")
    if os.geteuid() != 0 or not _userns_works():
        pytest.skip("needs root and unprivileged user namespaces (the container runtime's)")
    base = tmp_path_factory.mktemp("registry")
    port = _free_port()
    (base / "config.yml").write_text(
        "version: 0.1\nlog: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: {base / 'data'}}}}}\n"
        f"http: {{addr: 127.0.0.1:{port}}}\n"
    )
    proc = subprocess.Popen(
        [REGISTRY, "serve", str(base / "config.yml")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def answers() -> bool:
            assert proc.poll() is None, "the registry exited"
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            try:
                conn.request("GET", "/v2/")
                return conn.getresponse().status == 200
            finally:
                conn.close()

        poll(answers, bool, "the registry to answer", 20, retry_on=(OSError,))
        image = imagekit.build(
            [imagekit.busybox_layer("pulled-from-a-registry")],
            imagekit.config(Env=["PATH=/bin", "LAB=vision"]),
        )
        imagekit.push(f"127.0.0.1:{port}", "lab/busybox", "1", image)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_import_list_and_rm_against_a_real_registry(
    cluster: Cluster, registry: str, tmp_path: Path
) -> None:
    c = cluster
    env = dict(c.env, PODIUM_IMAGE_CACHE=str(tmp_path / "cache"))
    ref = f"docker://{registry}#lab/busybox:1"
    done = c.cli("image", "import", ref, env=env, check=True)
    path = Path(done.stdout.strip())
    assert path == tmp_path / "cache" / "lab+busybox+1.sqsh" and path.is_file()
    listed = json.loads(c.cli("image", "list", "--json", env=env, check=True).stdout)
    assert [(e["name"], e["source"]) for e in listed] == [("lab+busybox+1", ref)]
    out = tmp_path / "copy.sqsh"
    c.cli("image", "import", "-o", str(out), ref, env=env, check=True)
    files = subprocess.run(["unsquashfs", "-l", str(out)], capture_output=True, text=True).stdout
    assert "squashfs-root/marker" in files and "squashfs-root/etc/rc" in files
    again = c.cli("image", "import", "-o", str(out), ref, env=env)
    assert again.returncode == 2 and "already exists" in again.stderr
    missing = c.cli("image", "import", f"docker://{registry}#lab/nothing:1", env=env)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "MANIFEST_UNKNOWN" in missing.stderr or "NAME_UNKNOWN" in missing.stderr
    c.cli("image", "rm", "lab+busybox+1", env=env, check=True)
    gone = c.cli("image", "rm", "lab+busybox+1", env=env)
    assert gone.returncode == 2 and "no image 'lab+busybox+1'" in gone.stderr


def test_a_jobs_image_reference_is_pulled_at_its_start_as_its_user(
    cluster: Cluster, other_user: str, registry: str
) -> None:
    c = cluster
    ref = f"docker://{registry}#lab/busybox:1"
    body = "cat /marker; echo LAB=$LAB; id -u"
    job = _submit(c, other_user, f"--container-image={ref}", "-o", "pull-%j.out", "--wrap", body)
    done = c.wait(job, timeout=120)
    assert done["state"] == "COMPLETED", done["reason"]
    out = (c.work / f"pull-{job}.out").read_text().split()
    import pwd

    uid = pwd.getpwnam(other_user).pw_uid
    assert out == ["pulled-from-a-registry", "LAB=vision", str(uid)]
    cache = c.home / "containers" / str(uid) / "image-cache"  # no home: its cache here
    image = cache / "lab+busybox+1.sqsh"
    assert image.is_file() and image.stat().st_uid == uid  # pulled as the user
    again = _submit(c, other_user, f"--container-image={ref}", "--wrap", "cat /marker")
    assert c.wait(again, timeout=60)["state"] == "COMPLETED"  # from the cache
    bad = _submit(
        c, other_user, f"--container-image=docker://{registry}#lab/missing:1", "--wrap", "true"
    )
    failed = c.wait(bad, timeout=60)
    assert failed["state"] == "FAILED" and "lab/missing:1" in failed["reason"], failed["reason"]
    assert "launch failed" in failed["reason"] and "\n" not in failed["reason"]


def test_a_job_cancelled_while_its_image_is_pulled_is_cancelled(
    cluster: Cluster, other_user: str, tmp_path: Path
) -> None:
    if imagekit.BUSYBOX is None or not _userns_works():
        pytest.skip("needs busybox-static and user namespaces")
    server = imagekit.RegistryServer()
    try:
        server.add("lab/slow", "1", imagekit.build([imagekit.busybox_layer()], imagekit.config()))
        server.slow_s = 30.0
        ref = f"docker://{server.address}#lab/slow:1"
        job = _submit(c := cluster, other_user, f"--container-image={ref}", "--wrap", "true")
        wait_until(lambda: any(p.startswith("/cdn/") for _, p, _ in server.seen),
                   "the pull to reach the blobs", 20)  # fmt: skip
        started = time.monotonic()
        c.cli("cancel", str(job), check=True)
        done = c.wait(job, timeout=20)
        assert done["state"] == "CANCELLED" and time.monotonic() - started < 10
    finally:
        server.close()


def test_the_seeds_workflow_import_then_a_step_inside_it(
    cluster: Cluster, registry: str, tmp_path: Path
) -> None:
    """enroot import, then `srun --container-image` in a bare batch script; and a step
    that names the reference itself, pulled by srun (as the job's user)."""
    c = cluster
    env = dict(c.env, PODIUM_IMAGE_CACHE=str(tmp_path / "cache"))
    image = tmp_path / "busybox.sqsh"
    c.cli("image", "import", "-o", str(image), f"docker://{registry}#lab/busybox:1", env=env,
          check=True)  # fmt: skip
    image.chmod(0o644)
    script = c.script(
        f"srun -n 2 --container-image={image} sh -c 'echo task $SLURM_PROCID $(cat /marker)'\n"
        f"srun --container-image=docker://{registry}#lab/busybox:1 sh -c 'echo LAB=$LAB'\n",
        "seed.sh",
    )
    submitted = c.cli(
        "submit", "--parsable", "-n", "2", "-o", "seed-%j.out", str(script), env=env, check=True
    )  # fmt: skip  (the job keeps its pulls in tmp_path)
    job = int(submitted.stdout)
    done = c.wait(job, timeout=120)
    lines = (c.work / f"seed-{job}.out").read_text().splitlines()
    assert done["state"] == "COMPLETED", (done["reason"], lines)
    assert sorted(lines[:2]) == ["task 0 pulled-from-a-registry", "task 1 pulled-from-a-registry"]
    assert lines[2] == "LAB=vision"
