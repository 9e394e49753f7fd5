"""A small real PyTorch training job for Podium (CPU or GPU, one or many ranks).

Run it with `srun python3 train.py ...` in a batch script, or as an elastic job's
replicas (`podium submit --elastic=1:4 --gpus-per-task=1 --wrap "exec python3
train.py ..."`). It reads its place from the environment (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR/PORT from Podium; SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and
SLURM_LAUNCH_NODE_IPADDR from Slurm's srun), CUDA_VISIBLE_DEVICES and
PODIUM_CHECKPOINT_DIR; it trains a tiny BERT-, GPT- or ResNet-like model on synthetic
data with DistributedDataParallel when there are several ranks.

**World-size agnostic.** An epoch is a fixed set of samples in a fixed order (by epoch);
each step takes the next `--global-batch` of them, whatever the number of ranks: rank r
of W trains on every W-th one, in micro-batches of at most `--micro-batch`, and the
gradient is the mean over the whole global batch (each rank's summed loss is scaled by
W / global batch, and DDP averages over the W ranks). So a run at 1, 2 or 4 ranks takes
the same steps, and a job resized between sizes continues the same loss curve.

**Checkpoints** are torch.distributed.checkpoint (DCP): every rank writes its part, and
a run at another world size loads it (resharding). The sampler's place (epoch, step)
is in the checkpoint, so no sample is trained on twice in an epoch across a resize. A
checkpoint is saved every `--checkpoint-every` steps and when the job is told to stop:
SIGTERM (preemption, time limit, cancel: exit 143) or the elastic resize signal
(SIGUSR1, PODIUM_RESIZE_FILE: exit 0 and Podium restarts it at the new size). The
ranks agree on the step at which they stop (an all-reduce of the flag each step).

**Links.** Where Podium gives PODIUM_LINK_BEATS (an elastic job on Slurm), every
`--link-every` steps each rank sends 4 MiB to the next rank and times what it receives
from the one before (after a barrier), and writes `STEP SECONDS` to
PODIUM_LINK_BEATS/RANK: a host with a slow link slows what its rank receives and what
the next rank receives from it (podium.recover.slow_links names it).

Every step it touches PODIUM_HEARTBEAT_FILE when the job declared a heartbeat, and
with --progress FILE rank 0 appends one JSON line per step, checkpoint and resume
(time, step, loss, world size, restart count): what the fault demo, the goodput and
elastic benchmarks read. With --sample-log FILE every rank appends the sample indices
it trained on at each step.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings

# Podium may ask to stop (SIGTERM: preemption) or resize (SIGUSR1) at any moment, also
# while torch is still loading: the handlers come first, before the slow imports, so
# that an early signal is answered (save once started, then exit) rather than killing
# the process with the signal's default action.
STOP = {"asked": 0}  # 143: SIGTERM; -1: an elastic resize (save, exit 0, restart)
signal.signal(signal.SIGTERM, lambda *_: STOP.update(asked=143))
signal.signal(signal.SIGUSR1, lambda *_: STOP.update(asked=STOP["asked"] or -1))

# After the handlers, on purpose (E402):
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
from ddp_marks import StepMark, marked_ddp  # noqa: E402 (beside this file)
from peer_heal import PeerHeal, sync_from_peer  # noqa: E402 (beside this file)
from torch import nn  # noqa: E402
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict  # noqa: E402

VOCAB, SEQ, WIDTH = 512, 32, 64
# One process with no process group is a world of one to DCP: nothing to warn about.
warnings.filterwarnings("ignore", message="torch.distributed is disabled")


class TinyTransformer(nn.Module):
    """BERT-like (bidirectional) or GPT-like (causal) language model."""

    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.causal = causal
        self.embed = nn.Embedding(VOCAB, WIDTH)
        layer = nn.TransformerEncoderLayer(
            WIDTH, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True
        )  # no dropout: a resumed or resized run retraces the same loss curve
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


def samples(model_name: str, indices: list[int], device: torch.device):
    """Synthetic data, a pure function of each sample's index: any rank, at any world
    size, sees the same sample for the same index."""
    inputs, targets = [], []
    for index in indices:
        gen = torch.Generator().manual_seed(index)
        if model_name == "resnet":
            inputs.append(torch.randn(3, 32, 32, generator=gen))
            targets.append(torch.randint(0, 10, (), generator=gen))
            continue
        tokens = torch.randint(0, VOCAB, (SEQ,), generator=gen)
        if model_name == "gpt":
            inputs.append(tokens[:-1])
            targets.append(tokens[1:])
        else:
            masked = tokens.clone()
            masked[::4] = 0  # "mask" every fourth token; predict the originals
            inputs.append(masked)
            targets.append(tokens)
    return torch.stack(inputs).to(device), torch.stack(targets).to(device)


def epoch_order(epoch: int, size: int) -> list[int]:
    """The samples of `epoch` in the order they are trained on (fixed by the epoch)."""
    gen = torch.Generator().manual_seed(10_000 + epoch)
    return torch.randperm(size, generator=gen).tolist()


class Checkpoints:
    """DCP checkpoints under DIR/MODEL-dcp: step-N directories, and `latest` naming the
    newest complete one (written by rank 0 after every rank has written its part)."""

    def __init__(self, directory: str, model_name: str, rank: int, world: int) -> None:
        self.root = os.path.join(directory, f"{model_name}-dcp")
        self.rank, self.world = rank, world
        os.makedirs(self.root, exist_ok=True)

    def latest(self) -> str | None:
        try:
            with open(os.path.join(self.root, "latest")) as fh:
                name = fh.read().strip()
        except FileNotFoundError:
            return None
        return os.path.join(self.root, name) if name else None

    def save(self, model: nn.Module, optimizer: torch.optim.Optimizer, place: dict) -> None:
        name = f"step-{place['step']}"
        model_state, optim_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optim": optim_state, "place": dict(place)}
        dcp.save(state, checkpoint_id=os.path.join(self.root, name))
        if self.world > 1:
            dist.barrier()
        if self.rank == 0:
            tmp = os.path.join(self.root, ".latest.tmp")
            with open(tmp, "w") as fh:
                fh.write(name + "\n")
            os.replace(tmp, os.path.join(self.root, "latest"))
            self._prune(keep=name)

    def load(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict | None:
        """The place saved with the newest checkpoint, its weights and optimizer loaded
        into `model` and `optimizer` (resharded to this world size); None if none."""
        path = self.latest()
        if path is None:
            return None
        model_state, optim_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optim": optim_state, "place": {"step": 0, "epoch": 0}}
        dcp.load(state, checkpoint_id=path)
        set_state_dict(model, optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])  # fmt: skip
        return dict(state["place"])

    def _prune(self, keep: str) -> None:
        for entry in os.listdir(self.root):
            if entry.startswith("step-") and entry != keep:
                shutil.rmtree(os.path.join(self.root, entry), ignore_errors=True)


class Progress:
    """Rank 0's JSON-lines record of steps, checkpoints and resumes (or nothing)."""

    def __init__(self, path: str | None, rank: int, report_every: float = 0.0) -> None:
        self.fh = open(path, "a", buffering=1) if path and rank == 0 else None  # noqa: SIM115 (open for the whole run)
        self.restart = int(os.environ.get("PODIUM_RESTART_COUNT", "0"))
        self.heartbeat = os.environ.get("PODIUM_HEARTBEAT_FILE")
        beats = os.environ.get("PODIUM_RANK_BEATS")  # podium.run.rank_beats
        self.rank_file = os.path.join(beats, str(rank)) if beats else None
        self.step_seconds: float | None = None  # this rank's last step, before collectives
        in_podium = rank == 0 and report_every > 0 and os.environ.get("PODIUM_JOB_ID")
        self.podium = shutil.which("podium") if in_podium else None
        self.every, self.next_report = report_every, 0.0
        self.reporting: subprocess.Popen[bytes] | None = None

    def log(self, event: str, step: int, **more: object) -> None:
        if self.fh is not None:
            record = {"t": time.time(), "event": event, "step": step, "restart": self.restart}
            self.fh.write(json.dumps({**record, **more}) + "\n")

    def beat(self) -> None:
        if self.heartbeat:
            os.utime(self.heartbeat)

    def reached(self, step: int, phase: int = 0, seconds: float | None = None) -> None:
        """This rank is about to enter collective `phase` of `step` (0: the gradients'
        all-reduce): a rank that hangs before it is then behind the others, which wait
        in it, and Podium names it (podium.run.rank_beats; podium.runtime.rank_step
        does the same, by whole steps, for a job that imports podium). `seconds`: what
        this step took so far, before any collective (a straggler's are longer)."""
        if seconds is not None:
            self.step_seconds = seconds  # said again with each later phase of the step
        if self.rank_file:
            scratch = f"{self.rank_file}.{os.getpid()}"
            mark = f"{step}.{phase}" if phase else f"{step}"
            took = self.step_seconds
            with open(scratch, "w") as fh:
                fh.write(f"{mark} {took:.4f}\n" if took is not None else f"{mark}\n")
            os.replace(scratch, self.rank_file)

    def report(self, step: int, steps: int) -> None:
        """Tell Podium how far the run is (`podium progress`, whose rate gives the
        forecast this job's end), at most every --report-every seconds, and without
        waiting for the answer: a step never waits on it."""
        if self.podium is None or time.monotonic() < self.next_report:
            return
        if self.reporting is not None and self.reporting.poll() is None:
            return  # the last report is still on its way
        self.next_report = time.monotonic() + self.every
        command = [self.podium, "progress", str(step), "--of", str(steps)]
        self.reporting = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )


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
    parser.add_argument("--global-batch", type=int, default=32, help="samples per step, in all")
    parser.add_argument("--micro-batch", type=int, default=16, help="most per rank per pass")
    parser.add_argument("--epoch-samples", type=int, default=1024, help="samples per epoch")
    parser.add_argument("--sample-log", default=None, help="append each rank's samples here")
    parser.add_argument(
        "--report-every", type=float, default=30.0,
        help="seconds between `podium progress` reports from rank 0 (0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--backend", choices=["auto", "gloo"], default="auto",
        help="auto: NCCL on GPUs, gloo on the CPU; gloo: gloo also on a GPU (ranks may share it)",
    )  # fmt: skip
    parser.add_argument(
        "--straggle", default=None, metavar="RANK:SECONDS",
        help="make one rank slow: SECONDS more each step (to see a straggler named)",
    )  # fmt: skip
    parser.add_argument(
        "--link-every", type=int, default=10,
        help="with PODIUM_LINK_BEATS: time the links between ranks every N steps (0: never)",
    )  # fmt: skip
    parser.add_argument(
        "--cold-spare", action="store_true",
        help="with --spares: no warm standby (a replacement starts from nothing)",
    )  # fmt: skip
    args = parser.parse_args()
    straggle = None
    if args.straggle:
        slow_rank, extra = args.straggle.split(":")
        straggle = (int(slow_rank), float(extra))

    env = os.environ  # torch's names (Podium's srun sets them), else srun's own
    rank = int(env.get("RANK") or env.get("SLURM_PROCID") or 0)
    world = int(env.get("WORLD_SIZE") or env.get("SLURM_NTASKS") or 1)
    local_rank = int(env.get("LOCAL_RANK") or env.get("SLURM_LOCALID") or 0)
    env.setdefault("MASTER_ADDR", env.get("SLURM_LAUNCH_NODE_IPADDR") or "127.0.0.1")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.backend == "gloo" and torch.cuda.is_available() and visible:
        device = torch.device("cuda", 0)  # ranks may share one GPU: gloo copies through the host
        backend = "gloo"
    elif torch.cuda.is_available() and visible:
        problem = gpu_shortage(visible, torch.cuda.device_count(), local_rank, world)
        if problem:
            print(f"[rank {rank}] {problem}", file=sys.stderr, flush=True)
            return 2
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    raw: nn.Module = (
        TinyResNet() if args.model == "resnet" else TinyTransformer(args.model == "gpt")
    )
    raw = raw.to(device)
    model = raw
    optimizer = torch.optim.AdamW(raw.parameters(), lr=1e-3)
    heal = PeerHeal(rank, standby=not args.cold_spare)  # Podium's replace contract (--spares)
    if heal.standby is not None:  # a warm standby: ready, it waits to take a failed rank
        torch.zeros(1, device=device).sum().item()  # the device's context, made now
        job_id = os.environ.get("PODIUM_JOB_ID", "local")
        print(f"[job {job_id} spare {heal.standby}] warm standby ready on {device}", flush=True)
        told = heal.wait_as_standby(STOP)
        if told is None:  # the job ended or was stopped before it needed this spare
            return 143 if STOP["asked"] == 143 else 0
        rank, world = heal.rank, int(told["world"])
        env.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR=str(told["master_addr"]),
                   MASTER_PORT=str(told["master_port"]))  # fmt: skip
    if world > 1:
        # A lost peer fails a collective in 2 minutes, not in gloo's default 30.
        dist.init_process_group(
            backend, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120)
        )
    job = os.environ.get("PODIUM_JOB_ID", "local")
    print(
        f"[job {job} rank {rank}/{world}] model={args.model} device={device} "
        f"CUDA_VISIBLE_DEVICES={visible or '(none)'} "
        f"restart={os.environ.get('PODIUM_RESTART_COUNT', '0')}",
        flush=True,
    )

    ckpt_dir = os.environ.get("PODIUM_CHECKPOINT_DIR") or os.path.join(os.getcwd(), "checkpoints")
    checkpoints = Checkpoints(ckpt_dir, args.model, rank, world)
    progress = Progress(args.progress, rank, args.report_every)
    mark = StepMark(lambda at, took: progress.reached(at, seconds=took))  # ddp_marks
    if heal.replacement and world > 1:  # a failed replica's place: the survivors' state
        start = sync_from_peer(raw, optimizer, -1, fresh=True, device=device)
        model = marked_ddp(raw, mark)
        print(f"[job {job} rank {rank}] replaced a failed replica: healed from a peer at "
              f"step {start}", flush=True)  # fmt: skip
    else:
        if world > 1:
            model = marked_ddp(raw, mark)
        place = checkpoints.load(model, optimizer) or {"step": 0, "epoch": 0}
        start = int(place["step"])
        if start:
            print(f"[job {job} rank {rank}] resumed from checkpoint at step {start}", flush=True)
    first = "heal" if heal.replacement else ("resume" if start else "begin")
    progress.log(first, start, world=world)  # rank 0 logs: a replacement rank 0 heals
    sample_log = open(args.sample_log, "a", buffering=1) if args.sample_log else None  # noqa: SIM115

    run = int(env.get("PODIUM_RESTART_COUNT") or 0) + int(env.get("PODIUM_RESIZE_COUNT") or 0)
    beats = env.get("PODIUM_LINK_BEATS")
    links = LinkCheck(beats, rank, world) if beats and world > 1 else None
    stop = STOP  # set by the handlers installed at import, before torch
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    steps_per_epoch = max(1, args.epoch_samples // args.global_batch)
    step = start
    began = time.time()
    while step < args.steps:
        try:
            began_step = time.monotonic()
            if args.step_time:  # "compute" outside the collectives: a rank that hangs
                time.sleep(args.step_time)  # here is a step behind the others (rank_beats)
            if straggle and straggle[0] == rank:
                time.sleep(straggle[1])  # --straggle: this rank is slow
            epoch, within = divmod(step, steps_per_epoch)
            order = epoch_order(epoch, args.epoch_samples)
            chosen = order[within * args.global_batch : (within + 1) * args.global_batch]
            mine = chosen[rank::world]
            optimizer.zero_grad()
            total = torch.zeros((), device=device)
            chunks = [mine[k : k + args.micro_batch] for k in range(0, len(mine), args.micro_batch)]
            for k, chunk in enumerate(chunks or [[]]):
                if not chunk:
                    continue
                inputs, targets = samples(args.model, chunk, device)
                last = k == len(chunks) - 1
                with model.no_sync() if world > 1 and not last else contextlib.nullcontext():
                    out = model(inputs)
                    loss = loss_fn(out.reshape(-1, out.shape[-1]), targets.reshape(-1))
                    if last:  # written as DDP launches the last bucket (ddp_marks)
                        mark.arm(step + 1, began_step)
                        if world == 1:  # no DDP, no all-reduce: now
                            mark.done()
                    (loss * world / len(chosen)).backward()  # DDP averages over the ranks
                total += loss.detach()
            optimizer.step()
            step += 1
            if world > 1:
                progress.reached(step, 1)
                dist.all_reduce(total)
            tokens = len(chosen) * (1 if args.model == "resnet" else SEQ - (args.model == "gpt"))
            mean_loss = total.item() / tokens
            if sample_log is not None:
                entry = {"step": step, "epoch": epoch, "rank": rank, "world": world, "run": run}
                sample_log.write(json.dumps({**entry, "samples": mine}) + "\n")
            progress.log("step", step, loss=round(mean_loss, 6), world=world)
            progress.beat()
            progress.report(step, args.steps)
            progress.reached(step, 2)
            if links is not None and args.link_every and step % args.link_every == 0:
                links.check(step, device)
            asked = _agreed(stop["asked"], world, device)
            place = {"step": step, "epoch": step // steps_per_epoch}
            if asked or step % args.checkpoint_every == 0 or step == args.steps:
                progress.reached(step, 3)
                checkpoints.save(model, optimizer, place)
                progress.log("checkpoint", step)
            if rank == 0 and (step % 10 == 0 or step == args.steps):
                print(f"[job {job}] step {step}/{args.steps} loss {mean_loss:.4f}", flush=True)
            if asked:
                if rank == 0:
                    why = "SIGTERM" if asked == 143 else "resize"
                    print(f"[job {job}] {why}: checkpoint saved at step {step}", flush=True)
                if world > 1:
                    _leave(rank, world)
                return 143 if asked == 143 else 0
        except RuntimeError as exc:  # a collective with a lost peer (gloo: at once)
            if heal.enabled and world > 1:
                progress.reached(step, 9)  # waiting for a replacement (podium.run.rank_beats)
            told = heal.next_generation(timeout_s=60) if heal.enabled and world > 1 else None
            if told is None:
                raise
            print(f"[job {job} rank {rank}] lost a peer ({str(exc).splitlines()[0][:80]}); "
                  f"joining generation {told['generation']}", flush=True)  # fmt: skip
            heal.rejoin(told, backend, world)
            step = sync_from_peer(raw, optimizer, step, fresh=False, device=device)
            model = marked_ddp(raw, mark)
            progress.log("heal", step, world=world, generation=told["generation"],
                         replaced=told.get("replaced"))  # fmt: skip
    if rank == 0:
        rate = (step - start) / max(time.time() - began, 1e-9)
        print(f"[job {job}] done: {step} steps ({rate:.1f} steps/s), checkpoint "
              f"{checkpoints.latest()}", flush=True)  # fmt: skip
    if world > 1:
        _leave(rank, world)
    return 0


def _leave(rank: int, world: int, wait_s: float = 30.0) -> None:
    """Destroy the process group with rank 0, whose process hosts the rendezvous store,
    last: a rank whose destroy_process_group() still talks to a store that has gone
    can hang for ever (pytorch/pytorch#75097; seen here once in gloo, rank 1 after rank 0
    exited). Every rank passes a barrier; the others destroy and say so in the store;
    rank 0 waits for them (at most `wait_s`), then destroys its own."""
    store = dist.distributed_c10d._get_default_store()
    dist.barrier()
    if rank != 0:
        dist.destroy_process_group()
        with contextlib.suppress(Exception):  # rank 0 waits only so long anyway
            store.add("podium/left", 1)
        return
    deadline = time.monotonic() + wait_s
    with contextlib.suppress(Exception):
        while store.add("podium/left", 0) < world - 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    dist.destroy_process_group()


class LinkCheck:
    """Times the link into this rank: 4 MiB from the rank before it in a ring, after a
    barrier (so every rank starts together), written as `STEP SECONDS` to its file."""

    BYTES = 4 << 20

    def __init__(self, directory: str, rank: int, world: int) -> None:
        self.path = os.path.join(directory, str(rank))
        self.rank, self.world = rank, world

    def check(self, step: int, device: torch.device) -> None:
        out = torch.zeros(self.BYTES // 4, device=device)
        into = torch.empty_like(out)
        dist.barrier()
        began = time.monotonic()
        sent = dist.isend(out, (self.rank + 1) % self.world)
        dist.irecv(into, (self.rank - 1) % self.world).wait()
        took = time.monotonic() - began
        sent.wait()
        scratch = f"{self.path}.{os.getpid()}"
        with open(scratch, "w") as fh:
            fh.write(f"{step} {took:.4f}\n")
        os.replace(scratch, self.path)


def _agreed(asked: int, world: int, device: torch.device) -> int:
    """What every rank was asked (143 for SIGTERM over -1 for a resize; 0: nothing), the
    same on all ranks, so that they stop after the same step."""
    if world == 1:
        return 143 if asked == 143 else (1 if asked else 0)
    flag = torch.tensor([2 if asked == 143 else (1 if asked else 0)], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return {2: 143, 1: 1, 0: 0}[int(flag.item())]


if __name__ == "__main__":
    sys.exit(main())
