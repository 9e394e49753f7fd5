from __future__ import annotations

from podium.run.patterns import expand


def test_patterns() -> None:
    kw = dict(job_id=42, name="train", user="amy", node="n0")
    assert expand("%x-%j.out", **kw) == "train-42.out"  # type: ignore[arg-type]
    assert expand("%u/%N/%n/%%j", **kw) == "amy/n0/0/%j"  # type: ignore[arg-type]
    assert expand("%A_%a.out", **kw) == "42_4294967294.out"  # type: ignore[arg-type]
    assert expand("%A_%4a.out", array_job_id=40, array_task_id=7, **kw) == "40_0007.out"  # type: ignore[arg-type]
    assert expand("t%t.out", **kw) == "t%t.out"  # type: ignore[arg-type]
    assert expand("t%t.out", task_id=3, **kw) == "t3.out"  # type: ignore[arg-type]
    # issue 27, item 5: sbatch's %J (jobid.stepid: the job id alone for the batch
    # script's output) and %s (the step: batch), as dask-jobqueue's -o uses
    assert expand("dask-worker-%J.out", **kw) == "dask-worker-42.out"  # type: ignore[arg-type]
    assert expand("%j.%s", **kw) == "42.batch"  # type: ignore[arg-type]
