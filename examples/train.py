"""A small real PyTorch training job for Podium (CPU or GPU, one or many ranks).

Run it with `srun python3 train.py ...` in a batch script. It reads its place from
the environment srun gives every task (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT
from Podium's srun; SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and
SLURM_LAUNCH_NODE_IPADDR from Slurm's), CUDA_VISIBLE_DEVICES and PODIUM_CHECKPOINT_DIR; it trains
a tiny BERT-, GPT- or ResNet-like model on synthetic data with DistributedDataParallel
when there are several ranks, saves a checkpoint every few steps (rank 0, atomically),
and resumes from the last checkpoint when restarted. On SIGTERM (preemption, time
limit, cancel) it saves a checkpoint before exiting.

Every step it touches PODIUM_HEARTBEAT_FILE when the job declared a heartbeat, and
with --progress FILE rank 0 appends one JSON line per step, checkpoint and resume
(time, step, restart count): what the fault demo and the goodput benchmark read.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

VOCAB, SEQ, WIDTH = 512, 32, 64


class TinyTransformer(nn.Module):
    """BERT-like (bidirectional) or GPT-like (causal) language model."""

    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.causal = causal
        self.embed = nn.Embedding(VOCAB, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, nhead=4, dim_feedforward=128, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        mask = None
        if self.causal:
            mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
            mask = mask.to(tokens.device)
        return self.head(self.encoder(self.embed(tokens), mask=mask, is_causal=self.causal))


class TinyResNet(nn.Module):
    """Two residual blocks and a classifier over 3x32x32 images."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.Conv2d(16, 16, 3, padding=1),
                nn.BatchNorm2d(16),
                nn.ReLU(),
                nn.Conv2d(16, 16, 3, padding=1),
                nn.BatchNorm2d(16),
            )
            for _ in range(2)
        )
        self.head = nn.Linear(16, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(images))
        for block in self.blocks:
            x = torch.relu(x + block(x))
        return self.head(x.mean(dim=(2, 3)))


def batch(model_name: str, step: int, rank: int, device: torch.device):
    """Synthetic data, a pure function of (step, rank): a resumed run sees the same data."""
    gen = torch.Generator().manual_seed(step * 1000 + rank)
    if model_name == "resnet":
        images = torch.randn(16, 3, 32, 32, generator=gen)
        labels = torch.randint(0, 10, (16,), generator=gen)
        return images.to(device), labels.to(device)
    tokens = torch.randint(0, VOCAB, (16, SEQ), generator=gen)
    if model_name == "gpt":
        return tokens[:, :-1].to(device), tokens[:, 1:].to(device)
    masked = tokens.clone()
    masked[:, ::4] = 0  # "mask" every fourth token; predict the originals
    return masked.to(device), tokens.to(device)


def save(path: str, model: nn.Module, optimizer: torch.optim.Optimizer, step: int) -> None:
    tmp = f"{path}.tmp"
    torch.save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, tmp
    )
    os.replace(tmp, path)


class Progress:
    """Rank 0's JSON-lines record of steps, checkpoints and resumes (or nothing)."""

    def __init__(self, path: str | None, rank: int) -> None:
        self.fh = open(path, "a", buffering=1) if path and rank == 0 else None  # noqa: SIM115 (open for the whole run)
        self.restart = int(os.environ.get("PODIUM_RESTART_COUNT", "0"))
        self.heartbeat = os.environ.get("PODIUM_HEARTBEAT_FILE")

    def log(self, event: str, step: int) -> None:
        if self.fh is not None:
            record = {"t": time.time(), "event": event, "step": step, "restart": self.restart}
            self.fh.write(json.dumps(record) + "\n")

    def beat(self) -> None:
        if self.heartbeat:
            os.utime(self.heartbeat)


