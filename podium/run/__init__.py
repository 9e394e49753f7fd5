"""The local executor: one supervisor process per job, detached from the daemon.

The daemon writes a LaunchPlan and starts `podium.run.supervisor` (its `main`); the
supervisor owns the job's processes, enforces its time limit, and writes the outcome
to a result file. The daemon never waits on it: it reads the file, even after its own
restart. This package imports only the standard library and psutil, so a supervisor
starts fast.
"""
