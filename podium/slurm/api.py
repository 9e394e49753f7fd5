"""The Slurm backend behind the CLI: Podium's API routes served from a Slurm cluster.

`SlurmApi` answers the same requests as the daemon's client (`podium.cli.client`),
with the same JSON, so every `podium` command works unchanged on `backend: slurm`.
Jobs are built and checked by Podium (`podium.spec.build`), translated to sbatch
(`translate`), and read back from `squeue --json` / `sinfo --json` or slurmrestd
(`parse`). Routes that have no Slurm meaning answer with a one-line reason.
"""

from __future__ import annotations

import os
import pwd
import re
import sys
import time
from pathlib import Path
from typing import Any

from podium import __version__, paths
from podium.errors import ApiError, PodiumError
from podium.slurm import parse
from podium.slurm.tools import SlurmError, SlurmRest, SlurmTools
from podium.slurm.translate import sbatch_script
from podium.spec.build import SubmitRequest, Submitter, build_job
from podium.spec.cluster import ClusterConfig
from podium.spec.job import JobSpec

ACTIVE = ("PENDING", "RUNNING")


def submitter() -> Submitter:
    """The user running this command."""
    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = str(uid)
    return Submitter(uid=uid, gid=os.getgid(), name=name, is_admin=uid == 0)


def state_dir(config: ClusterConfig, home: Path) -> str:
    """The shared directory for checkpoints and job state on this cluster."""
    return config.slurm.state_dir or str(home / "slurm")


def build_script(config: ClusterConfig, body: dict[str, Any], home: Path) -> tuple[JobSpec, str]:
    """The job a submit request asks for, and its sbatch script (what `podium submit
    --dry-run` prints). Raises SpecError/Unsatisfiable with the reason."""
    config = config.model_copy(update={"backend": "slurm"})
    spec = build_job(SubmitRequest(**body), config, submitter(), time.time()).spec
    python = config.slurm.python or sys.executable
    return spec, sbatch_script(spec, python, state_dir(config, home))


