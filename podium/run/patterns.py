"""Expansion of output file patterns (%x, %j, %J, %s, %u, %A, %a, %N, %n, %t, %%)."""

from __future__ import annotations

import re

_PATTERN_RE = re.compile(r"%(\d*)(.)")


def expand(
    pattern: str,
    *,
    job_id: int,
    name: str,
    user: str,
    node: str,
    array_job_id: int | None = None,
    array_task_id: int | None = None,
    task_id: int | None = None,
) -> str:
    """Expand an sbatch filename pattern.

    %j job id, %J job id and step (a batch script's output: the job id alone, as
    sbatch's), %s step ("batch"), %x job name, %u user, %A array master id (job id if
    not an array), %a array task id (4294967294 if not an array, as in Slurm), %N node, %n node
    index (0), %t task rank (left as %t when `task_id` is None), %% a percent sign.
    A number after % zero-pads numeric values ("%4a" -> "0007").
    """

    def sub(match: re.Match[str]) -> str:
        width, letter = match.group(1), match.group(2)
        value: str | int
        if letter == "%":
            return "%"
        if letter in "jJ":
            value = job_id
        elif letter == "s":
            return "batch"
        elif letter == "x":
            value = name
        elif letter == "u":
            value = user
        elif letter == "A":
            value = array_job_id if array_job_id is not None else job_id
        elif letter == "a":
            value = array_task_id if array_task_id is not None else 4294967294
        elif letter == "N":
            value = node
        elif letter == "n":
            value = 0
        elif letter == "t":
            if task_id is None:
                return match.group(0)
            value = task_id
        else:
            return match.group(0)
        if isinstance(value, int) and width:
            return str(value).zfill(min(int(width), 10))  # as submit allows (%10j at most)
        return str(value)

    return _PATTERN_RE.sub(sub, pattern)
