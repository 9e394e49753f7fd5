"""Scheduling views: `podium priority` (like sprio), `podium share` (like sshare) and
`podium teams` (team quotas, like Kueue's ClusterQueues)."""

from __future__ import annotations

import click

from podium.backends import open_backend
from podium.cli import render


@click.command()
@click.option("--json", "as_json", is_flag=True)
def priority(as_json: bool) -> None:
    """Each pending job's priority and its factors: age, fair share, QoS, size, partition,
    shortness (shortest-first), nice; in the queue's order. Under least attained service
    (the default order: partition tier, overdue jobs, QoS, then service) also each job's
    attained GPU-seconds and queue, and whether it is overdue (the wait guard)."""
    jobs = open_backend().priorities()
    if as_json:
        render.print_json(jobs)
        return
    las = any(j.get("order") == "las" for j in jobs)
    render.table(
        "order: partition tier, overdue jobs (the wait guard, earliest due first), QoS, "
        "then least attained service (queue, then submit order)"
        if las
        else None,
        [
            "JOBID",
            "USER",
            "ACCOUNT",
            "QOS",
            *(["LAS_Q", "ATTAINED_GPU_S", "OVERDUE"] if las else []),
            "PRIORITY",
            "AGE",
            "FAIRSHARE",
            "QOS_F",
            "JOBSIZE",
            "PARTITION_F",
            "SHORT",
            "NICE",
        ],
        [
            [
                j["job_id"],
                j["user"],
                j["account"],
                j["qos"],
                *(
                    [
                        j.get("las_queue", ""),
                        f"{j.get('attained_gpu_s', 0.0):.0f}",
                        "yes" if j.get("overdue") else "",
                    ]
                    if las
                    else []
                ),
                f"{j['priority']:.0f}",
                f"{j['age']:.3f}",
                f"{j['fairshare']:.3f}",
                f"{j['qos_factor']:.3f}",
                f"{j['jobsize']:.3f}",
                f"{j['partition_factor']:.3f}",
                f"{j.get('shortness', 0.0):.3f}",  # a backend with no such factor: 0
                j["nice"],
            ]
            for j in jobs
        ],
    )


@click.command()
@click.option("--json", "as_json", is_flag=True)
def share(as_json: bool) -> None:
    """Fair share per account and user: shares, decayed usage (GPU-seconds), factor."""
    data = open_backend().share()
    rows = data["shares"]
    if as_json:
        render.print_json(rows)
        return
    render.table(
        None,
        ["ACCOUNT", "USER", "RAW_SHARES", "NORM_SHARES", "RAW_USAGE", "EFFECTV_USAGE", "FAIRSHARE"],
        [
            [
                r["account"],
                r["user"] or "",
                r["raw_shares"],
                f"{r['norm_shares']:.4f}",
                f"{r['raw_usage']:.0f}",
                f"{r['effective_usage']:.4f}",
                f"{r['fairshare']:.4f}",
            ]
            for r in rows
        ],
    )
    access = data.get("access")
    if access:
        accounts = access["accounts"]
        click.echo(
            f"\nyou ({access['user']}) may charge "
            + (", ".join(accounts) if accounts is not None else "any account")
            + f" (default {access['default_account']}); QoS: {', '.join(access['qos']) or 'none'}"
            + f" (default {access['default_qos']})"
        )
        for account, qos in (access.get("account_qos") or {}).items():
            click.echo(f"  account {account} allows QoS {', '.join(qos) or 'none open to you'}")


@click.command()
@click.option("--json", "as_json", is_flag=True)
def teams(as_json: bool) -> None:
    """Each team's GPU quota, limits, use, and the GPUs it borrows and lends in its cohort."""
    rows = open_backend().teams()
    if as_json:
        render.print_json(rows)
        return
    if not rows:
        click.echo("no teams: quotas are configured under teams: in the cluster config")
        return

    def limit(value: int | None) -> str:
        return "-" if value is None else str(value)

    render.table(
        None,
        ["TEAM", "COHORT", "QUOTA", "USED", "BORROWED", "LENT", "BORROW_LIMIT", "LEND_LIMIT",
         "WEIGHT", "PENDING"],
        [
            [r["name"], r["cohort"] or "-", r["quota_gpus"], r["used_gpus"], r["borrowed_gpus"],
             r["lent_gpus"], limit(r["borrowing_limit_gpus"]), limit(r["lending_limit_gpus"]),
             f"{r['weight']:g}",
             f"{r['pending_jobs']} job(s)" + ("" if r["pending_gpus"] is None
                                             else f", {r['pending_gpus']} GPU(s)")]
            for r in rows
        ],
    )  # fmt: skip
