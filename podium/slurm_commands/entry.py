"""What every Slurm command shim runs: `main([TOOL, *ARGS])`, loading only what TOOL
needs. The shims run `python3 -c ENTRY TOOL ARGS`, not `-m podium.slurm_commands` (runpy
costs ~9 ms a call). srun (every step) and the relay load only their own modules; the
other tools go through podium.slurm_commands.job_tools, which loads each tool's code when it is
called (sbatch is `podium submit`, down its lean path).
"""

from __future__ import annotations

import os
import sys

ENTRY = "import sys; from podium.slurm_commands.entry import main; sys.exit(main(sys.argv[1:]))"


def main(argv: list[str]) -> int:
    """Run `argv[0]` with the rest of `argv`; its exit status."""
    tool = argv[0] if argv else ""
    if tool == "srun":
        return srun_main(argv[1:])
    if tool == "attach":
        from podium.jobsteps.relay import main as attach

        return attach(argv[1:])
    from podium.slurm_commands.job_tools import (
        main as tools,  # light: sbatch is podium's lean submit
    )

    return tools(argv)


def srun_main(args: list[str]) -> int:
    """srun ARGS: a step inside the job (PODIUM_STEP_DIR set), else an allocation with
    one step, on this terminal (podium.slurm_commands.attach)."""
    from podium.errors import PodiumError
    from podium.jobsteps.srun import StepError, run_step
    from podium.jobsteps.srun_options import parse
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
