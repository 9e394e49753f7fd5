"""docs/slurm-compat.md stays true: it names every sbatch option Podium knows or refuses
(and no other), and every SLURM_* variable a job gets."""

from __future__ import annotations

import re
from pathlib import Path

from podium.api import containers
from podium.jobspec.options import OPTIONS

DOC = Path(__file__).resolve().parents[3] / "docs" / "slurm-compat.md"


def _section(title: str, text: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_every_option_is_listed_and_nothing_else() -> None:
    options = _section("sbatch options", DOC.read_text())
    named = set(re.findall(r"`--([a-z][a-z0-9-]*[a-z0-9])", options))
    known = set(OPTIONS)
    assert known - named == set(), "missing from docs/slurm-compat.md"
    assert named - known == set(), "in docs/slurm-compat.md but not in podium.jobspec.options"


def test_every_variable_a_job_gets_is_listed() -> None:
    from tests.unit.server.test_slurm_env import plan_environment

    listed = set(re.findall(r"`(SLURMD?_[A-Z_]+)`", _section("SLURM_* variables", DOC.read_text())))
    given = {k for k in plan_environment() if k.startswith("SLURM")}
    assert given - listed == set(), "set in jobs but not in docs/slurm-compat.md"


def test_every_srun_option_is_listed_and_nothing_else() -> None:
    from podium.jobsteps import srun_options as so

    section = _section("srun inside a job", DOC.read_text())
    named = set(re.findall(r"`(--[a-z][a-z0-9_-]*[a-z0-9])", section))
    named |= {f"-{c}" for c in re.findall(r"`-([a-zA-Z])`", section)}
    known = set(so.VALUED) | set(so.FLAGS) | set(so.ACCEPTED) | set(so.ACCEPTED_FLAGS)
    known |= set(so.REFUSED) | set(so.SHORT_VALUED) | set(so.SHORT_FLAGS)
    known |= {f"--{o}" for o in (*containers.VALUED, *containers.SWITCHES)}
    known -= {"--"}
    assert known - named == set(), "srun options missing from docs/slurm-compat.md"
    assert named - known == set(), "in the srun section but not in podium.jobsteps.srun_options"


def test_every_step_variable_srun_sets_is_listed() -> None:
    from podium.jobsteps.srun_options import parse
    from podium.jobsteps.step_shape import Allocation, Step, task_env

    env = {"SLURM_JOB_ID": "1", "SLURM_NTASKS": "2", "SLURM_JOB_GPUS": "0,1"}
    alloc = Allocation(env)
    step_env = task_env(env, alloc, Step(parse(["true"]), alloc), 0, 1, 1234)
    listed = set(re.findall(r"`(SLURM_[A-Z_]+)`", _section("SLURM_* variables", DOC.read_text())))
    given = {k for k in step_env if k.startswith("SLURM")}
    assert given - listed == set(), "set in steps but not in docs/slurm-compat.md"
