"""`scontrol show config`: the settings that clients read, in slurmctld's layout
(`Key                     = value`, one a line, after a "Configuration data as of"
line).

What the values mean on Podium's embedded cluster:
- MinJobAge: Podium keeps every finished job in its database, so `squeue -t all` and
  `sacct` see it for ever; 300 sec (Slurm's default) is reported, a floor clients that
  read it (Snakemake's slurm executor) can rely on.
- KillWait, MaxArraySize: the daemon's kill_wait_s and max_array_size.
- ClusterName: the config's cluster_name; SLURM_VERSION says which Slurm the commands
  follow.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

SLURM_VERSION = "22.05.8"  # whose commands, options and output Podium's follow


def show_config(ping: Mapping[str, Any]) -> str:
    """The text for a daemon that answered `ping`."""
    kill_wait = ping.get("kill_wait_s")
    arrays = ping.get("max_array_size")
    values = [
        ("AccountingStorageType", "accounting_storage/podium"),
        ("ClusterName", ping.get("cluster_name") or "podium"),
        ("JobAcctGatherType", "jobacct_gather/cgroup"),
        ("KillWait", f"{round(kill_wait)} sec" if kill_wait is not None else "30 sec"),
        ("MaxArraySize", str(arrays) if arrays is not None else "1001"),
        ("MinJobAge", "300 sec"),
        ("ProctrackType", "proctrack/cgroup"),
        ("SchedulerType", "sched/backfill"),
        ("SelectType", "select/cons_tres"),
        ("SLURM_VERSION", SLURM_VERSION),
        ("SlurmctldHost[0]", ping.get("node") or "localhost"),
    ]
    when = time.strftime("%Y-%m-%dT%H:%M:%S")
    lines = [f"Configuration data as of {when}"]
    lines += [f"{key:<23} = {value}" for key, value in values]
    return "\n".join(lines)
