"""A pending job's blockers in plain words: the jobs holding the GPUs it is expected on
and when they end, the jobs ahead of it, the limit with its numbers, the dependency,
the fenced GPU, the part of its layout no node holds. Reasons come from a real pass."""

from __future__ import annotations

from podium.jobspec.job import Dependency
from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule
from podium.sched.blockers import Blocker, ExpectedStart, Explainer, within
from podium.sched.model import Policy, QosLimits
from podium.sim.forecast import forecast

NODE = NodeView("n0", cpus=8, memory_mb=16000, gpus=tuple(GpuSlot(i, "h100") for i in range(4)))


def job(job_id: int, gpus: int, limit: float | None = 100.0, **kw: object) -> PendingJob:
    return PendingJob(
        job_id=job_id, user="carol", name=f"j{job_id}", partition="main", qos_priority=100,
        submit_time=float(job_id), gpus=gpus, time_limit_s=limit, qos="normal",
        account="ml", **kw,
    )  # type: ignore[arg-type]  # fmt: skip


def running(job_id: int, gpus: tuple[int, ...], limit: float | None, user: str = "alice",
            **kw: object) -> Allocation:  # fmt: skip
    return Allocation(job_id=job_id, node="n0", user=user, gpu_indices=gpus, start_time=0.0,
                      time_limit_s=limit, qos="normal", account="ml", **kw)  # type: ignore[arg-type]  # fmt: skip


Fenced = dict[tuple[str, int | None], str]


def explain(
    snap: Snapshot, now: float, policy: Policy | None = None, fenced: Fenced | None = None
) -> dict[int, list[Blocker]]:
    """Each pending job's blockers, with its reason from a real pass and the forecast's
    expected start, as the daemon finds them."""
    policy = policy or Policy()
    reasons = schedule(snap, now, policy).reasons
    starts = forecast(snap, now, policy).starts
    expected = {j: ExpectedStart(e.start, e.node, e.gpu_indices) for j, e in starts.items()}
    explainer = Explainer(snap, policy, now, expected, fenced)
    return {p.job_id: explainer.of(p, reasons.get(p.job_id)) for p in snap.pending}


def test_names_the_jobs_holding_its_gpus_and_when_they_end() -> None:
    snap = Snapshot(
        nodes=(NODE,),
        running=(running(1, (0, 1), 1500), running(2, (2, 3), 3600, user="bob")),
        pending=(job(3, 4),),
    )
    (gpus,) = explain(snap, now=300)[3]
    assert gpus.kind == "gpus" and gpus.job_ids == (1, 2) and gpus.until == 3600
    assert "on n0 (GPUs 0, 1, 2, 3)" in gpus.text
    assert "job 1 (alice, ends in 20 min)" in gpus.text
    assert "job 2 (bob, ends in 55 min)" in gpus.text


def test_only_the_holders_of_the_gpus_it_will_get_are_named() -> None:
    snap = Snapshot(
        nodes=(NODE,),
        running=(running(1, (0, 1, 2), 100), running(2, (3,), 5000)),
        pending=(job(3, 2),),
    )
    (gpus,) = explain(snap, now=0)[3]
    assert gpus.job_ids == (1,) and gpus.until == 100


def test_priority_names_the_jobs_ahead() -> None:
    snap = Snapshot(
        nodes=(NODE,),
        running=(running(1, (0, 1, 2, 3), 600),),
        pending=(job(2, 4), job(3, 4), job(4, 4, held=True)),
    )
    got = explain(snap, now=0)
    ahead, gpus = got[3]
    assert ahead.kind == "priority" and ahead.job_ids == (2,)
    assert "1 job of partition main come" in ahead.text
    assert gpus.kind == "gpus" and gpus.until == 700  # after job 2's 100 s
    assert got[4][0].kind == "held" and "podium release" in got[4][0].text


def test_a_job_with_no_time_limit_ahead_means_no_forecast() -> None:
    snap = Snapshot(nodes=(NODE,), running=(running(1, (0, 1, 2, 3), None),),
                    pending=(job(2, 1),))  # fmt: skip
    (gpus,) = explain(snap, now=0)[2]
    assert "No start can be forecast" in gpus.text and "job 1 (alice, no time limit)" in gpus.text


def test_limits_say_what_is_used_of_them() -> None:
    policy = Policy(account_gpu_limits={"ml": 3},
                    qos_limits={"normal": QosLimits(max_jobs_per_user=5)})  # fmt: skip
    snap = Snapshot(nodes=(NODE,), running=(running(1, (0, 1), 600),), pending=(job(2, 2),))
    (limit,) = explain(snap, now=0, policy=policy)[2]
    assert limit.text == "Account ml uses 2 of its 3 GPUs; this job asks for 2 more."
    assert limit.job_ids == (1,)
    policy = Policy(qos_limits={"normal": QosLimits(max_gpus_per_user=2)})
    snap = Snapshot(nodes=(NODE,), running=(running(1, (0, 1), 600, user="carol"),),
                    pending=(job(2, 1),))  # fmt: skip
    (limit,) = explain(snap, now=0, policy=policy)[2]
    assert "carol uses 2 of the 2 GPUs per user of QoS normal" in limit.text


