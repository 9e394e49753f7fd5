"""nccl-tests output: parse it, recompute bus bandwidth, compare with a threshold.

busbw = algbw x factor, with the factors of nccl-tests' PERFORMANCE.md for n ranks:
all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall, gather, scatter (n-1)/n;
broadcast, reduce, sendrecv 1. A row of one rank has no bandwidth (N/A: nothing crossed
a link; Podium's runner prints it so). The check reads the largest message's
out-of-place busbw (e.g. 16 GB) and is critical below the threshold for the GPU type
(H100/H200 460 GB/s, A100 228 GB/s); one rank's run is unknown, never judged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from podium.node.health.check_results import Action, Result, Status


def _all_reduce(n: int) -> float:
    return 2 * (n - 1) / n


def _gather_like(n: int) -> float:
    return (n - 1) / n


def _one(n: int) -> float:
    return 1.0


FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": _all_reduce,
    "all_gather": _gather_like,
    "reduce_scatter": _gather_like,
    "alltoall": _gather_like,
    "gather": _gather_like,
    "scatter": _gather_like,
    "broadcast": _one,
    "reduce": _one,
    "sendrecv": _one,
}

DEFAULT_THRESHOLDS_GBPS = {"h100": 460.0, "h200": 460.0, "a100": 228.0}


def bus_bandwidth(collective: str, algbw: float, ranks: int) -> float:
    """Bus bandwidth from algorithm bandwidth, per nccl-tests' formulas."""
    if collective not in FACTORS:
        raise ValueError(f"unknown collective {collective!r}: expected {', '.join(FACTORS)}")
    return algbw * FACTORS[collective](max(1, ranks))


@dataclass(frozen=True)
class NcclRow:
    size: int
    count: int
    time_us: float
    algbw: float | None  # None: N/A (one rank: nothing measured)
    busbw: float | None
    wrong: str

    @property
    def right(self) -> bool:
        """No wrong values (or none counted: validation off)."""
        return self.wrong in ("0", "N/A")


@dataclass(frozen=True)
class NcclRun:
    ranks: int
    rows: tuple[NcclRow, ...]
    avg_busbw: float | None

    @property
    def largest(self) -> NcclRow | None:
        """The row of the largest message, the one a bandwidth check judges."""
        return max(self.rows, key=lambda r: r.size, default=None)


_RANK_RE = re.compile(r"^#\s+Rank\s+\d+\s")
_AVG_RE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([\d.]+)")


def _bandwidth(text: str) -> float | None:
    """A bandwidth cell: GB/s, or None for N/A; raises ValueError on anything else."""
    return None if text == "N/A" else float(text)


def parse_nccl_tests(text: str) -> NcclRun:
    """Parse an nccl-tests *_perf output: the device list and the out-of-place columns.

    Tolerates both header layouts (with or without redop/root columns) by reading the
    column names from the header line.
    """
    ranks = 0
    columns: list[str] | None = None
    rows: list[NcclRow] = []
    avg: float | None = None
    for line in text.splitlines():
        if _RANK_RE.match(line):
            ranks += 1
            continue
        if line.startswith("#") and "size" in line and "count" in line and "busbw" in line:
            columns = line.lstrip("#").split()
            continue
        if (m := _AVG_RE.search(line)) is not None:
            avg = float(m.group(1))
            continue
        if line.startswith("#") or not line.strip() or columns is None:
            continue
        parts = line.split()
        if not parts[0].isdigit() or len(parts) < len(columns) // 2:
            continue
        first: dict[str, str] = {}
        for name, value in zip(columns, parts, strict=False):
            first.setdefault(name, value)  # the out-of-place columns come first
        try:
            rows.append(
                NcclRow(
                    int(first["size"]),
                    int(first["count"]),
                    float(first["time"]),
                    _bandwidth(first["algbw"]),
                    _bandwidth(first["busbw"]),
                    first.get("#wrong", first.get("error", "0")),
                )
            )
        except (KeyError, ValueError):
            continue
    return NcclRun(ranks, tuple(rows), avg)


class NcclBandwidthCheck:
    """Single-node all_reduce bus bandwidth from an nccl-tests output file."""

    name = "nccl_busbw"
    deep = True

    def __init__(
        self,
        output: Path,
        gpu_type: str,
        thresholds: dict[str, float] | None = None,
        collective: str = "all_reduce",
    ) -> None:
        self.output = output
        self.gpu_type = gpu_type.lower()
        self.thresholds = thresholds or DEFAULT_THRESHOLDS_GBPS
        self.collective = collective

    def run(self) -> list[Result]:
        try:
            run = parse_nccl_tests(self.output.read_text())
        except OSError as exc:
            return [Result(self.name, Status.UNKNOWN, f"no nccl-tests output: {exc.strerror}")]
        largest = run.largest
        if largest is None:
            return [Result(self.name, Status.UNKNOWN, f"{self.output}: no result rows")]
        measured = largest.algbw is not None and run.ranks != 1
        recomputed = (
            round(bus_bandwidth(self.collective, largest.algbw, run.ranks or 1), 2)
            if largest.algbw is not None
            else None
        )
        limit = self.thresholds.get(self.gpu_type)
        details = {
            "size": largest.size,
            "algbw": largest.algbw,
            "busbw": largest.busbw,
            "busbw_recomputed": recomputed,
            "ranks": run.ranks,
            "threshold": limit,
        }
        if not largest.right:
            return [
                Result(
                    self.name,
                    Status.CRITICAL,
                    f"{largest.wrong} wrong values at {largest.size} B",
                    Action.DRAIN,
                    details=details,
                )
            ]
        if not measured or largest.busbw is None:
            return [
                Result(
                    self.name,
                    Status.UNKNOWN,
                    f"{self.output}: one rank: nothing crossed a link, so there is no "
                    "bandwidth to judge (run it with 2 or more GPUs)",
                    details=details,
                )
            ]
        if limit is None:
            return [
                Result(
                    self.name,
                    Status.UNKNOWN,
                    f"busbw {largest.busbw} GB/s; no threshold for {self.gpu_type}",
                    details=details,
                )
            ]
        if largest.busbw < limit:
            return [
                Result(
                    self.name,
                    Status.CRITICAL,
                    f"{self.collective} busbw {largest.busbw:.1f} GB/s at "
                    f"{largest.size} B is below {limit:.0f} GB/s",
                    Action.DRAIN,
                    details=details,
                )
            ]
        return [
            Result(
                self.name,
                Status.OK,
                f"{self.collective} busbw {largest.busbw:.1f} GB/s >= {limit:.0f}",
                details=details,
            )
        ]
