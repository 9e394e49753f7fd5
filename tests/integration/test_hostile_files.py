"""A hostile user's files cannot hold a job past a cancel or its time limit (issue 26,
items 1 and 5): FIFOs as a job's output or input, and a start held up by something the
user controls. Every job runs as a real second Unix user against a root daemon."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from podium.run.containers.lifecycle import image_cache_key
from tests.integration.conftest import Cluster
from tests.integration.test_containers import images
from tests.integration.test_permissions import _run, as_login, other_user
from tests.polling import wait_until

pytestmark = pytest.mark.integration
__all__ = ["images", "other_user"]  # fixtures, imported for pytest


def _submit(c: Cluster, user: str, *args: str) -> int:
    done = _run(c, user, "submit", "--parsable", *args)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def _mkfifo_as(user: str, path: Path) -> None:
    subprocess.run(["mkfifo", str(path)], check=True, **as_login(user))


def test_a_fifo_as_output_or_input_fails_the_job_at_once_and_frees_its_gpus(
    cluster: Cluster, other_user: str
) -> None:
    """Made after the submit (which refuses them: see below), as an attacker would."""
    c = cluster
    out, inp = c.work / "out.fifo", c.work / "in.fifo"
    inp.write_text("")
    held = ("-H", "-t", "1", "-G", "4")
    writing = _submit(c, other_user, *held, "-o", str(out), "--wrap", "sleep 1")
    reading = _submit(c, other_user, *held, "-i", str(inp), "--wrap", "sleep 1")
    inp.unlink()
    _mkfifo_as(other_user, out)
    _mkfifo_as(other_user, inp)
    assert _run(c, other_user, "release", str(writing), str(reading)).returncode == 0
    for job_id, fifo in ((writing, out), (reading, inp)):
        job = c.wait(job_id, timeout=20)
        assert job["state"] == "FAILED", job
        assert f"{fifo} is a FIFO" in job["reason"] and "regular files" in job["reason"]
    after = c.submit("-G", "4", "--wrap", "true")  # the GPUs are free again
    assert c.wait(after, timeout=20)["state"] == "COMPLETED"


@pytest.fixture
def held_image_lock(cluster: Cluster, other_user: str, images: dict[str, Path]) -> Iterator[Path]:
    """The user holds the lock of `images["sqsh"]`'s directory in its own image cache,
    as any user may (the cache is the user's): a job using that image waits for it."""
    entry = pwd.getpwnam(other_user)
    image = images["sqsh"]
    key_dir = (
        cluster.home / "containers" / str(entry.pw_uid) / "images"
        / image_cache_key(str(image), image.stat())
    )  # fmt: skip
    key_dir.mkdir(parents=True)
    for d in (key_dir, key_dir.parent, key_dir.parent.parent):
        os.chown(d, entry.pw_uid, entry.pw_gid)
        d.chmod(0o700)
    holder = subprocess.Popen(
        ["flock", str(key_dir / "lock"), "sleep", "600"], start_new_session=True,
        **as_login(other_user),
    )  # fmt: skip
    wait_until(lambda: (key_dir / "lock").exists(), "flock to take the lock", 10)
    try:
        yield image
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # flock and its sleep
        holder.wait()


def test_a_start_held_up_by_the_user_still_ends_at_cancel_and_at_the_time_limit(
    cluster: Cluster, other_user: str, held_image_lock: Path
) -> None:
    """What the user holds (here a lock in its own image cache; a FUSE or hung file
    system alike) holds only the child preparing the job, which a cancel or the time
    limit kills with all it started."""
    c = cluster
    image = f"--container-image={held_image_lock}"
    cancelled = _submit(c, other_user, "-G", "4", image, "--wrap", "true")
    c.wait(cancelled, {"RUNNING"}, timeout=20)
    time.sleep(1)  # well inside the wait for the lock
    assert c.job(cancelled)["state"] == "RUNNING"
    asked = time.monotonic()
    assert _run(c, other_user, "cancel", str(cancelled)).returncode == 0
    assert c.wait(cancelled, timeout=15)["state"] == "CANCELLED"
    assert time.monotonic() - asked < 5
    timed = _submit(c, other_user, "-t", "0:02", "-G", "4", image, "--wrap", "true")
    job = c.wait(timed, timeout=20)
    assert job["state"] == "TIMEOUT", job
    free = c.submit("-G", "4", "--wrap", "true")  # nothing holds the GPUs any more
    assert c.wait(free, timeout=20)["state"] == "COMPLETED"


def test_job_files_are_checked_at_submit_as_the_user(cluster: Cluster, other_user: str) -> None:
    """Exact output and input names are judged at submit, as the user, in one line:
    /dev/null is a valid output; a FIFO, a directory, a link, another user's file are
    not; the daemon carries on."""
    c = cluster
    _mkfifo_as(other_user, c.work / "f")
    (c.work / "lnk").symlink_to("/etc/passwd")
    refused = {
        ("-o", str(c.work / "f")): "f is a FIFO: a job's input and output must be regular",
        ("-o", "/tmp"): "/tmp is a directory: a job's input",
        ("-o", "/etc/passwd"): "/etc/passwd: permission denied (you cannot write it)",
        ("-i", "lnk"): "lnk is a symbolic link: name the file itself",
        ("-i", "missing.txt"): "missing.txt does not exist",
        ("-e", "/root/err.txt"): "/root: permission denied (you cannot enter it)",
    }
    for args, why in refused.items():
        done = _run(c, other_user, "submit", *args, "--wrap", "true")
        assert done.returncode == 2 and why in done.stderr, (args, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    ok = _submit(c, other_user, "-o", "/dev/null", "-i", "/dev/null", "--wrap", "echo x")
    assert c.wait(ok)["state"] == "COMPLETED"
