"""A PyTorch Lightning job as Lightning's docs write one for a cluster launched with
`torchrun` ("Run on an on-prem cluster": one `torchrun` per node, `Trainer(num_nodes=N,
devices=M, strategy="ddp")`; Lightning reads the node's place from torchrun's
environment, its TorchElasticEnvironment). Nothing in it is Podium's. A restart
(TorchElastic restarts every worker when one fails or a node joins) resumes from the
last checkpoint: `ModelCheckpoint(save_last=True)` each epoch, `fit(ckpt_path="last")`.

`--progress FILE`: a callback (Lightning's extension point) on global rank 0 appends one
JSON line per batch (time, epoch, batch, world size, TorchElastic's restart count, its
process id), the
same lines as examples/torchrun_ddp.py. `--step-time` sleeps after each batch.

    torchrun --nnodes=2 --nproc-per-node=1 --max-restarts=3 --rdzv-backend=c10d \\
        --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT --rdzv-id=$SLURM_JOB_ID \\
        lightning_ddp.py --epochs 40 --checkpoints /ckpt
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset


class Regression(L.LightningModule):
    """A linear model on random data: the smallest thing with a gradient to share."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(20, 1)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> Any:
        source, target = batch
        loss = F.mse_loss(self.layer(source), target)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=1e-3)


class Progress(Callback):
    """One JSON line per batch from global rank 0, and a pause to pace the run."""

    def __init__(self, path: str | None, step_time: float) -> None:
        self.path = path
        self.step_time = step_time

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:  # fmt: skip
        time.sleep(self.step_time)
        if self.path and trainer.global_rank == 0:
            restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))
            line = {"t": time.time(), "epoch": trainer.current_epoch, "batch": batch_idx,
                    "loss": float(outputs["loss"]), "world": trainer.world_size,
                    "restart": restart, "pid": os.getpid()}  # fmt: skip
            with open(self.path, "a") as fh:
                fh.write(json.dumps(line) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description="a Lightning job under torchrun")
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--checkpoints", default="checkpoints")
    parser.add_argument("--progress", default=None)
    parser.add_argument("--step-time", type=float, default=0.0)
    parser.add_argument("--samples", type=int, default=256)
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.rand(args.samples, 20, generator=generator),
                         torch.rand(args.samples, 1, generator=generator))  # fmt: skip
    nodes = int(os.environ.get("GROUP_WORLD_SIZE", 1))  # torchrun's, for this round
    trainer = L.Trainer(
        accelerator="auto", devices=int(os.environ.get("LOCAL_WORLD_SIZE", 1)), num_nodes=nodes,
        strategy="ddp", max_epochs=args.epochs, logger=False, enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ModelCheckpoint(dirpath=args.checkpoints, save_last=True, every_n_epochs=1),
                   Progress(args.progress, args.step_time)],
    )  # fmt: skip
    last = os.path.join(args.checkpoints, "last.ckpt")
    trainer.fit(Regression(), DataLoader(data, batch_size=32),
                ckpt_path=last if os.path.exists(last) else None)  # fmt: skip


if __name__ == "__main__":
    main()