class SlurmApi:
    """Podium's API over one Slurm cluster (CLI tools, or slurmrestd for reads)."""

    def __init__(self, config: ClusterConfig, home: Path | None = None) -> None:
        self.config = config
        self.home = home or paths.home()
        self.tools = SlurmTools(config.slurm)
        self.reader: SlurmTools | SlurmRest = (
            SlurmRest(config.slurm) if config.slurm.via == "rest" else self.tools
        )

    # The client's interface -----------------------------------------------------------

    def request(
        self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None
    ) -> Any:
        """Answer one API request; raise ApiError (bad input, 400/404/501) or SlurmError."""
        query = {k: v for k, v in (query or {}).items() if v is not None}
        body = body or {}
        try:
            return self._route(method, path, body, query)
        except SlurmError as exc:
            raise ApiError(str(exc), 400 if exc.exit_code == 2 else 502) from None
        except ApiError:
            raise
        except PodiumError as exc:
            raise ApiError(str(exc), 400) from None

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body=body if body is not None else {})

    def close(self) -> None:
        pass

    # Routes ---------------------------------------------------------------------------

    def _route(self, method: str, path: str, body: Any, query: dict[str, Any]) -> Any:
        if (method, path) == ("GET", "/v1/ping"):
            return self._ping()
        if (method, path) == ("POST", "/v1/jobs"):
            return {"jobs": self.submit(body)}
        if (method, path) == ("GET", "/v1/jobs"):
            return {"jobs": self.list_jobs(query)}
        if method == "GET" and (m := re.fullmatch(r"/v1/jobs/(\d+)", path)):
            return self.show(int(m.group(1)))
        if method == "POST" and path in ("/v1/jobs/cancel", "/v1/jobs/hold", "/v1/jobs/release"):
            return self._change(path.rsplit("/", 1)[1], body)
        if (method, path) == ("GET", "/v1/acct"):
            return {"jobs": self.acct(query)}
        if (method, path) == ("GET", "/v1/nodes"):
            return {"nodes": self.nodes()}
        if method == "POST" and (m := re.fullmatch(r"/v1/nodes/([^/]+)/(drain|resume)", path)):
            return self._node_change(m.group(1), m.group(2), body)
        what = {
            "/v1/priority": "priorities come from Slurm: use sprio",
            "/v1/share": "fair share comes from Slurm: use sshare",
            "/v1/health": "health checks run on the nodes as Slurm's HealthCheckProgram "
            "(podium slurm health-hook); run `podium health --config FILE` on a node",
            "/v1/inject": "fault injection acts on the embedded cluster's daemon",
        }.get(path)
        raise ApiError(
            f"{what or f'{method} {path} has no meaning'} on the Slurm backend",
            501 if what else 404,
        )

    def _ping(self) -> dict[str, Any]:
        version = self.tools.run(["sinfo", "--version"]).strip()
        who = submitter()
        return {
            "version": __version__,
            "pid": None,
            "node": self.config.cluster_name,
            "you": who.name,
            "admin": who.is_admin,
            "backend": "slurm",
            "slurm": version,
        }

    def submit(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        spec, script = build_script(self.config, body, self.home)
        env = dict(spec.environment)
        if body.get("test_only"):
            self.tools.run(["sbatch", "--test-only"], stdin=script, env=env, cwd=spec.submit_dir)
            return [self._would_be(spec.model_dump())]
        out = self.tools.run(["sbatch", "--parsable"], stdin=script, env=env, cwd=spec.submit_dir)
        job_id = int(out.strip().split(";")[0])
        for _ in range(20):  # slurmctld lists a new job at once; allow a short lag
            found = [j for j in self._records() if j["job_id"] == job_id]
            if found:
                return found[:1]
            time.sleep(0.05)
        raise ApiError(f"sbatch accepted job {job_id} but squeue does not list it", 502)

    def _would_be(self, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "job_id": None,
            "array_job_id": None,
            "gpus": spec["gpus"],
            "cpus": spec["cpus"],
            "mem_mb": spec["mem_mb"],
            "partition": spec["partition"] or "(Slurm's default)",
            "qos": spec["qos"] or "(default)",
        }

    def _records(self) -> list[dict[str, Any]]:
        now = time.time()
        return [parse.job_record(j, now) for j in self.reader.jobs()]

    def list_jobs(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        return _select(self._records(), query)

    def show(self, job_id: int) -> dict[str, Any]:
        found = [j for j in self._records() if j["job_id"] == job_id]
        if not found:
            found = [j for j in self._accounting() if j["job_id"] == job_id]
        if not found:
            raise ApiError(f"no job {job_id} on the Slurm cluster", 404)
        record = found[0]
        if not record.get("stdout") and record["state"] != "PENDING":
            fields = self.tools.show_job(job_id)
            for key, field in (("stdout", "StdOut"), ("stderr", "StdErr")):
                raw = _path(fields.get(field))
                record[key] = parse.output_path(raw, record) if raw else None
        return record

    def _change(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        ids = [int(i) for i in body.get("job_ids") or []]
        records = self._records()
        if action == "cancel" and not ids:
            query = {
                "state": ",".join(body.get("states") or []),
                "user": body.get("user"),
                "name": body.get("name"),
            }
            ids = [j["job_id"] for j in _select(records, query)]
        if not ids:
            return {{"cancel": "cancelled", "hold": "held", "release": "released"}[action]: []}
        known = {j["job_id"] for j in records}
        missing = [i for i in ids if i not in known]
        if missing:
            raise ApiError(f"no job {missing[0]} on the Slurm cluster", 404)
        if action == "cancel":
            self.tools.run(["scancel", *map(str, ids)])
            return {"cancelled": ids}
        self.tools.run(["scontrol", action, ",".join(map(str, ids))])
        return {"held" if action == "hold" else "released": ids}

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

    def acct(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        ended = {j["job_id"]: j for j in self._accounting()}
        for job in self._records():
            if job["state"] != "PENDING":
                ended.setdefault(job["job_id"], job)
        jobs = _select(list(ended.values()), {**query, "all": "true"})
        since, until = query.get("since"), query.get("until")
        if since is not None:
            jobs = [j for j in jobs if (j.get("end_epoch") or time.time()) >= float(since)]
        if until is not None:
            jobs = [j for j in jobs if (j.get("start_epoch") or 0) <= float(until)]
        return jobs

    def nodes(self) -> list[dict[str, Any]]:
        jobs = self._records()
        return [parse.node_record(n, jobs) for n in self.reader.nodes()]

    def _node_change(self, node: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
        known = {n["node"]: n for n in self.nodes()}
        if node not in known:
            raise ApiError(f"no node {node!r}; nodes: {', '.join(sorted(known))}", 404)
        if action == "drain":
            reason = str(body.get("reason") or "").strip()
            if not reason or "\n" in reason:
                raise ApiError("a drain needs a one-line --reason", 400)
            self.tools.run(
                ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"]
            )
        else:
            if body.get("gpu") is not None:
                raise ApiError(
                    "Slurm drains whole nodes: resume the node, not one GPU (--gpu)", 400
                )
            self.tools.run(["scontrol", "update", f"nodename={node}", "state=resume"])
        return next(n for n in self.nodes() if n["node"] == node)


def _select(jobs: list[dict[str, Any]], query: dict[str, Any]) -> list[dict[str, Any]]:
    """The jobs matching `query` (state, user, name; pending and running ones unless it
    names states or says all), by job id."""
    wanted = {s.strip().upper() for s in str(query.get("state") or "").split(",") if s.strip()}
    if not wanted and str(query.get("all", "")).lower() not in ("true", "1"):
        wanted = set(ACTIVE)
    if wanted:
        jobs = [j for j in jobs if j["state"] in wanted]
    if query.get("user"):
        jobs = [j for j in jobs if j["user"] == query["user"]]
    if query.get("name"):
        jobs = [j for j in jobs if j["name"] == query["name"]]
    return sorted(jobs, key=lambda j: j["job_id"])


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
            "comment": (job.get("comment") or {}).get("job")
            if isinstance(job.get("comment"), dict)
            else job.get("comment"),
        },
        now,
    )
