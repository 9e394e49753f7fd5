"""--dry-run is the first half of a real start: the same grant and plan."""

from __future__ import annotations

from podium.server.dry_run import SCRIPT_PLACEHOLDER, dry_run_record
from podium.server.starting import StartingJob
from tests.unit.server.harness import ME, Cluster


def test_a_dry_run_plans_as_the_real_start_does(c: Cluster) -> None:
    from podium.jobspec.build import SubmitRequest

    req = SubmitRequest(wrap="true", options=["--gpus=2", "-c", "3"], cwd=str(c.work))
    who = ME._replace(cwd=str(c.work))
    spec = c.intake.check(req, who, 100.0).spec
    dry = dry_run_record(spec, who, c.planner)["launch_plan"]

    job = c.submit("--gpus=2", "-c", "3")
    c.reactor.tick()
    ((_, units),) = c.effects.launched
    grant = c.node.grant_of(tuple(units), 3, spec.mem_mb)
    real = c.planner.plan(
        StartingJob.of_row(c.store.job(job)), spec, grant, SCRIPT_PLACEHOLDER, make_dirs=False
    ).to_json()
    real["environment"] = sorted(real["environment"])
    differ = {k for k in real if real[k] != dry[k]}
    assert differ <= {"job_id", "checkpoint_dir"}, differ  # what only the stored job knows
    assert (dry["gpu_ids"], dry["cpus"], dry["argv"][0]) == ([0, 1], 3, "SCRIPT")
