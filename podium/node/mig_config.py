"""The configs that apply a set of MIG layouts, from one description: NVIDIA's
mig-parted YAML (what the GPU Operator applies), Slurm's gres.conf and slurm.conf
lines, and Podium's own `node.gpus.mig`. Text only: nothing here touches a GPU.

A layout per GPU index: () for a GPU left whole (MIG off), else its profiles.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping

CONFIG_NAME = "podium-advised"


def mig_parted(layouts: Mapping[int, tuple[str, ...]], name: str = CONFIG_NAME) -> str:
    """A mig-parted config (version v1) with one named config giving each GPU its
    layout: `nvidia-mig-parted apply -f FILE -c NAME`."""
    lines = ["version: v1", "mig-configs:", f"  {name}:"]
    for index in sorted(layouts):
        layout = layouts[index]
        lines.append(f"    - devices: [{index}]")
        if not layout:
            lines.append("      mig-enabled: false")
            continue
        lines += ["      mig-enabled: true", "      mig-devices:"]
        for profile, count in sorted(Counter(layout).items()):
            lines.append(f'        "{profile}": {count}')
    return "\n".join(lines) + "\n"


def slurm_lines(node: str, gpu_type: str, layouts: Mapping[int, tuple[str, ...]]) -> str:
    """gres.conf and slurm.conf lines for the node once the layouts are applied
    (Slurm finds MIG slices and their device files through NVML)."""
    kinds: Counter[str] = Counter()
    for layout in layouts.values():
        kinds.update(layout or (gpu_type,))
    gres = ",".join(f"gpu:{kind}:{count}" for kind, count in sorted(kinds.items()))
    return (
        "# gres.conf (Slurm reads MIG slices and their /dev/nvidia-caps files from NVML)\n"
        "AutoDetect=nvml\n"
        "# slurm.conf (AutoDetect may name a slice's type after its GPU, e.g.\n"
        "# nvidia_h100_80gb_hbm3_1g.10gb; use the names `slurmd -G` prints)\n"
        "GresTypes=gpu\n"
        f"NodeName={node} Gres={gres}\n"
    )


def podium_lines(layouts: Mapping[int, tuple[str, ...]]) -> str:
    """Podium's `node.gpus.mig` for the layouts (GPUs left whole are not listed)."""
    split = {i: list(layout) for i, layout in sorted(layouts.items()) if layout}
    body = ", ".join(f"{i}: [{', '.join(p)}]" for i, p in split.items())
    return f"node:\n  gpus:\n    mig: {{{body}}}\n" if split else "node:\n  gpus:\n    mig: {}\n"


def as_json(layouts: Mapping[int, tuple[str, ...]]) -> str:
    """The layouts as JSON ({"0": ["3g.40gb", ...]}), for tools."""
    return json.dumps({str(i): list(layouts[i]) for i in sorted(layouts)})


__all__ = ["CONFIG_NAME", "as_json", "mig_parted", "podium_lines", "slurm_lines"]
