"""Job steps inside a running job: `srun` (one step in the job's allocation, its tasks
its own children, run as the job's user), its options, files and containers, and the
relay that runs an interactive allocation's command as its batch step (with the wire
format it shares with `podium.slurm_commands.attach`)."""
