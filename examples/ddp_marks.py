"""A rank's step mark under DistributedDataParallel: written as DDP launches the
gradients' last bucket, not before the backward pass.

Podium names a hung rank by the mark it stopped at (podium.run.rank_beats): a rank
that hangs stays behind the others, which wait for it in the collective. Written
before `backward()`, the mark did not tell a rank hung in its backward computation
from its peers already waiting in the gradients' all-reduce: both had written the
same step, and the job fell through to the job-wide heartbeat timeout (a test that
stopped a rank at random times missed it in 4 of 8 runs on a loaded machine). DDP
calls its communication hook once per bucket, the last one after the rank's whole
backward pass, while a peer's hook runs on without waiting for it (gloo and NCCL
all-reduces are launched asynchronously). So the mark this hook writes is the step
a rank has finished computing, and a rank stopped anywhere before it is a step
behind. A rank stopped inside the all-reduce itself has its peers' mark: the
supervisor names it only when a signal stopped its process (podium.run.hang_watch).
"""

# No `from __future__ import annotations`: DDP compares a hook's annotations, as
# objects, with dist.GradBucket and torch.futures.Future[torch.Tensor].
import time
from collections.abc import Callable

import torch
from torch import nn
from torch._C._distributed_c10d import GradBucket
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks


class StepMark:
    """The mark a step's backward pass writes once done: `arm` it with the step and
    when the step began; DDP's hook (`marked_ddp`) calls `done`, which calls
    `write(step, seconds since it began)` (a rank with no DDP calls `done` itself)."""

    def __init__(self, write: Callable[[int, float], None]) -> None:
        self.write = write
        self.step = 0
        self.began = 0.0

    def arm(self, step: int, began: float) -> None:
        self.step, self.began = step, began

    def done(self) -> None:
        self.write(self.step, time.monotonic() - self.began)


def marked_ddp(raw: nn.Module, mark: StepMark) -> nn.parallel.DistributedDataParallel:
    """`raw` in DDP, whose gradient all-reduce (DDP's own: averaged over the ranks)
    first writes `mark` when it launches the last bucket of a backward pass."""
    model = nn.parallel.DistributedDataParallel(raw)
    model.register_comm_hook(mark, _marked_allreduce)
    return model


def _marked_allreduce(mark: StepMark, bucket: GradBucket) -> torch.futures.Future[torch.Tensor]:
    if bucket.is_last():
        mark.done()
    return default_hooks.allreduce_hook(None, bucket)  # type: ignore[arg-type]


__all__ = ["StepMark", "marked_ddp"]
