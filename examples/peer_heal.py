"""Heal from a peer: examples/train.py's side of Podium's replace contract
(docs/resiliency.md, "Replace, don't restart"), in plain torch.distributed.

A job submitted with `--spares=N` gets PODIUM_REPLACE_FILE. Rank 0 writes `ready
standby` into it: the job takes part, and each spare runs a warm standby of it
(PODIUM_STANDBY=<spare>: torch imported, model built, device context made, waiting for
a generation that names its spare; `--cold-spare` writes `ready`: no standby). When
one replica fails, Podium kills what is left of it, writes the next generation into
the file ({"generation": G, "master_addr": ..., "master_port": ..., "world": W,
"replaced": [r], "spare": s, ...}); spare s's standby takes rank r (without one, Podium
starts rank r on the spare's GPUs with PODIUM_REPLACEMENT=1). Then:

- the survivors' collective with the lost peer fails (gloo: "Connection closed by
  peer", at once); they keep their model and optimizer in memory, wait for the
  generation in the file, and join its rendezvous (a new process group);
- every rank agrees on the newest step any survivor finished (an all-reduce), and the
  lowest survivor at that step sends its model, optimizer and place to the others
  (`broadcast_object_list`): the replacement reads no checkpoint, and a survivor that
  failed one step earlier than another catches up, so no step is trained twice;
- training goes on from that step; DDP is wrapped anew around the same model.

Why plain torch.distributed rather than torchft or nvidia-resiliency-ext: the example
must run wherever Podium does (gloo on a CPU in CI, NCCL on a GPU) with only torch
installed, and the contract is a file and a rendezvous address, which either library
could read as well. With NCCL, a survivor's collective with a dead peer does not fail
by itself: the process group needs a timeout (or TORCH_NCCL_ASYNC_ERROR_HANDLING) for
the survivors to notice; see docs/resiliency.md.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


class PeerHeal:
    """This rank's part in replacements: None of it when the job has no spares."""

    def __init__(self, rank: int, standby: bool = True) -> None:
        self.path = os.environ.get("PODIUM_REPLACE_FILE") or None
        self.generation = int(os.environ.get("PODIUM_REPLACE_GENERATION") or 0)
        self.replacement = os.environ.get("PODIUM_REPLACEMENT") == "1"
        spare = os.environ.get("PODIUM_STANDBY")
        self.standby = int(spare) if spare and spare.isdigit() else None
        self.rank = rank
        first = not self.replacement and self.standby is None and self.generation == 0
        if self.path and rank == 0 and first:
            with contextlib.suppress(OSError), open(self.path, "r+") as fh:
                if not fh.read(1):  # empty: nothing told yet, so nothing to overwrite
                    fh.write("ready standby\n" if standby else "ready\n")

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def next_generation(self, timeout_s: float) -> dict[str, Any] | None:
        """The next generation Podium announces, waiting up to `timeout_s` (None: none
        came; the failure was not one Podium replaces)."""
        assert self.path is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with open(self.path) as fh:
                    told = json.loads(fh.readline() or "null")
            except (OSError, ValueError):
                told = None
            if isinstance(told, dict) and int(told.get("generation", 0)) > self.generation:
                self.generation = int(told["generation"])
                return told
            time.sleep(0.02)
        return None

    def wait_as_standby(self, stop: dict[str, int]) -> dict[str, Any] | None:
        """As spare `self.standby`'s warm standby: wait until a generation names this
        spare, and take the failed rank it gives (None: `stop` was asked first)."""
        assert self.path is not None and self.standby is not None
        while not stop["asked"]:
            told = self.next_generation(timeout_s=0.5)
            if told is not None and told.get("spare") == self.standby:
                self.rank = int(told["replaced"][0])
                self.replacement = True
                return told
        return None

    def rejoin(self, told: dict[str, Any], backend: str, world: int) -> None:
        """Leave the broken process group and join generation `told`'s rendezvous."""
        with contextlib.suppress(Exception):
            dist.destroy_process_group()
        os.environ["MASTER_ADDR"] = str(told["master_addr"])
        os.environ["MASTER_PORT"] = str(told["master_port"])
        dist.init_process_group(
            backend, rank=self.rank, world_size=world, timeout=datetime.timedelta(seconds=120)
        )


def sync_from_peer(
    raw: nn.Module,
    optimizer: torch.optim.Optimizer,
    step: int,
    *,
    fresh: bool,
    device: torch.device,
) -> int:
    """Agree on the newest step a survivor finished and give every rank that
    survivor's model, optimizer and step (`fresh`: this rank has nothing to give: the
    replacement). Returns the step training goes on from."""
    world = dist.get_world_size()
    mine = -1 if fresh else step
    newest = torch.tensor([mine])
    dist.all_reduce(newest, op=dist.ReduceOp.MAX)
    holder = torch.tensor([dist.get_rank() if mine == int(newest) else world])
    dist.all_reduce(holder, op=dist.ReduceOp.MIN)
    source = int(holder)
    payload: list[Any] = [None]
    if dist.get_rank() == source:
        buffer = io.BytesIO()
        state = {"model": raw.state_dict(), "optim": optimizer.state_dict(), "step": step}
        torch.save(state, buffer)
        payload = [buffer.getvalue()]
    dist.broadcast_object_list(payload, src=source)
    if dist.get_rank() != source:
        state = torch.load(io.BytesIO(payload[0]), map_location=device, weights_only=True)
        raw.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optim"])
    return int(newest)


__all__ = ["PeerHeal", "sync_from_peer"]
