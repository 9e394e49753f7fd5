"""An array job's task indices as Slurm writes them ("0-15:4,20,30-39"), kept as ranges.

A pending array is one job record holding the indices of its tasks not yet started
(Slurm's array "meta" record; a task gets a record of its own when it starts, or when
it alone is cancelled, held or changed). Kept as ranges, a million pending tasks are
a few bytes and every step here costs O(ranges), never O(tasks).

Standard library only (the lean client expands `squeue -r` with it).
"""

from __future__ import annotations

import heapq
import itertools

TYPE_CHECKING = False  # typing itself is not loaded on the client's lean path
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from typing import Any


def compress(indices: Iterable[int]) -> list[range]:
    """Sorted, distinct `indices` as ranges: runs of one stride (1 first, then any
    stride of three or more indices) each become one range."""
    values = sorted(set(indices))
    out: list[range] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j == i and i + 2 < len(values):  # a stride > 1 over three or more indices?
            step = values[i + 1] - values[i]
            while j + 1 < len(values) and values[j + 1] - values[j] == step:
                j += 1
            if j - i < 2:
                j = i
            else:
                out.append(range(values[i], values[j] + 1, step))
                i = j + 1
                continue
        out.append(range(values[i], values[j] + 1))
        i = j + 1
    return out


def normal(ranges: Sequence[range]) -> list[range]:
    """Ranges as `compress` would give them for the indices they hold, in O(ranges
    log ranges) when their spans do not overlap (what people write); overlapping ones
    are expanded (callers bound the count first)."""
    spans = sorted((r for r in ranges if len(r)), key=lambda r: r.start)
    if any(b.start <= a[-1] for a, b in itertools.pairwise(spans)):
        return compress(i for r in spans for i in r)
    out: list[range] = []
    for r in spans:
        if len(r) == 1:
            r = range(r.start, r.start + 1)
        last = out[-1] if out else None
        if last is not None and last.step == r.step == 1 and r.start == last[-1] + 1:
            out[-1] = range(last.start, r.stop)
        elif len(r) == 2 and r.step > 1:  # two indices are two singletons in compress
            out += [range(r.start, r.start + 1), range(r[-1], r[-1] + 1)]
        else:
            out.append(r)
    return out


def stride(ranges: Sequence[range]) -> int:
    """The stride of the indices when they are evenly spaced (one index: 1), else 1
    (SLURM_ARRAY_TASK_STEP)."""
    spans = sorted((r for r in ranges if len(r)), key=lambda r: r.start)
    gaps = {r.step for r in spans if len(r) > 1}
    gaps |= {b.start - a[-1] for a, b in itertools.pairwise(spans)}
    return gaps.pop() if len(gaps) == 1 else 1


def parse(text: str) -> list[range]:
    """Ranges from what `format_ranges` wrote ("0-15:4,20,30-39"; a "%N" throttle
    suffix is ignored). Raises ValueError on anything else."""
    text = text.split("%", 1)[0]
    out: list[range] = []
    for part in text.split(",") if text else ():
        span, _, step = part.partition(":")
        first, _, last = span.partition("-")
        start = int(first)
        stop = int(last) if last else start
        stride = int(step) if step else 1
        if stop < start or stride < 1 or start < 0:
            raise ValueError(f"not an array range: {part!r}")
        out.append(range(start, stop + 1, stride))
    return out


def format_ranges(ranges: Sequence[range], throttle: int | None = None) -> str:
    """ "0-15:4,20,30-39", and "%N" after it with a throttle: Slurm's notation."""
    parts = []
    for r in ranges:
        last = r[-1]
        if r.start == last:
            parts.append(str(r.start))
        elif r.step == 1:
            parts.append(f"{r.start}-{last}")
        else:
            parts.append(f"{r.start}-{last}:{r.step}")
    text = ",".join(parts)
    return f"{text}%{throttle}" if throttle is not None else text


def count(ranges: Sequence[range]) -> int:
    """How many indices the ranges hold."""
    return sum(len(r) for r in ranges)


def lowest(ranges: Sequence[range]) -> int:
    """The smallest index (the ranges hold at least one)."""
    return min(r.start for r in ranges)


def holds(ranges: Sequence[range], index: int) -> bool:
    return any(index in r for r in ranges)


def without(ranges: Sequence[range], index: int) -> list[range]:
    """The ranges less `index` (a range holding it is split in two around it)."""
    out: list[range] = []
    for r in ranges:
        if index not in r:
            out.append(r)
            continue
        before = range(r.start, index, r.step)
        after = range(index + r.step, r.stop, r.step)
        out.extend(part for part in (before, after) if len(part))
    return out


def each(ranges: Sequence[range]) -> Iterator[int]:
    """Every index, in increasing order (the ranges are disjoint)."""
    yield from heapq.merge(*ranges)


def expanded(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A job record as `squeue -r` lists it: a pending array's record becomes one
    record per task not yet started (its id ARRAY_TASK, as Slurm shows them); any
    other record is itself."""
    text = record.get("array_task_string")
    if not text or record.get("array_task_id") is not None:
        return [dict(record)]
    array = record.get("array_job_id") or record["job_id"]
    return [
        dict(record, array_task_id=i, array_task_string=None, display_id=f"{array}_{i}")
        for i in each(parse(str(text)))
    ]


__all__ = [
    "compress",
    "count",
    "each",
    "expanded",
    "format_ranges",
    "holds",
    "lowest",
    "normal",
    "parse",
    "stride",
    "without",
]
