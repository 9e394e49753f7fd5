"""dask-jobqueue's SLURMCluster (two workers, logs in log_directory) against Podium's
Slurm commands: run by tests/integration/test_slurm_clients.py; prints one JSON object."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dask.distributed import Client
from dask_jobqueue import SLURMCluster


def main() -> None:
    cluster = SLURMCluster(
        cores=1,
        processes=1,
        memory="1GB",
        walltime="00:05:00",
        queue="main",
        log_directory="dask-logs",
        scheduler_options={"host": "127.0.0.1"},
    )
    cluster.scale(2)
    with Client(cluster) as client:
        client.wait_for_workers(2, timeout=180)
        total = client.submit(sum, range(101)).result()
        workers = len(client.scheduler_info()["workers"])
    script = cluster.job_script()
    cluster.close()
    logs = sorted(p.name for p in Path("dask-logs").iterdir())
    json.dump({"sum": total, "workers": workers, "logs": logs, "script": script}, sys.stdout)


if __name__ == "__main__":
    main()
