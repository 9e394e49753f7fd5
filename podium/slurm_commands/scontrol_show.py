"""`scontrol show job|node|partition`: Podium's records in Slurm's Key=Value layout
(the fields Podium keeps; tests/integration/test_slurm_differential.py says which of
Slurm's it lacks)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from podium.api.backend_protocol import Backend
from podium.errors import ApiError, NotFound
from podium.slurm_commands.args import InSlurmsWords, job_refs
from podium.slurm_commands.slurm_text import slurm_duration, slurm_time


def show_job(backend: Backend, text: str) -> str:
    """`scontrol show job [ID]`: that job, or with no id every job the cluster holds
    now (pending, running and just ended), each a paragraph, as Slurm lists them (it
    never reads $SLURM_JOB_ID for it)."""
    if text:
        ids, tasks = job_refs([text.split(",")[0]])
        try:
            record = backend.job(*((ids[0], None) if ids else tasks[0]))
        except (NotFound, ApiError) as exc:
            if isinstance(exc, ApiError) and exc.status != 404:
                raise
            raise InSlurmsWords("slurm_load_jobs error: Invalid job id specified") from None
        return format_job(record)
    from podium.api.selection import JobFilter

    jobs = backend.jobs(JobFilter())
    if not jobs:
        return "No jobs in the system"
    return "\n\n".join(format_job(j) for j in sorted(jobs, key=lambda j: j["job_id"]))


def show_partitions(backend: Backend, name: str | None) -> str:
    """`scontrol show partition [NAME]`: each partition as Slurm writes it."""
    nodes = backend.nodes()
    limits: dict[str, Any] = {}
    for n in nodes:
        for part, known in (n.get("partition_limits") or {}).items():
            limits.setdefault(part, dict(known, nodes=[], cpus=0, mem=0, gpus=0))
            entry = limits[part]
            entry["nodes"].append(n["node"])
            entry["cpus"] += n["cpus_total"]
            entry["mem"] += n["mem_total_mb"]
            entry["gpus"] += n.get("gpus_total") or 0
    if name is not None and name not in limits:
        raise InSlurmsWords(f"Partition {name} not found")
    return "\n".join(format_partition(p, limits[p]) for p in limits if name in (None, p))


def show_nodes(backend: Backend, name: str | None) -> str:
    """`scontrol show node [NAME]`."""
    nodes = [n for n in backend.nodes() if name is None or n["node"] == name]
    if not nodes:
        raise InSlurmsWords(f"Node {name} not found")
    return "\n\n".join(format_node(n) for n in nodes)


def format_partition(name: str, part: Mapping[str, Any]) -> str:
    """A partition as `scontrol show partition` writes it (the fields Podium has)."""
    limit = part.get("max_time_s")
    gres = f",gres/gpu={part['gpus']}" if part["gpus"] else ""
    lines = [
        f"PartitionName={name}",
        "   AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL",
        f"   AllocNodes=ALL Default={'YES' if part.get('default') else 'NO'} QoS=N/A",
        "   DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO",
        f"   MaxNodes=UNLIMITED MaxTime={slurm_duration(limit)} MinNodes=0 LLN=NO "
        "MaxCPUsPerNode=UNLIMITED",
        f"   Nodes={','.join(part['nodes'])}",
        f"   PriorityJobFactor=1 PriorityTier={part.get('priority_tier', 1)} RootOnly=NO "
        "ReqResv=NO OverSubscribe=NO",
        "   OverTimeLimit=NONE PreemptMode=REQUEUE",
        f"   State=UP TotalCPUs={part['cpus']} TotalNodes={len(part['nodes'])} "
        "SelectTypeParameters=NONE",
        "   JobDefaults=(null)",
        "   DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED",
        f"   TRES=cpu={part['cpus']},mem={part['mem']}M,node={len(part['nodes'])},"
        f"billing={part['cpus']}{gres}",
        "",
    ]
    return "\n".join(lines)


def format_job(job: Mapping[str, Any]) -> str:
    """A job record as `scontrol show job` writes it: Key=Value, a few to a line."""
    code, sig = job.get("exit_code"), job.get("signal")
    tres = f"cpu={job['cpus']},mem={job.get('mem_mb') or 0}M,node={job['node_count']}"
    if job["gpus"]:
        tres += f",gres/gpu={job['gpus']}"
    lines = [
        [("JobId", job["job_id"]), ("JobName", job["name"])],
        [("UserId", f"{job['user']}({job.get('uid')})"), ("Account", job["account"])],
        [("Partition", job["partition"]), ("QOS", job["qos"]), ("Nice", job["nice"])],
        [("JobState", job["state"]), ("Reason", job.get("reason") or "None")],
        [("Requeue", 1), ("Restarts", job["restart_count"])],
        [("ExitCode", f"{code or 0}:{sig or 0}"), ("RunTime", slurm_duration(job["elapsed_s"]))],
        [("TimeLimit", slurm_duration(job.get("time_limit_s")))],
        [("SubmitTime", slurm_time(job.get("submit_epoch")))],
        [
            ("StartTime", slurm_time(job.get("start_epoch"))),
            ("EndTime", slurm_time(job.get("end_epoch"))),
        ],
        [("NodeList", job.get("node") or "(null)"), ("NumNodes", job["node_count"])],
        [("NumCPUs", job["cpus"]), ("NumTasks", job.get("ntasks") or 1)],
        [("TRES", tres)],
        [("WorkDir", job["work_dir"])],
        [("StdOut", job.get("stdout") or "(null)")],
        [("StdErr", job.get("stderr") or "(null)")],
    ]
    if job.get("array_job_id") is not None:
        lines.insert(
            1, [("ArrayJobId", job["array_job_id"]), ("ArrayTaskId", job["array_task_id"])]
        )
    if job.get("comment"):
        lines.append([("Comment", job["comment"])])
    if job.get("wckey"):
        lines.append([("WCKey", job["wckey"])])
    text = [" ".join(f"{k}={v}" for k, v in line) for line in lines]
    return text[0] + "".join(f"\n   {t}" for t in text[1:])


def format_node(node: Mapping[str, Any]) -> str:
    """A node record as `scontrol show node` writes it."""
    gpus = node.get("gpus_total") or 0
    kind = node.get("gpu_type")
    gres = f"gpu:{kind}:{gpus}" if kind and gpus else (f"gpu:{gpus}" if gpus else "(null)")
    listed = node.get("gpus") or []
    if any(g.get("parent") is not None or g.get("share") for g in listed):
        kinds: dict[str, int] = {}  # one gres type per MIG profile, as Slurm lists them
        shares: dict[str, int] = {}  # mps:100, shard:4 (Slurm: separate GRES)
        for g in listed:
            kinds[g["type"]] = kinds.get(g["type"], 0) + 1
            if g.get("share"):
                kind = g["share"]["kind"]
                shares[kind] = shares.get(kind, 0) + g["share"]["units"]
        gres = ",".join(
            [f"gpu:{t}:{n}" for t, n in kinds.items()] + [f"{k}:{n}" for k, n in shares.items()]
        )
    lines = [
        [("NodeName", node["node"])],
        [("CPUAlloc", node["cpus_alloc"]), ("CPUTot", node["cpus_total"])],
        [("RealMemory", node["mem_total_mb"]), ("AllocMem", node["mem_alloc_mb"])],
        [("Gres", gres), ("GresUsed", f"gpu:{node.get('gpus_used') or 0}")],
        [("State", str(node["state"]).upper()), ("Reason", node.get("reason") or "(null)")],
        [("Partitions", ",".join(node.get("partitions") or []))],
        [("AvailableFeatures", ",".join(node.get("features") or []) or "(null)")],
    ]
    text = [" ".join(f"{k}={v}" for k, v in line) for line in lines]
    return text[0] + "".join(f"\n   {t}" for t in text[1:])


__all__ = ["format_job", "format_node", "format_partition", "show_job", "show_nodes",
           "show_partitions"]  # fmt: skip
