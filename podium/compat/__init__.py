"""Slurm's commands inside jobs on the embedded cluster (`scontrol`, `sbatch`,
`scancel`), talking to the job's own Podium cluster. The daemon puts `bin/` first on
every job's PATH, so a batch script written for Slurm finds them (and not a host's
real Slurm). Standard library only on the way to the daemon."""
