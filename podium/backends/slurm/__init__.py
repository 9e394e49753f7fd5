"""The Slurm backend: Podium's job spec, CLI and resiliency on a real Slurm cluster."""
