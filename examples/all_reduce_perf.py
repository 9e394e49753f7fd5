"""all_reduce_perf for machines without NCCL: nccl-tests' all-reduce benchmark, with
its options and output format, over torch.distributed (NCCL on GPUs, gloo on CPUs).

Run one process per rank with srun, as nccl-tests runs under Slurm:

    srun --mpi=pmix python3 all_reduce_perf.py -b 8 -e 128M -f 2 -g 1

It is Podium's runner (`python -m podium.node.health.collective_perf all_reduce ...`,
which also has all_gather, reduce_scatter, alltoall and broadcast), under the name of
nccl-tests' binary; `podium nccl-test` runs it as a job.
"""

import sys

from podium.node.health.collective_perf import main

if __name__ == "__main__":
    sys.exit(main(["all_reduce", *sys.argv[1:]]))
