"""`podium mig apply`: an administrator re-splits one GPU, the way operators do by hand
on Slurm (drain, re-partition, return), as one action.

1. `request` (the API, admin only) checks the GPU and the layout against the model's
   placement rules, records the plan and fences the GPU (label
   unschedulable-pending-mig-apply): no new job lands on it or its slices, the running
   ones finish (a drain, not a kill).
2. `apply`, run by the health agent once no job holds any part of the GPU: the
   configured `health.mig_apply_command`, else `nvidia-mig-parted` with a config for
   that GPU, else `nvidia-smi mig`; then the GPU's slices are read back (NVML; for
   declared GPUs, from the layout) and must be the layout asked for, and the node's
   devices take them, every other device keeping its number.
3. The agent deep-checks the GPU and returns it to service when the check passes; a
   failed apply leaves it fenced for an admin (`podium resume --gpu N`).

Podium never changes a layout on its own: only this admin action does.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from podium.api.health import Health, Label, Remedy
from podium.api.mig import MigLayoutError, model_for, place
from podium.config.cluster import ClusterConfig
from podium.errors import PermissionDenied, SpecError
from podium.node.inventory import GpuInfo, NvmlSeam
from podium.node.mig_config import CONFIG_NAME, mig_parted
from podium.node.slices import declared_slices, layouts, read_nvml_slices
from podium.server.job_rows import held_units
from podium.server.local_node import LocalNode
from podium.server.mig_advisor import end_estimate, finite
from podium.store.db import Row
from podium.store.health_table import HealthTable
from podium.store.mig_layouts import MigLayouts

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def parse_layout(text: str) -> list[str]:
    """A layout as given on the command line: profiles joined by "," or "+"
    (3g.40gb,2g.20gb,1g.10gb,1g.10gb), or "whole" for MIG off."""
    text = text.strip()
    if text.lower() == "whole":
        return []
    parts = [p.strip() for p in text.replace("+", ",").split(",")]
    if not text or any(not p for p in parts):
        raise SpecError(
            f"layout {text!r} is not a list of MIG profiles: give them joined by commas "
            "(3g.40gb,2g.20gb,1g.10gb,1g.10gb) or 'whole'"
        )
    return parts


def _text(layout: Iterable[str]) -> str:
    return "+".join(layout) or "whole"


class MigApplier:
    """Plans and applies MIG layouts on the embedded cluster's node."""

    def __init__(
        self,
        config: ClusterConfig,
        node: LocalNode,
        plans: MigLayouts,
        health: HealthTable,
        real_gpus: bool,
        nvml: NvmlSeam | None = None,
        run: Runner = subprocess.run,
        which: Callable[[str], str | None] = shutil.which,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.node = node
        self.plans = plans
        self.health = health
        self.real_gpus = real_gpus
        self.nvml = nvml
        self.run = run
        self.which = which
        self.clock = clock

    # --- the request (API thread, under the controller's lock) -------------------------

    def request(
        self, who: str, is_admin: bool, gpu: int, layout: list[str], running: list[Row], now: float
    ) -> dict[str, Any]:
        """Plan `gpu`'s new layout and drain it. Returns what is planned and the jobs
        that must end first (with their expected ends)."""
        if not is_admin:
            raise PermissionDenied("only an administrator may re-split a GPU (podium mig apply)")
        info = self._gpu(gpu)
        model = model_for(info.type, info.memory_mb)
        if model is None:
            raise SpecError(f"GPU {gpu} is a {info.type}: it has no MIG profiles to split into")
        if gpu in self.config.node.gpus.sharing:
            mode = self.config.node.gpus.sharing[gpu].kind
            raise SpecError(
                f"GPU {gpu} is shared by {mode} (node.gpus.sharing): a GPU is in one mode at a "
                "time; take it out of sharing in the config to split it"
            )
        if layout:
            try:
                place(model, layout)
            except MigLayoutError as exc:
                raise SpecError(f"GPU {gpu}: {exc}") from None
        now_layout = layouts(self.node.devices).get(gpu, [])
        current = self.health.get(self.node.name, gpu)
        pending = current.remedy is Remedy.MIG_APPLY
        if sorted(now_layout) == sorted(layout) and not pending:
            raise SpecError(f"GPU {gpu} is already {_text(now_layout)}: nothing to apply")
        if current.label is not Label.SCHEDULABLE and not pending:
            raise SpecError(
                f"GPU {gpu} is {current.label.value} ({current.reason or 'fenced'}): resume it "
                f"first (podium resume --gpu {gpu}), then apply"
            )
        self.plans.plan(self.node.name, gpu, layout, who, now)
        reason = f"mig apply by {who}: {_text(now_layout)} -> {_text(layout)}"
        self.health.put(
            Health(
                self.node.name,
                gpu,
                label=Label.PENDING_MIG_APPLY,
                fenced=True,
                fault="mig-apply",
                reason=reason,
                remedy=Remedy.MIG_APPLY,
                since=now,
            ),
            now,
            f"{Label.PENDING_MIG_APPLY.value}: {reason}",
        )
        return {
            "node": self.node.name,
            "gpu": gpu,
            "model": model,
            "now": now_layout,
            "layout": layout,
            "drain": self._blocking(gpu, running),
        }

    def _gpu(self, gpu: int) -> GpuInfo:
        for g in self.node.gpus:
            if g.index == gpu:
                return g
        count = len(self.node.gpus)
        have = f"0-{count - 1}" if count else "none"
        raise SpecError(f"node {self.node.name} has no GPU {gpu} (it has {have})")

    def _blocking(self, gpu: int, running: list[Row]) -> list[dict[str, Any]]:
        return [
            {"job_id": r["job_id"], "expected_end": finite(end_estimate(r))}
            for r in running
            if any(self.node.parent_of(i) == gpu for i in held_units(r))
        ]

    # --- the apply (the health agent, once the GPU is free) ------------------------------

    def apply(self, gpu: int) -> str:
        """Re-split drained `gpu` as planned and give jobs its new slices. Returns what
        was done; raises with a one-line reason when it could not be."""
        layout = self.plans.planned(self.node.name, gpu)
        if layout is None:
            raise RuntimeError(f"no layout is planned for GPU {gpu}")
        with tempfile.TemporaryDirectory(prefix="podium-mig-") as tmp:
            config_file = Path(tmp) / "mig-parted.yaml"
            config_file.write_text(mig_parted({gpu: tuple(layout)}))
            commands = self.commands(gpu, layout, str(config_file))
            for argv, must in commands:
                self._run(argv, must)
        slices = self._read_back(gpu, layout)
        self.node.resplit(gpu, slices)
        mig = self.config.node.gpus.mig  # what admission checks requests against
        if layout:
            mig[gpu] = list(layout)
        else:
            mig.pop(gpu, None)
        self.plans.applied(self.node.name, gpu, layout, self.clock())
        ran = "; ".join(shlex.join(a) for a, _ in commands) or "declared GPU: no command"
        return f"GPU {gpu} is {_text(layout)} ({ran})"

    def commands(
        self, gpu: int, layout: list[str], config_file: str
    ) -> list[tuple[list[str], bool]]:
        """The commands that re-split `gpu`, each with whether it must succeed: the
        configured command; else, on real GPUs, nvidia-mig-parted or nvidia-smi; else
        (declared GPUs) none."""
        custom = self.config.health.mig_apply_argv(gpu, layout, config_file)
        if custom is not None:
            return [(custom, True)]
        if not self.real_gpus:
            return []
        if self.which("nvidia-mig-parted"):
            return [(["nvidia-mig-parted", "apply", "-f", config_file, "-c", CONFIG_NAME], True)]
        if not self.which("nvidia-smi"):
            raise RuntimeError(
                "neither nvidia-mig-parted nor nvidia-smi is installed: install one, or set "
                "health.mig_apply_command"
            )
        i = str(gpu)
        out: list[tuple[list[str], bool]] = [
            (["nvidia-smi", "mig", "-i", i, "-dci"], False),  # fails when there are none
            (["nvidia-smi", "mig", "-i", i, "-dgi"], False),
        ]
        if not layout:
            return [*out, (["nvidia-smi", "-i", i, "-mig", "0"], True)]
        info = self._gpu(gpu)
        model = model_for(info.type, info.memory_mb)
        assert model is not None  # checked by request
        # largest first, as the MIG user guide advises: the driver places each one
        largest = [
            p.profile.name for p in sorted(place(model, layout), key=lambda p: -p.profile.memory)
        ]
        return [
            (["nvidia-smi", "-i", i, "-mig", "1"], True),
            *out,
            (["nvidia-smi", "mig", "-i", i, "-cgi", ",".join(largest), "-C"], True),
        ]

    def _run(self, argv: list[str], must: bool) -> None:
        timeout = self.config.health.action_timeout_s
        try:
            proc = self.run(argv, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"{shlex.join(argv)}: {exc}") from None
        if proc.returncode != 0 and must:
            said = (proc.stderr or proc.stdout or "").strip().splitlines()
            last = said[-1] if said else "no output"
            raise RuntimeError(f"{shlex.join(argv)} exited {proc.returncode}: {last}")

    def _read_back(self, gpu: int, layout: list[str]) -> list[GpuInfo]:
        """The GPU's slices after the apply; they must be the layout asked for."""
        if not self.real_gpus:
            inv = self.config.node.gpus.model_copy(deep=True)
            inv.mig = {gpu: layout} if layout else {}
            return declared_slices(inv, self.node.gpus, only=gpu)
        found = read_nvml_slices(self.node.gpus, self.nvml, only=gpu)
        if sorted(s.type for s in found) != sorted(layout):
            raise RuntimeError(
                f"GPU {gpu} reads back as {_text(s.type for s in found)} after the apply, "
                f"not {_text(layout)}"
            )
        return found


__all__ = ["MigApplier", "parse_layout"]
