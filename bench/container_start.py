"""A container task's start overhead against a bare task's, side by side in one run
(issue 14's target: <= 150 ms with a cached image).

    python bench/container_start.py [--runs 200] [--user podium-test]

Builds a small image offline (Debian's busybox-static in a root directory, made into a
squashfs by mksquashfs), then times, RUNS times each and interleaved, how long a task
takes from the fork to its exit for a batch script of `exit 0` started as the
supervisor starts it
(podium.run.spawn.spawn_task, as USER): bare, and in the container (squashfs image
unpacked once into the cache, then reused; an overlay writable layer per task). Also
reports the first use of the image (the unpacking). Needs root. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from podium.run.containers.lifecycle import prepare, remove
from podium.run.identity import Identity
from podium.run.job_files import TaskFiles
from podium.run.spawn import spawn_task


def make_image(base: Path) -> Path:
    busybox = shutil.which("busybox")
    if busybox is None or shutil.which("mksquashfs") is None:
        raise SystemExit("needs Debian's busybox-static and squashfs-tools")
    root = base / "rootfs"
    for sub in ("bin", "etc", "proc", "sys", "dev", "tmp"):
        (root / sub).mkdir(parents=True)
    shutil.copy(busybox, root / "bin" / "busybox")
    for applet in ("sh", "true"):
        (root / "bin" / applet).symlink_to("busybox")
    image = base / "image.sqsh"
    subprocess.run(["mksquashfs", str(root), str(image), "-quiet", "-no-progress"], check=True)
    subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)
    return image


def run_once(script: str, who: Identity, container: dict[str, object] | None) -> float:
    t0 = time.perf_counter()
    pid = spawn_task(
        [script], {"PATH": "/bin:/usr/bin"}, "/", files=TaskFiles(None, os.devnull, None, False),
        end=None, pgid=0, creds=(who.uid, who.gid, list(who.groups)), container=container,
    )  # fmt: skip
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter() - t0
    assert os.waitstatus_to_exitcode(status) == 0, status
    return elapsed


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--user", default="podium-test")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (tasks start as another user, as the supervisor starts them)")
    entry = pwd.getpwnam(args.user)
    who = Identity.of(entry.pw_uid, entry.pw_gid, args.user)
    base = Path(tempfile.mkdtemp(prefix="podium-bench-container-"))
    base.chmod(0o755)
    try:
        image = make_image(base)
        script = str(base / "job.sh")  # a batch script, as the supervisor runs one
        Path(script).write_text("#!/bin/sh\nexit 0\n")
        os.chmod(script, 0o755)
        cache = base / "cache"
        cache.mkdir(mode=0o711)
        (cache / str(who.uid)).mkdir(mode=0o700)
        os.chown(cache / str(who.uid), who.uid, who.gid)
        request = {"image": str(image), "work_dir": "/", "cache_dir": str(cache)}
        t0 = time.perf_counter()
        container = prepare(request, "first", who)
        first_ms = 1000 * (time.perf_counter() - t0)
        bare, inside, prepared = [], [], []
        for _ in range(args.runs):
            bare.append(run_once(script, who, None))
            t0 = time.perf_counter()
            container = prepare(request, "state", who)  # cached: no unpacking
            prepared.append(time.perf_counter() - t0)
            inside.append(run_once(script, who, container))
            with who.entered():
                remove(container["state"])
        result = {
            "runs": args.runs,
            "bare": summary(bare),
            "container": summary(inside),
            "prepare_cached": summary(prepared),
            "first_use_unpack_ms": first_ms,
        }
        extra = [p + i - b for p, i, b in zip(prepared, inside, bare, strict=True)]
        result["overhead"] = summary(extra)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(result, indent=1))
    print(
        f"container start overhead (prepare + namespaces + mounts): p50 "
        f"{result['overhead']['p50_ms']:.1f} ms, p99 {result['overhead']['p99_ms']:.1f} ms "
        f"(bare task p50 {result['bare']['p50_ms']:.1f} ms; target <= 150 ms)"
    )


if __name__ == "__main__":
    main()
