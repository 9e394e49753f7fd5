"""Running the scenario and the command lines on one side (a real Slurm, or Podium's
shims), and normalising what they print."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tests.integration.slurm_diff.commands import COMMANDS, SCENARIO
from tests.polling import poll

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden" / "slurm-22.05.jsonl"
WORK = Path("/tmp/podium-slurm-diff-work")  # both sides' jobs run here: the same paths
ENTRY = "import sys; from podium.slurm_commands.entry import main; sys.exit(main(sys.argv[1:]))"

Run = Callable[[Sequence[str]], tuple[int, str]]

_PATTERNS = (
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\b"), "<TIME>"),
    # a time cut to its column (%.12S: "2026-11-27T0"): its hour is the clock's too
    (re.compile(r"\b\d{4}-\d\d-\d\dT[\d:]*"), "<TIME>"),
    (re.compile(r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\b"), "<DATE>"),
    (re.compile(r"(?<![\w:.-])(\d+-)?\d{1,2}:\d\d:\d\d(?![\w:])"), "<DUR>"),
    (re.compile(r"(?<![\w:.-])\d{1,2}:\d\d(?![\w:])"), "<DUR>"),
)


def normalise(text: str, work: str) -> str:
    """`text` with what differs between any two runs made alike: times and dates,
    durations, the side's work directory; trailing spaces kept (they are Slurm's)."""
    text = text.replace(work, "<WORK>")
    for pattern, token in _PATTERNS:
        text = pattern.sub(token, text)
    return text


def filled(words: Sequence[str], ids: Mapping[str, int]) -> list[str]:
    """A command line with `{name}` replaced by that scenario job's id."""
    out = []
    for word in words:
        for name, job_id in ids.items():
            word = word.replace("{" + name + "}", str(job_id))
        out.append(word)
    return out


def shell_runner(env: Mapping[str, str], cwd: Path, podium: bool) -> Run:
    """Run a Slurm command line as that side runs it: the real tool on PATH, or
    Podium's shim (`python -c ENTRY TOOL ARGS`); the exit code and stdout+stderr."""

    def run(words: Sequence[str]) -> tuple[int, str]:
        argv = [sys.executable, "-c", ENTRY, *words] if podium else list(words)
        done = subprocess.run(
            argv, capture_output=True, text=True, env=dict(env), cwd=cwd, timeout=60
        )
        return done.returncode, done.stdout + done.stderr

    return run


def make_scenario(run: Run, state_of: Callable[[int], str]) -> dict[str, int]:
    """Submit the scenario's jobs in order, each waited for; their ids by name."""
    ids: dict[str, int] = {}
    for name, args, state in SCENARIO:
        code, out = run(["sbatch", "--parsable", "-J", name, "-o", "/dev/null", *args])
        if code != 0:
            raise AssertionError(f"sbatch {name}: {out}")
        job_id = int(out.strip().split(";")[0])
        ids[name] = job_id
        poll(lambda job_id=job_id: state_of(job_id), lambda now, want=state: now == want,
             f"job {name} ({job_id}) never {state}", 90)  # fmt: skip
    time.sleep(5)  # slurmdbd has what slurmctld told it: the last start too
    return ids


def run_all(run: Run, ids: Mapping[str, int], work: str) -> list[dict[str, object]]:
    """Every command line's exit code and normalised output."""
    results: list[dict[str, object]] = []
    for words in COMMANDS:
        code, out = run(filled(words, ids))
        results.append({"cmd": " ".join(words), "rc": code, "out": normalise(out, work)})
    return results


def write_golden(results: list[dict[str, object]]) -> None:
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in results))


def read_golden() -> dict[str, dict[str, object]]:
    return {r["cmd"]: r for r in map(json.loads, GOLDEN.read_text().splitlines())}


def slurm_state(env: Mapping[str, str]) -> Callable[[int], str]:
    """A job's state on the real Slurm (squeue while it is known there, else sacct)."""

    def state_of(job_id: int) -> str:
        for argv in (["squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%T"],
                     ["sacct", "-n", "-X", "-P", "-j", str(job_id), "-o", "State"]):  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, env=dict(env))
            words = done.stdout.split()
            if done.returncode == 0 and words:
                return words[0]
        return "UNKNOWN"

    return state_of


__all__ = [
    "GOLDEN",
    "filled",
    "make_scenario",
    "normalise",
    "os",
    "read_golden",
    "run_all",
    "shell_runner",
    "slurm_state",
    "write_golden",
]  # fmt: skip
