"""Fault-tolerant DDP with torchft, as torchft's own README and train_ddp.py write it
(pytorch/torchft): one replica group per `torchrun`, a `Manager` over a gloo (CPU) or
NCCL process group, torchft's `DistributedDataParallel` and `Optimizer`, and a
`DistributedSampler` sharded by replica group. Nothing in it is Podium's: the group
reads REPLICA_GROUP_ID, NUM_REPLICA_GROUPS and TORCHFT_LIGHTHOUSE, as torchft's
examples do, and torchrun gives it RANK, WORLD_SIZE and MASTER_ADDR/PORT.

When a replica group is lost, the others keep stepping without it (min_replica_size
1); a group that joins, a restarted one or one on a spare, is healed live from a peer
(torchft's checkpoint transport) at the next quorum and steps on from the peers' step.

As train_ddp.py, less CIFAR-10 (this machine has no network for jobs): a synthetic
dataset, fixed by the seed, and a small model. Plus the checkpoint train_ddp.py leaves
to the user ("periodically checkpoint model, optim, manager"): with `--checkpoint
PATH`, the participant of rank 0 saves every `--save-every` steps, and a group that
starts when none is left to heal from (a requeue of the whole job) loads it. And, for
measuring: `--progress FILE`,
where each group appends one JSON line per committed step (time, group, step, the
participants, its process id), and `--step-time`, a sleep per step so that a fault can
land mid-run.

    torchrun --standalone --nnodes=1 --nproc-per-node=1 torchft_ddp.py --steps 200
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import timedelta
from typing import Any

import torch
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset
from torchft import (
    DistributedDataParallel,
    DistributedSampler,
    Manager,
    Optimizer,
    ProcessGroupGloo,
    ProcessGroupNCCL,
)


def main() -> None:
    parser = argparse.ArgumentParser(description="torchft DDP on synthetic data")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--progress", default=None)
    parser.add_argument("--step-time", type=float, default=0.0)
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--save-every", type=int, default=50)
    args = parser.parse_args()
    replica_group_id = int(os.environ.get("REPLICA_GROUP_ID", 0))
    num_replica_groups = int(os.environ.get("NUM_REPLICA_GROUPS", 2))

    generator = torch.Generator().manual_seed(0)
    trainset = TensorDataset(torch.rand(4096, 32, generator=generator),
                             torch.randint(0, 10, (4096,), generator=generator))  # fmt: skip
    sampler = DistributedSampler(trainset, replica_rank=replica_group_id,
                                 num_replica_groups=num_replica_groups, group_rank=0,
                                 num_replicas=1, shuffle=True)  # fmt: skip
    trainloader = DataLoader(trainset, batch_size=64, sampler=sampler)

    def load_state_dict(state_dict: dict[str, Any]) -> None:
        m.load_state_dict(state_dict["model"])
        optimizer.load_state_dict(state_dict["optim"])

    def state_dict() -> dict[str, Any]:
        return {"model": m.state_dict(), "optim": optimizer.state_dict()}

    if torch.cuda.is_available():
        device = "cuda"
        pg: ProcessGroupGloo | ProcessGroupNCCL = ProcessGroupNCCL(timeout=timedelta(seconds=30))
    else:
        device = "cpu"
        pg = ProcessGroupGloo(timeout=timedelta(seconds=5))

    manager = Manager(pg=pg, min_replica_size=1, load_state_dict=load_state_dict,
                      state_dict=state_dict, replica_id=f"train_ddp_{replica_group_id}",
                      timeout=timedelta(seconds=30))  # fmt: skip

    torch.manual_seed(0)  # the same initial weights in every group
    m: nn.Module = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
    m = DistributedDataParallel(manager, m)
    optimizer = Optimizer(manager, optim.AdamW(m.parameters()))
    criterion = nn.CrossEntropyLoss()
    if args.checkpoint and os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint, map_location=device)
        load_state_dict(saved)
        manager.load_state_dict(saved["torchft"])
        print(f"Resuming from {args.checkpoint} at step {manager.current_step()}", flush=True)

    while manager.current_step() < args.steps:
        for inputs, labels in trainloader:
            before = manager.current_step()
            optimizer.zero_grad()
            out = m(inputs.to(device))
            loss = criterion(out, labels.to(device))
            loss.backward()
            optimizer.step()  # applied only if every participant's allreduce succeeded
            time.sleep(args.step_time)
            if args.progress and manager.current_step() > before:
                line = {"t": time.time(), "group": replica_group_id,
                        "step": manager.current_step(), "loss": loss.item(),
                        "participants": manager.num_participants(),
                        "pid": os.getpid()}  # fmt: skip
                with open(args.progress, "a") as fh:
                    fh.write(json.dumps(line) + "\n")
            step = manager.current_step()
            if (args.checkpoint and step > before and step % args.save_every == 0
                    and manager.participating_rank() == 0):  # fmt: skip
                partial = args.checkpoint + ".partial"  # a kill mid-save leaves the last whole
                torch.save({**state_dict(), "torchft": manager.state_dict()}, partial)
                os.replace(partial, args.checkpoint)
            if manager.current_step() % 100 == 0:
                print(f"[{manager.current_step()}] loss = {loss.item()}", flush=True)
            if manager.current_step() >= args.steps:
                break


if __name__ == "__main__":
    main()
