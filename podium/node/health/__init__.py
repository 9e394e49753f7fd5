"""Health checks: small plugins, each with a signal, a threshold, a severity and an action.

Every check returns Results in Nagios style (ok, warning, critical, unknown) with a
one-line reason and, for critical ones, the action the recovery ladder should take
(drain, reset, reboot, replace). Checks that need a GPU return unknown with the reason
on machines without one. Inputs reach them through seams (NVML, a kernel-log file,
recorded tool output), so every check is tested with real recorded input.
"""

from podium.node.health.check_results import Action, Check, Result, Status, run_checks

__all__ = ["Action", "Check", "Result", "Status", "run_checks"]
