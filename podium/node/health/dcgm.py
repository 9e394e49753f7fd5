"""DCGM diagnostics (`dcgmi diag -r LEVEL`): parse the result table.

Level 1 in prologs, level 2 after a failure, levels 3/4 on idle nodes. Each row
`| Test | Pass/Fail/Warn/Skip[ - GPU: 0, 1 | All] |` becomes a Result; a failure names
the GPUs when dcgmi does.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from podium.node.health.check_results import Action, Result, Status, skipped

_ROW_RE = re.compile(r"^\|\s*([^|]+?)\s*\|\s*(Pass|Fail|Warn|Skip)\b([^|]*)\|", re.IGNORECASE)


def parse_dcgm_diag(text: str) -> list[Result]:
    results = []
    for line in text.splitlines():
        match = _ROW_RE.match(line.strip())
        if not match:
            continue
        test, verdict, rest = match.group(1), match.group(2).lower(), match.group(3)
        gpus: list[int | None] = [None]  # None: the whole node
        if "GPU" in rest:
            gpus = [int(g) for g in re.findall(r"\d+", rest.split("GPU", 1)[1])] or [None]
        if verdict == "fail":
            for gpu in gpus:
                results.append(
                    Result(
                        "dcgm_diag",
                        Status.CRITICAL,
                        f"DCGM {test}: fail",
                        Action.DRAIN,
                        gpu,
                        details={"test": test},
                    )
                )
        elif verdict == "warn":
            results.append(
                Result("dcgm_diag", Status.WARNING, f"DCGM {test}: warning", details={"test": test})
            )
    if not results and "Pass" not in text:
        return [Result("dcgm_diag", Status.UNKNOWN, "no DCGM result rows")]
    return results or [Result("dcgm_diag", Status.OK, "DCGM diagnostics passed")]


class DcgmDiagCheck:
    """Runs `dcgmi diag -r LEVEL` when DCGM is installed."""

    name = "dcgm_diag"
    deep = True

    def __init__(self, level: int = 1, dcgmi: str = "dcgmi") -> None:
        self.level = level
        self.dcgmi = dcgmi

    def run(self) -> list[Result]:
        path = shutil.which(self.dcgmi)
        if path is None:
            return [
                skipped(
                    self.name,
                    "dcgmi is not installed (install NVIDIA DCGM, datacenter-gpu-manager, "
                    "for its diagnostics)",
                )
            ]
        proc = subprocess.run(
            [path, "diag", "-r", str(self.level)], capture_output=True, text=True, timeout=3600
        )
        return parse_dcgm_diag(proc.stdout)
