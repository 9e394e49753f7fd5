"""GPU compute burn-in with PyTorch: matrix multiplies on each GPU for a while, checked
against a float64 reference on the CPU, with the throughput reached.

Runs in its own process (`python -m podium.node.health.burnin --gpus 0,1 --seconds 5`,
one JSON result per line) so the daemon never holds a CUDA context, which would show up
as memory left on the GPU. Without PyTorch or CUDA it reports unknown, with the reason.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

from podium.node.health.check_results import Action, Result, Status, skipped

NAME = "burn_in"


def _burn(torch: Any, gpu: int, seconds: float, size: int = 4096) -> Result:
    device = torch.device(f"cuda:{gpu}")
    gen = torch.Generator().manual_seed(gpu)
    a = torch.randn(256, 256, generator=gen, dtype=torch.float64)
    b = torch.randn(256, 256, generator=gen, dtype=torch.float64)
    reference = a @ b
    got = (a.to(device, torch.float32) @ b.to(device, torch.float32)).double().cpu()
    error = float((got - reference).abs().max())
    if not error < 1e-2:
        return Result(
            NAME,
            Status.CRITICAL,
            f"GPU {gpu} computed a wrong matrix product (max error {error:.3g})",
            Action.RESET,
            gpu,
            details={"max_error": error},
        )
    x = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    y = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            x @ y
        torch.cuda.synchronize(device)
        n += 10
    elapsed = time.perf_counter() - start
    tflops = 2 * size**3 * n / elapsed / 1e12
    if not torch.isfinite((x @ y).float()).all():
        return Result(NAME, Status.CRITICAL, f"GPU {gpu} produced NaN/inf", Action.RESET, gpu)
    return Result(
        NAME,
        Status.OK,
        f"GPU {gpu}: {n} bf16 {size}x{size} matmuls, {tflops:.0f} TFLOPS, max error {error:.1e}",
        gpu=gpu,
        details={"tflops": tflops, "max_error": error, "matmuls": n},
    )


def burn_in(gpus: list[int], seconds: float) -> list[Result]:
    """Burn in each listed GPU for `seconds` (in this process)."""
    try:
        import torch
    except ImportError:
        return [skipped(NAME, "PyTorch is not installed")]
    if not torch.cuda.is_available():
        return [skipped(NAME, "PyTorch sees no CUDA device (a CPU build of torch?)")]
    results = []
    for gpu in gpus:
        try:
            results.append(_burn(torch, gpu, seconds))
        except Exception as exc:  # a CUDA error is the finding
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            results.append(Result(NAME, Status.CRITICAL, f"GPU {gpu}: {first}", Action.RESET, gpu))
    return results


class BurnInCheck:
    """Deep check: the burn-in in a child process, for the GPUs given."""

    name = NAME
    deep = True

    def __init__(self, gpus: list[int], seconds: float) -> None:
        self.gpus = gpus
        self.seconds = seconds

    def run(self) -> list[Result]:
        if not self.gpus:
            return [Result(NAME, Status.OK, "no GPUs to burn in")]
        argv = [sys.executable, "-m", "podium.node.health.burnin", "--seconds", str(self.seconds)]
        argv += ["--gpus", ",".join(map(str, self.gpus))]
        timeout = 120 + self.seconds * len(self.gpus)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        results = []
        for line in proc.stdout.splitlines():
            data = json.loads(line)
            results.append(
                Result(
                    NAME,
                    Status[data["status"].upper()],
                    data["reason"],
                    Action(data["action"]),
                    data["gpu"],
                    details=data["details"],
                    skipped=bool(data.get("skipped")),
                )
            )
        if not results:
            err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return [Result(NAME, Status.UNKNOWN, f"burn-in did not report: {err}")]
        return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="podium-burn-in")
    parser.add_argument("--gpus", required=True)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    gpus = [int(g) for g in args.gpus.split(",") if g]
    for result in burn_in(gpus, args.seconds):
        print(json.dumps(result.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
