"""DDP under `torchrun`, as PyTorch's own tutorial writes it: "Fault-tolerant
Distributed Training with torchrun" (pytorch/examples,
distributed/ddp-tutorial-series/multigpu_torchrun.py). Nothing in it is Podium's: the
process group comes from torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR/PORT), and a restart (TorchElastic restarts every worker when one fails or
a node joins) resumes from the snapshot, saved every `--save-every` epochs.

As in the tutorial, plus two things for CPU runs and for measuring: gloo where CUDA is
not there, and `--progress FILE`, where global rank 0 appends one JSON line per batch
(time, epoch, batch, world size, TorchElastic's restart count, its process id). `--step-time` sleeps
after each batch, so a tiny model trains at a pace that a fault can interrupt.

    torchrun --nnodes=2 --nproc-per-node=1 --max-restarts=3 --rdzv-backend=c10d \\
        --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT --rdzv-id=$SLURM_JOB_ID \\
        torchrun_ddp.py 40 1 --snapshot-path /ckpt/snapshot.pt
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, get_world_size, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Synthetic(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """The tutorial's MyTrainDataset: random inputs and targets, fixed by the seed."""

    def __init__(self, size: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.data = [(torch.rand(20, generator=generator), torch.rand(1, generator=generator))
                     for _ in range(size)]  # fmt: skip

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.data[index]


def ddp_setup() -> torch.device:
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        init_process_group(backend="nccl")
        return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    init_process_group(backend="gloo")
    return torch.device("cpu")


Batches = DataLoader[tuple[torch.Tensor, torch.Tensor]]


class Trainer:
    def __init__(self, model: torch.nn.Module, train_data: Batches,
                 optimizer: torch.optim.Optimizer, save_every: int, snapshot_path: str,
                 device: torch.device, progress: str | None, step_time: float) -> None:  # fmt: skip
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.device = device
        self.model = model.to(device)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        self.progress = progress
        self.step_time = step_time
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)
        on_gpu = device.type == "cuda"
        self.model = DDP(self.model, device_ids=[self.local_rank] if on_gpu else None)

    def _load_snapshot(self, snapshot_path: str) -> None:
        snapshot = torch.load(snapshot_path, map_location=self.device)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source: torch.Tensor, targets: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch: int) -> None:
        sampler = self.train_data.sampler
        assert isinstance(sampler, DistributedSampler)
        sampler.set_epoch(epoch)
        for batch, (source, targets) in enumerate(self.train_data):
            loss = self._run_batch(source.to(self.device), targets.to(self.device))
            time.sleep(self.step_time)
            if self.progress and self.global_rank == 0:
                restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))
                line = {"t": time.time(), "epoch": epoch, "batch": batch, "loss": loss,
                        "world": get_world_size(), "restart": restart,
                        "pid": os.getpid()}  # fmt: skip
                with open(self.progress, "a") as fh:
                    fh.write(json.dumps(line) + "\n")

    def _save_snapshot(self, epoch: int) -> None:
        snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch}
        partial = self.snapshot_path + ".partial"  # a kill mid-save leaves the last one whole
        torch.save(snapshot, partial)
        os.replace(partial, self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}")

    def train(self, max_epochs: int) -> None:
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.local_rank == 0 and self.global_rank == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", default=32, type=int)
    parser.add_argument("--samples", default=256, type=int)
    parser.add_argument("--snapshot-path", default="snapshot.pt")
    parser.add_argument("--progress", default=None)
    parser.add_argument("--step-time", default=0.0, type=float)
    args = parser.parse_args()
    device = ddp_setup()
    dataset = Synthetic(args.samples)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = DataLoader(dataset, batch_size=args.batch_size, pin_memory=device.type == "cuda",
                      shuffle=False, sampler=DistributedSampler(dataset))  # fmt: skip
    trainer = Trainer(model, data, optimizer, args.save_every, args.snapshot_path, device,
                      args.progress, args.step_time)  # fmt: skip
    trainer.train(args.total_epochs)
    destroy_process_group()


if __name__ == "__main__":
    main()
