"""all_reduce_perf for machines without NCCL: nccl-tests' all-reduce benchmark, with
its options and output format, over torch.distributed (NCCL on GPUs, gloo on CPUs).

Run one process per rank with srun, as nccl-tests runs under Slurm:

    srun --mpi=pmix python3 all_reduce_perf.py -b 8 -e 128M -f 2 -g 1

Each rank finds its place in srun's variables (SLURM_PROCID, SLURM_NTASKS,
SLURM_LOCALID; RANK/WORLD_SIZE when set) and its rendezvous in MASTER_ADDR
(else SLURM_LAUNCH_NODE_IPADDR) and MASTER_PORT. Rank 0 prints the table: size,
count, type, redop, root, time, algbw, busbw and #wrong (out-of-place and in-place),
then "# Avg bus bandwidth". busbw = algbw * 2 (n - 1) / n, as nccl-tests defines it.
Results are checked: every rank adds its rank + 1, so each element must equal
n (n + 1) / 2; a wrong element is counted in #wrong and makes the exit code 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size(text: str) -> int:
    """nccl-tests' sizes: bytes, or a number with K, M or G."""
    unit = UNITS.get(text[-1:].upper(), 1)
    return int(text[:-1] if unit > 1 else text) * unit


def place() -> tuple[int, int, int]:
    env = os.environ
    rank = int(env.get("RANK") or env.get("SLURM_PROCID") or 0)
    world = int(env.get("WORLD_SIZE") or env.get("SLURM_NTASKS") or 1)
    local = int(env.get("LOCAL_RANK") or env.get("SLURM_LOCALID") or 0)
    env.setdefault("MASTER_ADDR", env.get("SLURM_LAUNCH_NODE_IPADDR") or "127.0.0.1")
    env.setdefault("MASTER_PORT", "29500")
    return rank, world, local


def timed(tensor: torch.Tensor, iters: int, sync: bool) -> float:
    """Seconds per all-reduce, averaged over `iters`."""
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor)
    if sync:
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-b", "--minbytes", type=size, default=size("32M"))
    parser.add_argument("-e", "--maxbytes", type=size, default=size("32M"))
    parser.add_argument("-f", "--stepfactor", type=int, default=2)
    parser.add_argument("-g", "--ngpus", type=int, default=1, help="GPUs per rank (1 only)")
    parser.add_argument("-n", "--iters", type=int, default=20)
    parser.add_argument("-w", "--warmup_iters", type=int, default=5)
    args = parser.parse_args()
    if args.ngpus != 1:
        print("all_reduce_perf.py: -g must be 1 (one GPU per rank)", file=sys.stderr)
        return 2
    rank, world, local = place()
    cuda = torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "") != ""
    device = torch.device("cuda", local % torch.cuda.device_count()) if cuda else None
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    if rank == 0:
        print(f"# nThread 1 nGpus {args.ngpus} minBytes {args.minbytes} maxBytes "
              f"{args.maxbytes} step: {args.stepfactor}(factor) warmup iters: "
              f"{args.warmup_iters} iters: {args.iters} validation: 1")  # fmt: skip
        print(f"#  Using devices ({'cuda' if cuda else 'cpu, gloo'}), {world} rank(s)")
        print("#                                      out-of-place                    in-place")
        print("#       size    count   type  redop  root     time  algbw  busbw #wrong     "
              "time  algbw  busbw #wrong")  # fmt: skip
        print("#        (B) (elements)                      (us) (GB/s) (GB/s)             "
              "(us) (GB/s) (GB/s)")  # fmt: skip
    expected = world * (world + 1) / 2
    wrong_total = 0
    busbws = []
    nbytes = args.minbytes
    while nbytes <= args.maxbytes:
        count = max(1, nbytes // 4)
        cols = []
        for _ in ("out-of-place", "in-place"):
            data = torch.full((count,), float(rank + 1), device=device)
            check = data.clone()
            dist.all_reduce(check)
            wrong = int((check != expected).sum().item())
            for _ in range(args.warmup_iters):
                dist.all_reduce(data)
            seconds = timed(data, args.iters, cuda)
            algbw = count * 4 / seconds / 1e9
            busbw = algbw * 2 * (world - 1) / world
            cols.append(f"{seconds * 1e6:8.1f} {algbw:6.2f} {busbw:6.2f} {wrong:6d}")
            busbws.append(busbw)
            wrong_total += wrong
        if rank == 0:
            print(
                f"{count * 4:12d} {count:12d}  float    sum    -1 {cols[0]} {cols[1]}", flush=True
            )
        nbytes *= args.stepfactor
    if rank == 0:
        print(f"# Out of bounds values : {wrong_total} {'OK' if not wrong_total else 'FAILED'}")
        print(f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):.4f} ")
    dist.destroy_process_group()
    return 1 if wrong_total else 0


if __name__ == "__main__":
    sys.exit(main())
