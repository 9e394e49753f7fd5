"""nccl-tests' *_perf benchmarks over torch.distributed, for nodes without nccl-tests.

    python -m podium.node.health.collective_perf all_reduce -b 8 -e 128M -f 2 -g 1

One process per rank, started by srun (or torchrun): each finds its place in RANK /
WORLD_SIZE / LOCAL_RANK, else srun's SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID, and
its rendezvous in MASTER_ADDR (else SLURM_LAUNCH_NODE_IPADDR, the batch node) and
MASTER_PORT. NCCL on GPUs, gloo on CPUs.

Rank 0 prints nccl-tests' own output, so that its parser (podium.node.health.nccl),
dashboards and people read both the same way: the header, one `#  Rank` line per rank
(its host, pid and device), the table (size, count, type, redop, root, then time, algbw,
busbw and #wrong out-of-place and in-place), `# Out of bounds values` and `# Avg bus
bandwidth`. As in nccl-tests, size is count x 4 bytes where count is the collective's
total element count (all_gather, gather: the gathered buffer; reduce_scatter, scatter:
the buffer split among the ranks; alltoall: what each rank sends), algbw = size / time,
and busbw = algbw x the collective's factor (podium.node.health.nccl.bus_bandwidth).
The collectives are the eight of nccl-tests' table: all_reduce, all_gather,
reduce_scatter, alltoall, broadcast, reduce, gather, scatter (root 0 where there is one).

torch.distributed has only an in-place all_reduce, broadcast and reduce and only an
out-of-place all_to_all_single, gather and scatter: for those, both columns time the
one form torch has.

With one rank nothing crosses a link: the time is the local call's, and algbw and
busbw are printed N/A (nccl-tests prints a bandwidth computed from that time, which
reads as a measurement of a GPU's links when there is none).

On GPUs the process group is bound to the rank's device (init_process_group's
device_id), so torch's barrier has no device to guess and no warning to print in
the table.

Every size is checked once before it is timed (validation: 1): each rank's data is
made from its rank so that every received element has one right value; wrong elements
are counted in #wrong and make the exit status 1.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from podium.node.health.nccl import bus_bandwidth

if TYPE_CHECKING:
    import torch

COLLECTIVES = (
    "all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "gather",
    "scatter",
)  # fmt: skip
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_REDUCING = {"all_reduce", "reduce_scatter", "reduce"}
_ROOTED = {"broadcast", "reduce", "gather", "scatter"}
_SPLIT = {"all_gather", "reduce_scatter", "alltoall", "gather", "scatter"}
WORD = 4  # float32


@dataclass(frozen=True)
class Options:
    """What one run measures (nccl-tests' -b -e -f -n -w -c)."""

    collective: str
    minbytes: int
    maxbytes: int
    stepfactor: int
    iters: int
    warmup: int
    check: bool


def parse_size(text: str) -> int:
    """nccl-tests' sizes: bytes, or a whole number with K, M or G (binary units).
    Raises ValueError with what is wrong and what would be right."""
    unit = _UNITS.get(text[-1:].upper(), 1)
    digits = text[:-1] if unit > 1 else text
    if not digits.isdigit() or int(digits) * unit < 1:
        raise ValueError(f"size {text!r}: give bytes or a whole number with K, M or G (e.g. 8M)")
    return int(digits) * unit


def sizes(minbytes: int, maxbytes: int, factor: int) -> list[int]:
    """The message sizes nccl-tests steps through: min, min x factor, ... up to max."""
    out = [minbytes]
    while factor > 1 and out[-1] * factor <= maxbytes:
        out.append(out[-1] * factor)
    return out


def element_count(collective: str, nbytes: int, world: int) -> int:
    """Elements for a message of `nbytes`: whole float32s, a multiple of the ranks for
    the collectives that split the buffer among them (at least one per rank)."""
    count = max(1, nbytes // WORD)
    if collective in _SPLIT:
        count = max(world, count // world * world)
    return count


def time_text(usec: float) -> str:
    """nccl-tests' time column: 2 decimals below 100 us, 1 below 10 ms, none above."""
    if usec >= 10000.0:
        return f"{usec:7.0f}"
    if usec >= 100.0:
        return f"{usec:7.1f}"
    return f"{usec:7.2f}"


def header(args: Options) -> list[str]:
    """The lines nccl-tests prints above the table (the device lines come between)."""
    return [
        f"# nThread 1 nGpus 1 minBytes {args.minbytes} maxBytes {args.maxbytes} step: "
        f"{args.stepfactor}(factor) warmup iters: {args.warmup} iters: {args.iters} "
        f"agg iters: 1 validation: {int(args.check)} graph: 0",
        "#",
        "# Using devices",
    ]


def table_head() -> list[str]:
    places = "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
    names = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s"
    units = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
    blank = ("",) * 5
    return [
        "#",
        places % blank,
        names
        % (
            *("size", "count", "type", "redop", "root"),
            *("time", "algbw", "busbw", "#wrong") * 2,
        ),
        units % ("(B)", "(elements)", "", "", "", *("(us)", "(GB/s)", "(GB/s)", "") * 2),
    ]


Cell = tuple[float, float | None, float | None, int]  # time us, algbw, busbw (None: N/A), wrong


def row(collective: str, count: int, cells: list[Cell]) -> str:
    """One table row: the size's columns, then (time us, algbw, busbw, wrong) twice;
    a bandwidth of None (one rank: none measured) is N/A."""
    redop = "sum" if collective in _REDUCING else "none"
    root = 0 if collective in _ROOTED else -1
    line = f"{count * WORD:12d}  {count:12d}  {'float':>8s}  {redop:>6s}  {root:6d}"
    for usec, algbw, busbw, wrong in cells:
        alg = "N/A" if algbw is None else f"{algbw:6.2f}"
        bus = "N/A" if busbw is None else f"{busbw:6.2f}"
        line += f"  {time_text(usec)}  {alg:>6s}  {bus:>6s}  {wrong:5d}"
    return line


def parse_args(argv: list[str]) -> Options:
    """The command line (nccl-tests' option letters); argparse exits 2 on bad input."""
    parser = argparse.ArgumentParser(
        prog="python -m podium.node.health.collective_perf",
        description="nccl-tests' benchmarks over torch.distributed",
    )
    parser.add_argument("collective", choices=COLLECTIVES)
    parser.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("32M"))
    parser.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("32M"))
    parser.add_argument("-f", "--stepfactor", type=int, default=2)
    parser.add_argument("-g", "--ngpus", type=int, default=1, help="GPUs per rank: 1 only")
    parser.add_argument("-n", "--iters", type=int, default=20)
    parser.add_argument("-w", "--warmup_iters", type=int, default=5)
    parser.add_argument("-c", "--check", type=int, default=1, help="1: validate results")
    args = parser.parse_args(argv)
    if args.ngpus != 1:
        parser.error("-g must be 1: one rank per GPU (start as many ranks as GPUs)")
    if args.maxbytes < args.minbytes or args.stepfactor < 1 or args.iters < 1:
        parser.error("need -b <= -e, -f >= 1 and -n >= 1")
    return Options(
        args.collective,
        args.minbytes,
        args.maxbytes,
        args.stepfactor,
        args.iters,
        max(0, args.warmup_iters),
        bool(args.check),
    )


def place() -> tuple[int, int, int]:
    """(rank, world size, local rank), and MASTER_ADDR / MASTER_PORT set for torch."""
    env = os.environ
    rank = int(env.get("RANK") or env.get("SLURM_PROCID") or 0)
    world = int(env.get("WORLD_SIZE") or env.get("SLURM_NTASKS") or 1)
    local = int(env.get("LOCAL_RANK") or env.get("SLURM_LOCALID") or 0)
    env.setdefault("MASTER_ADDR", env.get("SLURM_LAUNCH_NODE_IPADDR") or "127.0.0.1")
    env.setdefault("MASTER_PORT", "29500")
    return rank, world, local


Run = Callable[[], None]


class Bench:
    """One collective on this rank: buffers made from the rank, the torch call, and
    the check of what came back."""

    def __init__(self, collective: str, rank: int, world: int, device: torch.device) -> None:
        self.collective, self.rank, self.world, self.device = collective, rank, world, device

    def variants(self, count: int) -> list[tuple[Run, Callable[[], int]]]:
        """(out-of-place, in-place): each a call and a count of wrong elements after
        it ran once on fresh buffers."""
        return [self._make(count, in_place) for in_place in (False, True)]

    def _make(self, count: int, in_place: bool) -> tuple[Run, Callable[[], int]]:
        import torch
        import torch.distributed as dist

        n, r, dev = self.world, self.rank, self.device
        full = torch.full
        if self.collective == "all_reduce":
            buf = full((count,), float(r + 1), device=dev)
            want = float(n * (n + 1) // 2)
            return (lambda: dist.all_reduce(buf)), (lambda: int((buf != want).sum()))
        if self.collective == "broadcast":
            buf = full((count,), 1.0 if r == 0 else 0.0, device=dev)
            return (lambda: dist.broadcast(buf, 0)), (lambda: int((buf != 1.0).sum()))
        if self.collective == "reduce":  # only the root's buffer is defined afterwards
            buf = full((count,), float(r + 1), device=dev)
            want = float(n * (n + 1) // 2)
            return (lambda: dist.reduce(buf, 0)), (
                lambda: int((buf != want).sum()) if r == 0 else 0
            )
        part = count // n
        if self.collective == "gather":  # rank j's part lands in the root's j-th place
            mine = full((part,), float(r + 1), device=dev)
            parts = list(torch.split(torch.zeros(count, device=dev), part)) if r == 0 else None
            ranks = torch.arange(1, n + 1, device=dev, dtype=torch.float32)
            want_g = ranks.repeat_interleave(part)

            def gathered_wrong() -> int:
                return int((torch.cat(parts) != want_g).sum()) if parts is not None else 0

            return (lambda: dist.gather(mine, parts, 0)), gathered_wrong
        if self.collective == "scatter":  # the root's j-th part, of j + 1s, goes to rank j
            got = torch.zeros(part, device=dev)
            ids = torch.arange(1, n + 1, device=dev, dtype=torch.float32)
            chunks = list(torch.split(ids.repeat_interleave(part), part)) if r == 0 else None
            return (lambda: dist.scatter(got, chunks, 0)), (lambda: int((got != r + 1).sum()))
        # torch 2.13 names them *_single; older releases *_into_tensor / *_tensor
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        if self.collective == "all_gather":
            out = torch.zeros(count, device=dev)
            mine = out[r * part : (r + 1) * part] if in_place else torch.empty(part, device=dev)
            mine.fill_(float(r + 1))
            want_t = torch.arange(1, n + 1, device=dev, dtype=out.dtype).repeat_interleave(part)
            return (lambda: gather(out, mine)), (lambda: int((out != want_t).sum()))
        if self.collective == "reduce_scatter":
            src = full((count,), float(r + 1), device=dev)
            dst = src[r * part : (r + 1) * part] if in_place else torch.empty(part, device=dev)
            want = float(n * (n + 1) // 2)
            return (lambda: scatter(dst, src)), (lambda: int((dst != want).sum()))
        # alltoall: the chunk for rank j holds r*n + j + 1; chunk j received came from j
        ids = torch.arange(n, device=dev, dtype=torch.float32)
        send = (r * n + ids + 1).repeat_interleave(part)
        recv = torch.empty(count, device=dev)
        got = (ids * n + r + 1).repeat_interleave(part)
        return (lambda: dist.all_to_all_single(recv, send)), (lambda: int((recv != got).sum()))


def _devices(rank: int, local: int, cuda: bool) -> str:
    """This rank's `#  Rank` line, as nccl-tests prints it."""
    who = f"#  Rank {rank:2d} Group  0 Pid {os.getpid():6d} on {socket.gethostname():>10s}"
    if not cuda:
        return f"{who} device  0 [cpu] gloo"
    import torch

    props = torch.cuda.get_device_properties(local)
    bus = (
        f"{getattr(props, 'pci_domain_id', 0):04x}:{getattr(props, 'pci_bus_id', 0):02x}:"
        f"{getattr(props, 'pci_device_id', 0):02x}"
    )
    return f"{who} device {local:2d} [{bus}] {props.name}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # c10d's warnings: not the table
    missing = _missing_modules()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    import torch
    import torch.distributed as dist

    rank, world, local = place()
    cuda = torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "") != ""
    if cuda:
        local %= torch.cuda.device_count()
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:  # bound to its device: barrier() has nothing to guess (and warns of nothing)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    else:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    lines: list[str | None] = [None] * world
    dist.all_gather_object(lines, _devices(rank, local, cuda))
    say = print if rank == 0 else (lambda *a, **k: None)
    one_rank = [
        "#",
        "# One rank: nothing crosses a link, so no bandwidth is measured (algbw and",
        "# busbw N/A); the time is the local call's. Start 2 or more ranks (-g 2).",
    ]
    for line in [*header(args), *map(str, lines), *(one_rank if world == 1 else []), *table_head()]:
        say(line)
    bench = Bench(args.collective, rank, world, device)
    busbws: list[float] = []
    total = 0
    for nbytes in sizes(args.minbytes, args.maxbytes, args.stepfactor):
        count = element_count(args.collective, nbytes, world)
        cells = [_measure(args, call, wrong_after, count, world, device, cuda)
                 for call, wrong_after in bench.variants(count)]  # fmt: skip
        busbws += [c[2] for c in cells if c[2] is not None]
        total += sum(c[3] for c in cells)
        say(row(args.collective, count, cells), flush=True)
    say(f"# Out of bounds values : {total} {'OK' if total == 0 else 'FAILED'}")
    average = f"{sum(busbws) / len(busbws):.4f}" if busbws else "N/A"
    say(f"# Avg bus bandwidth    : {average} ")
    say("#")
    dist.destroy_process_group()
    return 1 if total else 0


def _missing_modules() -> str | None:
    """What this node lacks to run the collectives (torch, numpy), in one line."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return (
            f"collective_perf: torch is not installed on {socket.gethostname()}: install "
            "podium[torch] there, or nccl-tests (its *_perf binaries on PATH)"
        )
    try:
        import numpy  # noqa: F401  (torch.distributed's object collectives need it)
    except ImportError:
        return (
            f"collective_perf: numpy is not installed on {socket.gethostname()} and torch "
            "needs it to gather the ranks' names: install podium[torch] there (it brings "
            "numpy), or nccl-tests"
        )
    return None


def _measure(
    args: Options,
    call: Run,
    wrong_after: Callable[[], int],
    count: int,
    world: int,
    device: torch.device,
    cuda: bool,
) -> Cell:
    """One variant (out-of-place or in-place) at one size: its check (#wrong over every
    rank), warm-up, then the mean time of `args.iters` calls and the bandwidths."""
    import torch
    import torch.distributed as dist

    wrong = 0
    if args.check:
        call()
        counted = torch.tensor([wrong_after()], device=device)
        dist.all_reduce(counted)  # #wrong counts every rank's elements
        wrong = int(counted.item())
    for _ in range(args.warmup):
        call()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.iters):
        call()
    if cuda:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / args.iters
    if world == 1:
        return (seconds * 1e6, None, None, wrong)
    algbw = count * WORD / seconds / 1e9
    return (seconds * 1e6, algbw, bus_bandwidth(args.collective, algbw, world), wrong)


if __name__ == "__main__":
    sys.exit(main())
