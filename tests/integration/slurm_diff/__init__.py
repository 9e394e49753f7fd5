"""Slurm's commands on a real Slurm and on Podium's shims, side by side (issue 45).

The same scenario is made on both sides (`SCENARIO`: the same jobs, submitted in the
same order by the same user, so they get the same ids), then every command line of
`commands.COMMANDS` runs on both; the outputs are compared once normalised for what
may differ between any two runs (times, durations, paths: `normalise`).

    python -m tests.integration.slurm_diff      # regenerate golden/slurm-22.05.txt

runs the real Slurm test cluster (one node, testbed.yaml) and writes its outputs to
the golden file, which the test compares Podium's with; never edit it by hand.
"""
