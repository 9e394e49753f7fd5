"""What an elastic run of examples/train.py must show, on any backend: the loss of
every step equals the loss of the same training at one fixed size (within 1e-3), and
each step trained on exactly its global batch, no sample twice in an epoch, across
every resize (DCP resharding, the sampler's place in the checkpoint)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def reference_losses(path: Path) -> dict[int, float]:
    """Step -> loss of a fixed-size run's progress file."""
    events = map(json.loads, path.read_text().splitlines())
    return {e["step"]: e["loss"] for e in events if e["event"] == "step"}


def check_elastic_training(
    progress: Path, samples: Path, reference: Path, steps: int, batch: int, epoch_steps: int
) -> list[int]:
    """Assert the two properties (`batch` samples a step, `epoch_steps` steps an
    epoch); the world sizes the runs began or resumed at."""
    events = [json.loads(x) for x in progress.read_text().splitlines()]
    worlds = [e["world"] for e in events if e["event"] in ("begin", "resume")]
    expected = reference_losses(reference)
    got = {e["step"]: e["loss"] for e in events if e["event"] == "step"}  # the last run's
    assert sorted(got) == list(range(1, steps + 1))
    assert max(abs(got[s] - expected[s]) for s in got) < 1e-3
    kept: dict[int, list[dict[str, Any]]] = {}
    for e in map(json.loads, samples.read_text().splitlines()):
        if e["step"] in kept and e["run"] > kept[e["step"]][0]["run"]:
            del kept[e["step"]]  # a step done again after a restart: the later one counts
        kept.setdefault(e["step"], []).append(e)
    by_epoch: dict[int, list[int]] = {}
    for step, entries in sorted(kept.items()):
        taken = [i for e in entries for i in e["samples"]]
        assert len(taken) == len(set(taken)) == batch, (step, entries)
        by_epoch.setdefault(entries[0]["epoch"], []).extend(taken)
    assert all(len(s) == len(set(s)) for s in by_epoch.values())
    assert len(by_epoch) == -(-steps // epoch_steps)
    return worlds
