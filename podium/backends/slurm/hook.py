"""Podium's health checks as Slurm's HealthCheckProgram, Prolog and Epilog.

`python -m podium.backends.slurm.hook health|prolog|epilog`, run by slurmd on node
$SLURMD_NODENAME with PODIUM_CONFIG naming the cluster's Podium config.

- Every hook runs the node's quick checks. A critical result whose action is drain,
  reset, reboot or replace drains the node with a reason starting `podium:`, and
  requeues the jobs running there that asked for auto-resume (`--auto-resume=N`),
  with the node added to their excluded nodes.
- `health` also looks after nodes Podium drained: once the fault's remedy is done (a
  GPU reset command run; for a reboot, a new boot id), it runs the deep checks and
  resumes the node when they pass, or says why in the reason when they fail. Nodes
  drained by anyone else (a reason not starting `podium:`) are never touched.
- `prolog` exits 1 on a failing check, so Slurm does not start the job there (Slurm
  drains the node and requeues the job held, by its own rules).

Per-node state (the fault and boot id, the Xid log offset) lives under
STATE_DIR/nodes/NODE; results are appended to STATE_DIR/nodes/health.jsonl. The hook
runs as root in a state directory every user may write in (1777), so it keeps its own
files only in STATE_DIR/nodes, a directory it checks is its own (one a user made first
is moved aside), and writes into a user's directory only through `write_as_owner`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from podium.api.hostlist import hostlist
from podium.backends.slurm import parse
from podium.backends.slurm.engine_api import SlurmError, SlurmTools
from podium.backends.slurm.keeper_parts import numbered_steps
from podium.config.cluster import ClusterConfig, load_config
from podium.node.health.check_results import Action, Result, Status
from podium.node.health.suite import run_node_checks
from podium.recover.ladder import PREFIX, fence_reason, fencing_faults
from podium.recover.saved_fault import SavedFault
from podium.run.owned_dirs import new_file_at, open_owned, owned_dir, reclaimed_dir


def _config(node: str) -> ClusterConfig:
    path = os.environ.get("PODIUM_CONFIG")
    if not path:
        raise SystemExit("podium hook: PODIUM_CONFIG is not set (the rendered hook sets it)")
    config = load_config(Path(path))
    return config.model_copy(update={"health": config.health.for_node(node)})


def state_dir(config: ClusterConfig) -> Path:
    """STATE_DIR: the cluster's shared directory of Podium's state (the hook's in
    STATE_DIR/nodes, the users' in STATE_DIR/user-NAME)."""
    return Path(config.slurm.state_dir or "/var/lib/podium")


def node_state_dir(config: ClusterConfig, node: str) -> Path:
    """Node `node`'s directory of health state: STATE_DIR/nodes/NODE (also where its
    declared GPUs stand: podium.node.inventory.declared_bus_id)."""
    return state_dir(config) / "nodes" / node


def health_log(config: ClusterConfig) -> Path:
    """Where the hooks append their results: STATE_DIR/nodes/health.jsonl."""
    return state_dir(config) / "nodes" / "health.jsonl"


def hook_home(config: ClusterConfig, node: str) -> Path:
    """node_state_dir, made the hook's own: STATE_DIR/nodes is the hook's (root's)
    directory, not writable by others; one a user made first in the shared state
    directory is moved aside (`reclaimed_dir`), never written in; NODE in it is made
    and checked the same way. Raises OSError (Squatted) when that cannot be done."""
    nodes = reclaimed_dir(state_dir(config), "nodes", mode=0o755)
    return owned_dir(nodes, (node,), mode=0o755)


class NodeHook:
    """One node's hook run: its checks, its Slurm state and its saved fault."""

    def __init__(self, node: str, config: ClusterConfig) -> None:
        self.node = node
        self.config = config
        self.tools = SlurmTools(config.slurm)
        self.home = hook_home(config, node)
        self.log = health_log(config)
        self.fault = SavedFault(self.home / "fault.json")

    def checks(self, deep: bool) -> list[Result]:
        return run_node_checks(self.config, self.home, self.node, self.log, deep)

    def slurm_state(self) -> tuple[str, str]:
        """(state, reason) as sinfo prints them: ("drained", "podium: ...")."""
        out = self.tools.run(["sinfo", "-h", "-N", "-n", self.node, "-o", "%T|%E"])
        first = out.splitlines()[0] if out.strip() else "unknown|"
        state, _, reason = first.partition("|")
        return state.strip().lower(), reason.strip()

    def drain(self, reason: str) -> None:
        self.tools.run(
            ["scontrol", "update", f"nodename={self.node}", "state=drain", f"reason={reason}"]
        )

    def requeue_auto_resume_jobs(self, reason: str = PREFIX) -> list[int]:
        """Requeue this node's running auto-resume jobs, excluding the node; their ids.
        A job with spare nodes is not requeued: its keeper replaces what ran here."""
        now = time.time()
        done = []
        for raw in self.tools.jobs():
            job = parse.job_record(raw, now)
            if job["state"] != "RUNNING" or self.node not in job["nodes"]:
                continue
            script = batch_script(self.tools, job["job_id"])
            if exported(script, "PODIUM_SPARE_NODES") > 0:
                self.hand_to_keeper(job, reason)
                continue
            if exported(script, "PODIUM_AUTO_RESUME") <= 0:
                continue
            try:
                self.tools.run(["scontrol", "requeue", str(job["job_id"])])
            except SlurmError as exc:
                print(f"podium hook: requeue {job['job_id']}: {exc}", file=sys.stderr)
                continue
            excluded = sorted(set(job["excluded_nodes"]) | {self.node})
            self.tools.run(
                [
                    "scontrol",
                    "update",
                    f"jobid={job['job_id']}",
                    f"ExcNodeList={','.join(excluded)}",
                ]
            )
            done.append(job["job_id"])
        return done

    def hand_to_keeper(self, job: dict[str, Any], reason: str) -> None:
        """A job with spare nodes (`podium.backends.slurm.replica_keeper`): tell its
        keeper why this node was fenced (fault-NODE.json in the job's directory), then
        end the job's steps here; the keeper gives their rank to a spare node and the
        job goes on. The directory is its user's, so it is walked as such: from the
        cluster's state directory (the config's, never one the job names), no link
        followed, each part owned by the job's user, and the file made theirs."""
        order = {"node": self.node, "reason": reason, "time": time.time()}
        uid, user = job.get("uid"), str(job["user"])
        base = self.config.slurm.state_dir
        if base and isinstance(uid, int) and user and "/" not in user and user not in (".", ".."):
            run = f"{job['job_id']}.{job['restart_count']}"
            parts = (f"user-{user}", "slurm-jobs", run)
            with contextlib.suppress(OSError):
                write_as_owner(Path(base), parts, f"fault-{self.node}.json", uid, order)
        for step_id, node in steps_of(self.tools, job["job_id"]):
            if self.node in hostlist(node):
                with contextlib.suppress(SlurmError):
                    self.tools.run(["scancel", "--signal=KILL", f"{job['job_id']}.{step_id}"])

    def on_fault(self, bad: list[Result]) -> None:
        state, reason = self.slurm_state()
        if not reason.startswith(PREFIX) and ("drain" not in state or not reason):
            self.drain(fence_reason(bad))
        self.fault.record("reboot" if any(r.action is Action.REBOOT for r in bad) else "reset", bad)
        self.requeue_auto_resume_jobs(fence_reason(bad))

    def recover(self) -> None:
        """Bring back a node Podium drained, once its remedy is done and a deep check passes."""
        state, reason = self.slurm_state()
        if "drain" not in state or not reason.startswith(PREFIX):
            return
        if not self.fault.remedy_done(self.config.health):
            return  # waiting for the reboot (reboot_command or an operator)
        results = self.checks(deep=True)
        failed = [r for r in results if r.status is Status.CRITICAL]
        if failed:
            self.drain(f"{PREFIX} deep check failed: {failed[0].check}: {failed[0].reason}"[:200])
            return
        self.tools.run(["scontrol", "update", f"nodename={self.node}", "state=resume"])
        self.fault.clear()


def write_as_owner(base: Path, parts: tuple[str, ...], name: str, uid: int, data: Any) -> None:
    """Write `data` (JSON) as file `name` in base/parts..., where every part is the
    job's user's (`open_owned`: walked by descriptors, no link followed, owned by
    `uid`, not writable by others; nothing made). The file is made new and theirs
    (0644) by `new_file_at`: whatever the user left at `name` (a FIFO, a hard link to
    another file, a link) is replaced, never opened. OSError (Squatted, a
    PermissionError) when a part is missing, a link or someone else's, or `name` is a
    directory."""
    fd = open_owned(base, parts, uid)
    try:
        new_file_at(fd, name, json.dumps(data).encode(), 0o644, uid)
    finally:
        os.close(fd)


def steps_of(tools: SlurmTools, job_id: int) -> list[tuple[str, str]]:
    """(step id, its nodes) of the job's numbered steps running now."""
    try:
        return numbered_steps(tools.run(["squeue", "-h", "-s", "-j", str(job_id), "-o", "%i|%N"]))
    except SlurmError:
        return []


def batch_script(tools: SlurmTools, job_id: int) -> str:
    """The job's batch script ("" when Slurm does not give it)."""
    try:
        return tools.run(["scontrol", "write", "batch_script", str(job_id), "-"])
    except SlurmError:
        return ""


def exported(script: str, name: str) -> int:
    """A number the generated script exports (PODIUM_AUTO_RESUME, ...; 0 if none)."""
    match = re.search(rf"^export {name}=(\d+)$", script, re.M)
    return int(match.group(1)) if match else 0


def auto_resume_of(tools: SlurmTools, job_id: int) -> int:
    """The job's --auto-resume limit, read from its batch script (0 if none)."""
    return exported(batch_script(tools, job_id), "PODIUM_AUTO_RESUME")


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("health", "prolog", "epilog"):
        print("usage: python -m podium.backends.slurm.hook health|prolog|epilog", file=sys.stderr)
        return 2
    node = os.environ.get("SLURMD_NODENAME")
    if not node:
        print("podium hook: SLURMD_NODENAME is not set (slurmd sets it)", file=sys.stderr)
        return 2
    hook = NodeHook(node, _config(node))
    bad = fencing_faults(hook.checks(deep=False))
    if bad:
        hook.on_fault(bad)
        return 1 if argv[0] == "prolog" else 0
    if argv[0] == "health":
        hook.recover()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
