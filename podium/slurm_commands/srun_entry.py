"""srun, as the shims run it: a step inside a job, else an allocation with one step.
Its own module, so that entry (every shim) and job_tools (salloc's srun) both reach it
without importing each other. Loads only what srun needs, when it runs."""

from __future__ import annotations

import os
import sys


def srun_main(args: list[str]) -> int:
    """srun ARGS: a step inside the job (PODIUM_STEP_DIR set), else an allocation with
    one step, on this terminal (podium.slurm_commands.attach)."""
    from podium.errors import PodiumError
    from podium.jobsteps.srun import run_step
    from podium.jobsteps.srun_options import parse
    from podium.jobsteps.step_shape import StepError
    from podium.run.steps import STEP_DIR_ENV

    try:
        opts = parse(args)
        if STEP_DIR_ENV not in os.environ or "SLURM_JOB_ID" not in os.environ:
            from podium.slurm_commands.attach import allocate_and_run

            return allocate_and_run("srun", args)
        if opts.pty and not os.isatty(0):
            raise ValueError("--pty needs a terminal on srun's input (there is none here)")
        return run_step(opts, dict(os.environ))
    except (ValueError, StepError) as exc:
        job = os.environ.get("SLURM_JOB_ID", "")
        where = f"Unable to create step for job {job}: " if isinstance(exc, StepError) else ""
        print(f"srun: error: {where}{exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"srun: error: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return 1
    except PodiumError as exc:  # from the daemon, for an allocation
        print(f"srun: error: {exc}", file=sys.stderr)
        return 1


__all__ = ["srun_main"]
