"""What every backend answers alike on its live engine (docs/architecture.md, "Adding a
backend"): `--test-only` says what the job would ask for and queues nothing; bad input
is one line naming the option, exit 2, nothing queued, no traceback; an unknown job is
one line too. Each engine's module runs `check_backend` against its real engine (the
embedded daemon, Slurm, Kubernetes with Kueue); tests/unit/test_layers.py's
`test_every_backend_meets_the_conformance_check_live` checks that none is missing."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

Run = Callable[..., subprocess.CompletedProcess[str]]  # `podium ARGS` on the engine

# Where each backend of podium.backends.BACKENDS meets the check on its live engine.
LIVE = {
    "embedded": "tests/integration/test_bad_input.py",
    "slurm": "tests/integration/test_slurm.py",
    "kubernetes": "tests/integration/test_k8s_backend.py",
}

BAD_INPUT = [
    (["--gpus=abc"], "--gpus"),
    (["-t", "forever"], "--time"),
    (["--mem=lots"], "--mem"),
    (["--nodes=0"], "--nodes"),
    (["--dependency=afterok:x"], "--dependency"),
    (["--signal=NOPE@60"], "--signal"),
]


def check_backend(podium: Run) -> None:
    """Run the checks with `podium` (a job's options, then `--wrap true`, are added)."""
    before = _queued(podium)
    answer = podium("submit", "--test-only", "--json", "--gpus=1", "-t", "10", "--wrap", "true")
    assert answer.returncode == 0, answer.stderr
    would = json.loads(answer.stdout)
    assert would["state"] == "WOULD_QUEUE" and would["job_id"] is None, would
    assert would["gpus"] == 1 and would["time_limit_s"] == 600, would
    said = podium("submit", "--test-only", "--gpus=1", "--wrap", "true")
    assert said.returncode == 0 and len(said.stdout.strip().splitlines()) == 1, said.stdout
    assert "would be queued" in said.stdout, said.stdout
    for options, named in BAD_INPUT:
        refused = podium("submit", *options, "--wrap", "true")
        err = refused.stderr.strip()
        assert refused.returncode == 2, (options, refused.returncode, refused.stdout, err)
        assert err.startswith("podium: ") and "\n" not in err and named in err, (options, err)
        assert "Traceback" not in refused.stderr + refused.stdout
    unknown = podium("show", "999999")
    assert unknown.returncode != 0 and len(unknown.stderr.strip().splitlines()) == 1
    assert "Traceback" not in unknown.stderr
    assert _queued(podium) == before


def _queued(podium: Run) -> list[int]:
    listed = podium("queue", "--json")
    assert listed.returncode == 0, listed.stderr
    return sorted(j["job_id"] for j in json.loads(listed.stdout))
