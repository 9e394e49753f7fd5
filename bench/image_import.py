"""`podium image import` of a ~100 MB image against the same by hand, side by side in
one run (issue 14's target: Podium <= 1.5x the hand-made path).

    python bench/image_import.py [--runs 3] [--mb 100]

Builds an image offline (tests/imagekit.py): a busybox layer with 2,000 small source
files, a layer of incompressible files (weights) and one of compressible text, about
--mb MB unpacked in all; pushes it to Debian's docker-registry started here on
loopback. Then, interleaved, RUNS times each, from an empty cache every time:

- podium: `podium image import -o OUT docker://HOST#bench/model:1`
  (fetch every blob, check its digest, apply the layers, mksquashfs);
- by hand: `skopeo copy docker://HOST/bench/model:1 oci:DIR:1`, `umoci unpack`, then
  `mksquashfs ROOTFS OUT` with the same options (enroot's: -comp lzo -noD -all-root);
- by hand with tar, the leanest: skopeo copy, `tar -xzf` of each layer, mksquashfs.

Reports wall (median, min) and CPU (own + children) for each, the by-hand steps
apart, and the ratio. A benchmark, not a test. Needs root (umoci unpack keeps owners).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import imagekit

SQUASH = ["-comp", "lzo", "-noD", "-all-root", "-noappend", "-no-progress", "-quiet"]
WORDS = ["tensor", "gradient", "optimizer", "checkpoint", "batch", "epoch", "layer",
         "weight", "bias", "attention", "token", "embedding", "dataset", "model"]  # fmt: skip


def build_image(mb: int) -> imagekit.Built:
    """Three layers, about `mb` MB unpacked: code, weights, text."""
    rng = random.Random(14)
    code = [imagekit.Entry("opt", "dir", mode=0o755), imagekit.Entry("opt/lib", "dir", mode=0o755)]
    for i in range(2000):
        text = "\n".join(f"def f{j}(x): return x * {rng.random():.6f}" for j in range(100))
        code.append(imagekit.Entry(f"opt/lib/module_{i:04d}.py", data=text.encode()))
    layers = [imagekit.busybox_layer("bench"), imagekit.layer(code)]
    weights = [imagekit.Entry("opt/weights", "dir", mode=0o755)]
    for i in range(max(1, mb * 4 // 10 // 4)):
        weights.append(imagekit.Entry(f"opt/weights/shard_{i}.bin", data=os.urandom(4 << 20)))
    layers.append(imagekit.layer(weights))
    corpus = [imagekit.Entry("opt/data", "dir", mode=0o755)]
    for i in range(max(1, mb * 5 // 10 // 2)):
        words = " ".join(rng.choice(WORDS) for _ in range(300_000))
        corpus.append(imagekit.Entry(f"opt/data/part_{i}.txt", data=words.encode()[: 2 << 20]))
    layers.append(imagekit.layer(corpus))
    return imagekit.build(layers, imagekit.config(Env=["PATH=/bin"]))


def start_registry(base: Path) -> tuple[subprocess.Popen[bytes], str]:
    program = shutil.which("docker-registry")
    if program is None:
        raise SystemExit("needs Debian's docker-registry (scripts/install-container-tools.sh)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    (base / "registry.yml").write_text(
        "version: 0.1\nlog: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: {base / 'registry'}}}}}\n"
        f"http: {{addr: 127.0.0.1:{port}}}\n"
    )
    proc = subprocess.Popen(
        [program, "serve", str(base / "registry.yml")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/v2/")
            if conn.getresponse().status == 200:
                conn.close()
                return proc, f"127.0.0.1:{port}"
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.terminate()
            raise SystemExit("docker-registry did not start")
        time.sleep(0.1)


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Run `argv`; its wall and CPU (user + system of it and its children) seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: {done.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def podium_once(base: Path, registry: str, run: int) -> dict[str, float]:
    podium = str(Path(sys.executable).parent / "podium")
    cache, out = base / f"podium-cache-{run}", base / f"podium-{run}.sqsh"
    env = dict(os.environ, PODIUM_IMAGE_CACHE=str(cache), PODIUM_ALLOW_HTTP="yes")
    ref = f"docker://{registry}#bench/model:1"
    wall, cpu = timed([podium, "image", "import", "-o", str(out), ref], env)
    size = out.stat().st_size
    shutil.rmtree(cache)
    out.unlink()
    return {"wall": wall, "cpu": cpu, "sqsh_mb": size / 1e6}


def by_hand_once(base: Path, registry: str, run: int) -> dict[str, float]:
    layout, bundle, out = base / f"oci-{run}", base / f"bundle-{run}", base / f"hand-{run}.sqsh"
    copy = timed(
        ["skopeo", "copy", "--quiet", "--src-tls-verify=false",
         f"docker://{registry}/bench/model:1", f"oci:{layout}:1"]
    )  # fmt: skip
    unpack = timed(["umoci", "unpack", "--image", f"{layout}:1", str(bundle)])
    squash = timed(["mksquashfs", str(bundle / "rootfs"), str(out), *SQUASH])
    size = out.stat().st_size
    shutil.rmtree(layout)
    shutil.rmtree(bundle)
    out.unlink()
    steps = {"copy": copy, "unpack": unpack, "mksquashfs": squash}
    result = {f"{k}_wall": v[0] for k, v in steps.items()}
    result["wall"] = sum(v[0] for v in steps.values())
    result["cpu"] = sum(v[1] for v in steps.values())
    result["sqsh_mb"] = size / 1e6
    return result


def by_tar_once(base: Path, registry: str, run: int) -> dict[str, float]:
    """The leanest hand path: skopeo copy, each layer untarred in order with tar (no
    whiteouts handled: this image has none), mksquashfs."""
    layout, root, out = base / f"oci-t{run}", base / f"root-t{run}", base / f"tar-{run}.sqsh"
    copy = timed(
        ["skopeo", "copy", "--quiet", "--src-tls-verify=false",
         f"docker://{registry}/bench/model:1", f"oci:{layout}:1"]
    )  # fmt: skip
    index = json.loads((layout / "index.json").read_text())
    digest = index["manifests"][0]["digest"].split(":")[1]
    manifest = json.loads((layout / "blobs" / "sha256" / digest).read_text())
    root.mkdir()
    untar = (0.0, 0.0)
    for desc in manifest["layers"]:
        blob = layout / "blobs" / "sha256" / desc["digest"].split(":")[1]
        step = timed(["tar", "-xzf", str(blob), "-C", str(root)])
        untar = (untar[0] + step[0], untar[1] + step[1])
    squash = timed(["mksquashfs", str(root), str(out), *SQUASH])
    shutil.rmtree(layout)
    shutil.rmtree(root)
    out.unlink()
    steps = {"copy": copy, "untar": untar, "mksquashfs": squash}
    result = {f"{k}_wall": v[0] for k, v in steps.items()}
    result["wall"] = sum(v[0] for v in steps.values())
    result["cpu"] = sum(v[1] for v in steps.values())
    return result


def summary(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = runs[0].keys()
    out = {f"{k}_median": statistics.median(r[k] for r in runs) for k in keys}
    out["wall_min"] = min(r["wall"] for r in runs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mb", type=int, default=100)
    args = parser.parse_args()
    for tool in ("skopeo", "umoci", "mksquashfs"):
        if shutil.which(tool) is None:
            raise SystemExit(f"needs {tool} (scripts/install-container-tools.sh)")
    if imagekit.BUSYBOX is None:
        raise SystemExit("needs Debian's busybox-static")
    base = Path(tempfile.mkdtemp(prefix="podium-bench-import-", dir="/var/tmp"))
    proc, registry = start_registry(base)
    try:
        image = build_image(args.mb)
        packed = sum(len(b) for b in image.blobs.values())
        imagekit.push(registry, "bench/model", "1", image)
        podium_runs, hand_runs, tar_runs = [], [], []
        for run in range(args.runs):
            podium_runs.append(podium_once(base, registry, run))
            hand_runs.append(by_hand_once(base, registry, run))
            tar_runs.append(by_tar_once(base, registry, run))
            print(f"run {run}: podium {podium_runs[-1]['wall']:.2f} s, "
                  f"by hand {hand_runs[-1]['wall']:.2f} s, "
                  f"with tar {tar_runs[-1]['wall']:.2f} s", file=sys.stderr)  # fmt: skip
        podium, hand, tar = summary(podium_runs), summary(hand_runs), summary(tar_runs)
        report = {
            "image": {"unpacked_mb": args.mb, "compressed_mb": round(packed / 1e6, 1)},
            "runs": args.runs,
            "podium": podium,
            "by_hand": hand,
            "by_hand_with_tar": tar,
            "ratio_wall_median": podium["wall_median"] / hand["wall_median"],
            "ratio_cpu_median": podium["cpu_median"] / hand["cpu_median"],
            "ratio_wall_median_vs_tar": podium["wall_median"] / tar["wall_median"],
        }
        print(json.dumps(report, indent=2))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