def test_dependencies_say_which_job_and_whether_it_can_still_be_met() -> None:
    after = (Dependency(kind="afterok", job_ids=(7,)),)
    snap = Snapshot(nodes=(NODE,), pending=(job(8, 1, dependencies=after),),
                    job_states={7: "RUNNING"})  # fmt: skip
    (dep,) = explain(snap, now=0)[8]
    assert dep.text == "It waits for job 7 (RUNNING) to end successfully (afterok)."
    snap = Snapshot(nodes=(NODE,), pending=(job(8, 1, dependencies=after),),
                    job_states={7: "FAILED"})  # fmt: skip
    (dep,) = explain(snap, now=0)[8]
    assert "can never be met" in dep.text and dep.job_ids == (7,)


def test_a_layout_no_node_can_hold_says_what_is_short() -> None:
    snap = Snapshot(nodes=(NODE,), pending=(job(2, 6),))
    (layout,) = explain(snap, now=0)[2]
    assert layout.kind == "layout"
    assert layout.text == (
        "It asks for 6 GPUs, 1 CPU and 0 MB on one node; the most a node of partition main "
        "has usable is 4 GPUs (on n0)."
    )


def test_a_fenced_gpu_is_named_with_its_reason() -> None:
    fenced_node = NodeView("n0", cpus=8, memory_mb=16000,
                           gpus=tuple(GpuSlot(i, "h100") for i in range(3)))  # fmt: skip
    fenced = {("n0", 3): "XID 79: GPU has fallen off the bus"}
    snap = Snapshot(nodes=(fenced_node,), pending=(job(2, 4),))
    layout, gpu = explain(snap, now=0, fenced=fenced)[2]
    assert "is 3 GPUs (on n0)" in layout.text
    assert gpu.kind == "fenced"
    assert gpu.text == "GPU 3 of n0 is fenced: XID 79: GPU has fallen off the bus."


def test_a_team_quota_keeps_its_own_sentence() -> None:
    snap = Snapshot(nodes=(NODE,), pending=(job(2, 1),))
    explainer = Explainer(snap, Policy(), 0.0)
    (quota,) = explainer.of(snap.pending[0], "waits for quota: team a uses 4 of its 4 GPUs")
    assert quota.kind == "quota" and quota.text.startswith("Waits for quota: team a")


def test_spans_read_as_words() -> None:
    assert [within(s) for s in (5, 600, 7500, 400000)] == [
        "in 5 s", "in 10 min", "in 2 h 05 min", "in 4 days"
    ]  # fmt: skip


def test_an_end_from_reported_progress_is_said_to_be_so() -> None:
    snap = Snapshot(
        nodes=(NODE,),
        running=(running(1, (0, 1, 2, 3), 36000, expected_end=1500.0),),
        pending=(job(2, 4),),
    )
    (gpus,) = explain(snap, now=300)[2]
    assert gpus.until == 1500
    assert "job 1 (alice, ends in 20 min, by its progress)" in gpus.text


def test_array_tasks_are_named_as_users_name_them() -> None:
    """Issue 44, item 3: blockers named an array task by its internal id ("job 6")
    where the queue shows 4_0."""
    snap = Snapshot(
        nodes=(NODE,),
        running=(running(6, (0, 1, 2, 3), 600, array_job_id=4, array_task_id=0),),
        pending=(job(7, 2), job(8, 2, array_job_id=5, array_task_id=3)),
    )
    found = explain(snap, now=0)
    assert "job 4_0 (alice, ends in 10 min)" in found[7][0].text and "job 6" not in found[7][0].text
    ahead = next(b for b in found[8] if b.kind == "priority")
    assert "priority order: 7." in ahead.text
    first = next(b for b in explain(
        Snapshot(nodes=(NODE,), running=snap.running, pending=(job(8, 2, array_job_id=5,
                 array_task_id=3), job(9, 4))), now=0)[9] if b.kind == "priority")  # fmt: skip
    assert "priority order: 5_3." in first.text and first.job_ids == (8,)


def test_a_job_behind_one_the_forecast_starts_first_names_that_one_too() -> None:
    """Issue 44, item 3: the sentence named only the running holder, which ends long
    before the job's expected start; it waits for the job the forecast starts there
    first, and says so."""
    snap = Snapshot(
        nodes=(NODE,),
        running=(running(1, (0, 1, 2, 3), 600),),
        pending=(job(2, 4, limit=3600), job(3, 4, limit=60)),
    )
    found = explain(snap, now=0)[3]  # job 2 comes first in priority order, too
    gpus = next(b for b in found if b.kind == "gpus")
    assert "expected to start in 1 h 10 min" in gpus.text
    assert "job 1 (alice, ends in 10 min)" in gpus.text
    assert (
        "after what the forecast runs there first: job 2 (carol, expected to start in 10 min)"
        in gpus.text
    )
    assert gpus.job_ids == (1, 2)
