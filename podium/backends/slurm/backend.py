"""The Slurm backend: Podium's Backend protocol served by a Slurm cluster.

`SlurmBackend` fills in the same hooks as the embedded backend, with the same JSON
records, so every `podium` command works unchanged on `backend: slurm`. Jobs are
built and checked by Podium (`podium.jobspec.build`), translated to sbatch
(`translate`), and read back from `squeue --json` / `sinfo --json` or slurmrestd
(`parse`). What has no Slurm meaning is declared in `CANNOT`, with the reason.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from podium import paths
from podium.api import arrays
from podium.api.backend_protocol import Backend, Feature
from podium.api.caller import Caller, this_process
from podium.api.selection import JobFilter, Selection
from podium.backends.admitted import admitted_spec, engine_ping, test_only_answer
from podium.backends.slurm import parse
from podium.backends.slurm import teams as slurm_teams
from podium.backends.slurm.admission import SlurmAdmission
from podium.backends.slurm.elastic_submit import elastic_exports
from podium.backends.slurm.elastic_view import add_elastic, fold_members
from podium.backends.slurm.engine_api import SlurmError, SlurmRest, SlurmTools
from podium.backends.slurm.translate import sbatch_script
from podium.config.cluster import ClusterConfig
from podium.errors import ApiError, ConfigError
from podium.jobspec.job import JobSpec
from podium.run.replace import read_replacements

if TYPE_CHECKING:
    from podium.api.backend_protocol import Action

ACTIVE = ("PENDING", "RUNNING")


def submitter(config: ClusterConfig) -> Caller:
    """The user running this command (with their groups when an allow-list names some)."""
    who = this_process()
    return who.with_groups() if config.names_groups else who


def state_dir(config: ClusterConfig, home: Path) -> str:
    """The shared directory for checkpoints and job state on this cluster."""
    return config.slurm.state_dir or str(home / "slurm")


def build_script(
    config: ClusterConfig, body: dict[str, Any], home: Path
) -> tuple[JobSpec, str, list[str]]:
    """The job a submit request asks for, its sbatch script (what `podium submit
    --dry-run` prints) and the warnings for the user. Raises SpecError/Unsatisfiable
    with the reason."""
    spec, warnings = admitted_spec(body, config, submitter(config), SlurmAdmission())
    python = config.slurm.python or sys.executable
    script = sbatch_script(spec, python, state_dir(config, home), elastic_exports(spec, config))
    return spec, script, warnings


class SlurmBackend(Backend):
    """Podium's API over one Slurm cluster (CLI tools, or slurmrestd for reads)."""

    name = "slurm"
    CANNOT: ClassVar[Mapping[str, str]] = {
        Feature.PRIORITIES: "priorities come from Slurm: use sprio",
        Feature.CHECKPOINT_REPORT: "Slurm does not choose victims by checkpoints: it "
        "preempts by priority and runtime (PreemptType)",
        Feature.PROGRESS_REPORT: "Slurm's squeue --start plans by time limits alone",
        Feature.FAIR_SHARE: "fair share comes from Slurm: use sshare",
        Feature.FORECAST: "Slurm's backfill plans the starts: use squeue --start",
        Feature.HEALTH: "health checks run on the nodes as Slurm's HealthCheckProgram "
        "(podium slurm health-hook); run `podium health --config FILE` on a node",
        Feature.FAULT_INJECTION: "fault injection acts on the embedded cluster's daemon",
        Feature.GPU_RESUME: "Slurm drains whole nodes: resume the node, not one GPU",
        Feature.SHUTDOWN: "slurmctld is stopped by its administrator, not by podium down",
        Feature.BATCH: "sbatch takes one job at a time and cannot take several all or none: "
        "use --array for many alike",
        Feature.MIG_ADVICE: "Slurm's nodes are partitioned by their admins and Podium does not "
        "see their pending GRES demand per node: run podium mig advise on an embedded node",
        Feature.MIG_APPLY: "Slurm expects MIG slices partitioned before slurmd starts: drain "
        "the node, apply the layout (nvidia-mig-parted), restart slurmd, resume the node",
    }

    def __init__(self, config: ClusterConfig, home: Path | None = None) -> None:
        why = slurm_teams.refusal(config)
        if why is not None:  # quotas Slurm would not keep must not look as if they held
            raise ConfigError(why)
        self.config = config
        self.home = home or paths.home()
        self.tools = SlurmTools(config.slurm)
        self.reader: SlurmTools | SlurmRest = (
            SlurmRest(config.slurm) if config.slurm.via == "rest" else self.tools
        )

    def _ping(self) -> dict[str, Any]:
        version = self.tools.run(["sinfo", "--version"]).strip()
        return engine_ping("slurm", self.config.cluster_name, submitter(self.config), slurm=version)

    def _dry_run(self, request: Mapping[str, Any]) -> str:
        return build_script(self.config, dict(request), self.home)[1]

    def _submit(self, request: Mapping[str, Any]) -> list[dict[str, Any]]:
        body = dict(request)
        spec, script, self.warnings = build_script(self.config, body, self.home)
        env = dict(spec.environment)
        if body.get("test_only"):
            self.tools.run(["sbatch", "--test-only"], stdin=script, env=env, cwd=spec.submit_dir)
            return [test_only_answer(spec, "(Slurm's default)", "(default)")]
        out = self.tools.run(["sbatch", "--parsable"], stdin=script, env=env, cwd=spec.submit_dir)
        job_id = int(out.strip().split(";")[0])
        for _ in range(20):  # slurmctld lists a new job at once; allow a short lag
            found = [j for j in self._records() if j["job_id"] == job_id]
            if found:
                return found[:1]
            time.sleep(0.05)
        raise ApiError(f"sbatch accepted job {job_id} but squeue does not list it", 502)

    def _records(self) -> list[dict[str, Any]]:
        """Every job squeue lists, an elastic job's members folded into it."""
        now = time.time()
        return fold_members([parse.job_record(j, now) for j in self.reader.jobs()])

    def _teams(self) -> list[dict[str, Any]]:
        """Each team's quota from the config, its use and what waits from squeue (jobs
        under its account or its member accounts), and `enforced_gpus`: the GrpTRES
        GPU cap on its association now (None when `podium slurm teams --apply` has not
        made it)."""
        from podium.sched.config_policy import team_rules
        from podium.sched.team_ledger import TeamLedger, team_rows

        rules = team_rules(self.config)
        ledger = TeamLedger(rules)
        waiting: dict[str, tuple[int | None, int]] = {t.name: (0, 0) for t in rules.teams}
        for job in self._records():
            team = slurm_teams.team_of_job(self.config, job["account"] or "")
            if team is None:
                continue
            if job["state"] in ("RUNNING", "COMPLETING"):
                ledger.used[team] += int(job["gpus"] or 0)
            elif job["state"] == "PENDING":
                gpus, count = waiting[team]
                waiting[team] = ((gpus or 0) + int(job["gpus"] or 0), count + 1)
        caps = self._gpu_caps()
        rows = team_rows(ledger, waiting)
        for row in rows:
            row["enforced_gpus"] = caps.get(str(row["name"]))
        return rows

    def _gpu_caps(self) -> dict[str, int]:
        """Each account's GrpTRES GPU cap, from its account association."""
        out = self.tools.run(
            ["sacctmgr", "-n", "-P", "show", "assoc", f"cluster={self.config.cluster_name}",
             "format=account,user,grptres"]
        )  # fmt: skip
        caps: dict[str, int] = {}
        for line in out.splitlines():
            account, user, tres = [*line.split("|"), "", "", ""][:3]
            found = re.search(r"gres/gpu=(\d+)", tres)
            if not user and found:
                caps[account] = int(found[1])
        return caps

    def _jobs(self, which: JobFilter) -> list[dict[str, Any]]:
        return which.pick(self._records())

    def _job(self, job_id: int, task: int | None) -> dict[str, Any]:
        def wanted(j: dict[str, Any]) -> bool:
            if task is None:
                return bool(j["job_id"] == job_id)
            if j.get("array_job_id") != job_id:
                return False
            pending = j.get("array_task_string")
            return j.get("array_task_id") == task or (
                pending is not None and arrays.holds(arrays.parse(pending), task)
            )

        found = [j for j in self._records() if wanted(j)]
        if not found:
            found = [j for j in self._accounting() if wanted(j)]
        if not found:
            which = f"{job_id}_{task}" if task is not None else str(job_id)
            raise ApiError(f"no job {which} on the Slurm cluster", 404)
        record = found[0]
        job_id = record["job_id"]
        if not record.get("stdout") and record["state"] != "PENDING":
            fields = self.tools.show_job(job_id)
            for key, field in (("stdout", "StdOut"), ("stderr", "StdErr")):
                raw = _path(fields.get(field))
                record[key] = parse.output_path(raw, record) if raw else None
        home = self._keeper_dir(record)
        record["replacements"] = read_replacements(home) if home else []
        if home is not None:
            add_elastic(record, home)
        return record

    def _keeper_dir(self, record: dict[str, Any]) -> Path | None:
        """The directory a keeper keeps the job's run in (the replica keeper's for
        spare nodes, the elastic keeper's): its user's, in the shared state directory
        (`keeper_parts.job_dir`); None for a user name that cannot be a directory."""
        user = str(record.get("user") or "")
        if not user or "/" in user or user in (".", ".."):
            return None
        run = f"{record['job_id']}.{record.get('restart_count') or 0}"
        return Path(state_dir(self.config, self.home)) / f"user-{user}" / "slurm-jobs" / run

    def _control(self, action: Action, selection: Selection) -> list[int]:
        ids = list(selection.job_ids)
        records = self._records()
        if action == "cancel" and not ids and not selection.tasks:
            which = JobFilter(states=selection.states, user=selection.user, name=selection.name)
            ids = [j["job_id"] for j in which.pick(records)]
        if not ids and not selection.tasks:
            return []
        known = {j["job_id"] for j in records} | {j.get("array_job_id") for j in records}
        missing = [i for i in ids + [a for a, _ in selection.tasks] if i not in known]
        if missing:
            raise ApiError(f"no job {missing[0]} on the Slurm cluster", 404)
        names = [*map(str, ids), *(f"{a}_{i}" for a, i in selection.tasks)]  # Slurm splits
        if action == "cancel":
            self.tools.run(["scancel", *names])
        else:
            self.tools.run(["scontrol", action, ",".join(names)])
        return ids + [a for a, _ in selection.tasks]

    def _send_signal(self, selection: Selection, sig: int, scope: str) -> list[int]:
        names = [*map(str, selection.job_ids), *(f"{a}_{i}" for a, i in selection.tasks)]
        if not names:
            return []
        where = {"steps": [], "batch": ["--batch"], "full": ["--full"]}[scope]
        self.tools.run(["scancel", f"--signal={sig}", *where, *names])
        return list(selection.job_ids) + [a for a, _ in selection.tasks]

    def _set_time_limit(self, job_id: int, seconds: int | None) -> dict[str, Any]:
        limit = "UNLIMITED" if seconds is None else str(max(1, -(-seconds // 60)))  # minutes
        self.tools.run(["scontrol", "update", f"JobId={job_id}", f"TimeLimit={limit}"])
        return self._job(job_id, None)

    def _set_nice(self, job_id: int, nice: int) -> dict[str, Any]:
        self.tools.run(["scontrol", "update", f"JobId={job_id}", f"Nice={nice}"])
        return self._job(job_id, None)

    def _accounting(self) -> list[dict[str, Any]]:
        """Ended jobs: sacct --json where slurmdbd runs, else the jobcomp text log."""
        try:
            data = self.tools.json(["sacct", "--json", "--allusers"])
            now = time.time()
            return [_sacct_record(j, now) for j in data.get("jobs") or []]
        except SlurmError:
            pass
        location = self.tools.config_value("JobCompLoc")
        if not location or not os.path.isfile(location):
            return []
        with open(location, errors="replace") as fh:
            records = [parse.jobcomp_record(line) for line in fh]
        return [r for r in records if r is not None]

    def _acct(self, which: JobFilter) -> list[dict[str, Any]]:
        ended = {j["job_id"]: j for j in self._accounting()}
        for job in self._records():
            if job["state"] != "PENDING":
                ended.setdefault(job["job_id"], job)
        jobs = which.replace(finished=True).pick(list(ended.values()))
        return which.within(jobs, time.time())

    def _nodes(self) -> list[dict[str, Any]]:
        jobs = self._records()
        return [parse.node_record(n, jobs) for n in self.reader.nodes()]

    def _known_node(self, node: str) -> None:
        known = {n["node"] for n in self._nodes()}
        if node not in known:
            raise ApiError(f"no node {node!r}; nodes: {', '.join(sorted(known))}", 404)

    def _drain(self, node: str, reason: str) -> dict[str, Any]:
        self._known_node(node)
        self.tools.run(
            ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"]
        )
        return self._node(node)

    def _resume(self, node: str, gpu: int | None) -> dict[str, Any]:
        self._known_node(node)
        self.tools.run(["scontrol", "update", f"nodename={node}", "state=resume"])
        return self._node(node)

    def _node(self, node: str) -> dict[str, Any]:
        return next(n for n in self._nodes() if n["node"] == node)


def _path(value: str | None) -> str | None:
    return value if value and value not in ("(null)", "/dev/null") else None


def _sacct_record(job: dict[str, Any], now: float) -> dict[str, Any]:
    """A `sacct --json` job (slurmdbd) as a job record: its own field names, mapped."""
    times = job.get("time") or {}
    state = job.get("state") or {}
    return parse.job_record(
        {
            "job_id": job.get("job_id"),
            "name": job.get("name"),
            "user_name": job.get("user"),
            "account": job.get("account"),
            "partition": job.get("partition"),
            "qos": job.get("qos"),
            "job_state": state.get("current") if isinstance(state, dict) else state,
            "state_reason": state.get("reason") if isinstance(state, dict) else None,
            "nodes": job.get("nodes"),
            "submit_time": times.get("submission"),
            "start_time": times.get("start"),
            "end_time": times.get("end"),
            "exit_code": job.get("exit_code"),
            "restart_cnt": (job.get("required") or {}).get("restarts"),
            "current_working_directory": job.get("working_directory"),
            "wckey": job.get("wckey"),
            "comment": (job.get("comment") or {}).get("job")
            if isinstance(job.get("comment"), dict)
            else job.get("comment"),
        },
        now,
    )
