"""Slurm's commands over Podium (`sbatch`, `squeue`, `sacct`, `sinfo`, `scontrol`,
`scancel`, `salloc`, and `srun` outside a job): the shims in `bin/`, which the daemon
puts first on every job's PATH (so a batch script written for Slurm finds them, and
not a host's real Slurm) and `podium slurm-commands install` puts wherever a user
wants them. Standard library only on the way to the daemon. srun inside a job is
`podium.jobsteps`."""