def gpu_shortage(visible: str, count: int, local_rank: int, world: int) -> str | None:
    """Why this rank cannot have a GPU of its own, or None. NCCL refuses two ranks on
    one device ("Duplicate GPU detected"); say so plainly before it does."""
    named = [v for v in visible.split(",") if v.strip()]
    if count < len(named):
        return (
            f"CUDA_VISIBLE_DEVICES={visible} names {len(named)} GPU(s) but only {count} "
            "exist(s) here: were the GPUs declared rather than detected?"
        )
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if len(named) > 1 and count < local_world:
        return (
            f"local rank {local_rank} of {local_world} needs a GPU of its own but only "
            f"{count} are visible (CUDA_VISIBLE_DEVICES={visible})"
        )
    return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["bert", "gpt", "resnet"], required=True)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument(
        "--step-time", type=float, default=0.0, help="extra seconds per step (to stretch a demo)"
    )
    parser.add_argument("--progress", default=None, help="append rank 0's progress here (JSON)")
    args = parser.parse_args()

    env = os.environ  # torch's names (Podium's srun sets them), else srun's own
    rank = int(env.get("RANK") or env.get("SLURM_PROCID") or 0)
    world = int(env.get("WORLD_SIZE") or env.get("SLURM_NTASKS") or 1)
    local_rank = int(env.get("LOCAL_RANK") or env.get("SLURM_LOCALID") or 0)
    env.setdefault("MASTER_ADDR", env.get("SLURM_LAUNCH_NODE_IPADDR") or "127.0.0.1")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if torch.cuda.is_available() and visible:
        problem = gpu_shortage(visible, torch.cuda.device_count(), local_rank, world)
        if problem:
            print(f"[rank {rank}] {problem}", file=sys.stderr, flush=True)
            return 2
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    if world > 1:
        dist.init_process_group(backend, rank=rank, world_size=world)
    job = os.environ.get("PODIUM_JOB_ID", "local")
    print(
        f"[job {job} rank {rank}/{world}] model={args.model} device={device} "
        f"CUDA_VISIBLE_DEVICES={visible or '(none)'} "
        f"restart={os.environ.get('PODIUM_RESTART_COUNT', '0')}",
        flush=True,
    )

    model: nn.Module = (
        TinyResNet() if args.model == "resnet" else TinyTransformer(args.model == "gpt")
    )
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ckpt_dir = os.environ.get("PODIUM_CHECKPOINT_DIR") or os.path.join(os.getcwd(), "checkpoints")
    os.makedirs(ckpt_dir, exist_ok=True)
    ckpt = os.path.join(ckpt_dir, f"{args.model}.pt")
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        print(f"[job {job} rank {rank}] resumed from checkpoint at step {start}", flush=True)
    progress = Progress(args.progress, rank)
    progress.log("resume" if start else "begin", start)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    plain = model.module if world > 1 else model

    stop = {"asked": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(asked=True))
    loss_fn = nn.CrossEntropyLoss()
    step = start
    began = time.time()
    while step < args.steps:
        inputs, targets = batch(args.model, step, rank, device)
        optimizer.zero_grad()
        out = model(inputs)
        loss = loss_fn(out.reshape(-1, out.shape[-1]), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        step += 1
        if args.step_time:
            time.sleep(args.step_time)
        progress.log("step", step)
        progress.beat()
        if rank == 0 and (step % args.checkpoint_every == 0 or step == args.steps):
            save(ckpt, plain, optimizer, step)
            progress.log("checkpoint", step)
        if rank == 0 and (step % 10 == 0 or step == args.steps):
            print(f"[job {job}] step {step}/{args.steps} loss {loss.item():.4f}", flush=True)
        if stop["asked"]:
            if rank == 0:
                save(ckpt, plain, optimizer, step)
                print(f"[job {job}] SIGTERM: checkpoint saved at step {step}", flush=True)
            return 143
    if rank == 0:
        rate = (step - start) / max(time.time() - began, 1e-9)
        print(f"[job {job}] done: {step} steps ({rate:.1f} steps/s), checkpoint {ckpt}", flush=True)
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
