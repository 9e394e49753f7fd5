"""Team quotas that lend and borrow within a cohort (Kueue's ClusterQueue arithmetic)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.config.cluster import parse_config
from podium.errors import ConfigError
from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule
from podium.sched.config_policy import team_rules
from podium.sched.model import Elastic, Policy, TeamQuota, TeamRules
from podium.sched.team_ledger import TeamLedger

NODE = NodeView("n0", cpus=64, memory_mb=64000, gpus=tuple(GpuSlot(i, "h100") for i in range(8)))
QOS = {"low": 10, "normal": 100, "high": 1000}


def rules(*teams: TeamQuota) -> Policy:
    return Policy(teams=TeamRules(teams, QOS))


def vision(**kw: object) -> TeamQuota:
    return TeamQuota("vision", 4, cohort="lab", users=frozenset({"amy", "bob"}), **kw)  # type: ignore[arg-type]


def nlp(**kw: object) -> TeamQuota:
    return TeamQuota("nlp", 4, cohort="lab", accounts=frozenset({"nlp"}), **kw)  # type: ignore[arg-type]


def job(job_id: int, gpus: int, user: str, account: str = "", qos: str = "normal") -> PendingJob:
    return PendingJob(
        job_id=job_id,
        user=user,
        name=f"j{job_id}",
        partition="main",
        qos_priority=QOS[qos],
        submit_time=job_id,
        gpus=gpus,
        qos=qos,
        account=account or user,
        time_limit_s=3600,
    )


def running(
    job_id: int, gpus: range, user: str, start: float, account: str = "", qos: str = "normal"
) -> Allocation:
    return Allocation(
        job_id=job_id,
        node="n0",
        user=user,
        gpu_indices=tuple(gpus),
        qos=qos,
        account=account or user,
        start_time=start,
    )


def test_a_team_borrows_what_its_cohort_leaves_idle() -> None:
    pending = tuple(job(i, 1, "amy") for i in range(1, 8))
    d = schedule(Snapshot(nodes=(NODE,), pending=pending), 0, rules(vision(), nlp()))
    assert len(d.starts) == 7  # 4 of its own and 3 of nlp's idle quota
    lends_two = rules(vision(), nlp(lending_limit=2))
    d = schedule(Snapshot(nodes=(NODE,), pending=pending), 0, lends_two)
    assert len(d.starts) == 6
    assert d.reasons[7] == (
        "AssocGrpGRES: team vision uses 6 of its 4 GPUs and may borrow 0 more: lab lends 0"
    )
    capped = rules(vision(borrowing_limit=1), nlp())
    d = schedule(Snapshot(nodes=(NODE,), pending=pending), 0, capped)
    assert len(d.starts) == 5 and d.reasons[6].startswith("AssocGrpGRES: team vision uses 5")


def test_the_owner_reclaims_lent_quota_from_the_job_that_loses_least() -> None:
    borrowers = (
        running(10, range(0, 4), "amy", start=0),  # within vision's own quota
        running(11, range(4, 6), "bob", start=50),  # borrowed: 2 GPUs x 50 s lost
        running(12, range(6, 8), "amy", start=90),  # borrowed: 2 GPUs x 10 s lost
    )
    owner = job(1, 2, "carol", account="nlp")
    d = schedule(
        Snapshot(nodes=(NODE,), running=borrowers, pending=(owner,)), 100, rules(vision(), nlp())
    )
    assert [(p.job_id, p.for_job) for p in d.preempts] == [(12, 1)]
    assert d.starts == () and d.reasons[1].startswith("AssocGrpGRES: team nlp uses 0 of its 4")
    # While the victim stops, no second one is chosen.
    stopping = (*borrowers[:2], Allocation(**{**borrowers[2].__dict__, "preempting": True}))
    d = schedule(
        Snapshot(nodes=(NODE,), running=stopping, pending=(owner,)), 101, rules(vision(), nlp())
    )
    assert d.preempts == ()
    # Once it has stopped, the owner starts on its own quota.
    d = schedule(
        Snapshot(nodes=(NODE,), running=borrowers[:2], pending=(owner,)),
        102,
        rules(vision(), nlp()),
    )
    assert [s.job_id for s in d.starts] == [1]


def test_reclaim_choices_and_quota_beyond_the_owners_are_not_reclaimed() -> None:
    borrowers = (
        running(10, range(0, 4), "amy", start=0, qos="high"),
        running(11, range(4, 8), "bob", start=0, qos="high"),
    )
    owner = job(1, 2, "carol", account="nlp")
    never = rules(vision(), nlp(reclaim_within_cohort="never"))
    d = schedule(Snapshot(nodes=(NODE,), running=borrowers, pending=(owner,)), 100, never)
    assert d.preempts == () and d.reasons[1].startswith("AssocGrpGRES")
    lower = rules(vision(), nlp(reclaim_within_cohort="lower_priority"))
    d = schedule(Snapshot(nodes=(NODE,), running=borrowers, pending=(owner,)), 100, lower)
    assert d.preempts == ()  # the borrowers' QoS is higher
    greedy = job(2, 6, "carol", account="nlp")  # beyond nlp's own 4: no reclaim for that
    d = schedule(
        Snapshot(nodes=(NODE,), running=borrowers, pending=(greedy,)), 100, rules(vision(), nlp())
    )
    assert d.preempts == ()


def test_a_team_without_a_cohort_keeps_to_its_quota_and_may_preempt_its_own() -> None:
    alone = TeamQuota("solo", 2, users=frozenset({"amy"}), within_team="lower_priority")
    mine = (running(10, range(0, 2), "amy", start=0, qos="low"),)
    d = schedule(
        Snapshot(nodes=(NODE,), running=mine, pending=(job(1, 1, "amy"),)), 100, rules(alone)
    )
    assert d.reasons[1] == (
        "AssocGrpGRES: team solo uses 2 of its 2 GPUs and has no cohort to borrow from"
    )
    assert [p.job_id for p in d.preempts] == [10]
    d = schedule(Snapshot(nodes=(NODE,), pending=(job(2, 4, "dan"),)), 0, rules(alone))
    assert [s.job_id for s in d.starts] == [2]  # dan is in no team: no quota holds him


def test_a_jobs_team_is_its_accounts_before_its_users() -> None:
    team_rules_ = TeamRules((vision(), nlp()), QOS)
    assert team_rules_.team_of("amy", "nlp") == nlp()
    assert team_rules_.team_of("amy", "amy") == vision()
    assert team_rules_.team_of("zed", "zed") is None


def test_the_ledger_says_who_borrows_and_who_lends() -> None:
    ledger = TeamLedger(
        TeamRules(
            (vision(), nlp(), TeamQuota("ops", 2, cohort="lab", users=frozenset({"oz"}))), QOS
        )
    )
    ledger.count_running(
        [running(1, range(0, 7), "amy", start=0), running(2, range(7, 8), "oz", start=0)]
    )
    assert ledger.borrowed(vision()) == 3
    assert (ledger.lent(nlp()), ledger.pool("lab")) == (3, (8, 10))
    assert ledger.lent(TeamQuota("ops", 2, cohort="lab", users=frozenset({"oz"}))) == 0


def test_team_config_is_checked_in_one_line() -> None:
    good = (
        "teams:\n"
        "  - {name: vision, cohort: lab, quota: {gpus: 4}, borrowing_limit: {gpus: 4},"
        " lending_limit: {gpus: 2}, users: [amy, bob]}\n"
        "  - {name: nlp, cohort: lab, quota: {gpus: 4}, users: [carol]}\n"
    )
    teams = team_rules(parse_config(good, "c")).teams
    assert [(t.name, t.quota, t.borrowing_limit, t.lending_limit) for t in teams] == [
        ("vision", 4, 4, 2),
        ("nlp", 4, None, None),
    ]
    for text, says in [
        (good.replace("carol", "amy"), "user amy is in two teams: vision and nlp"),
        (good.replace("gpus: 2}", "gpus: 9}"), "team vision lends at most its quota"),
        (good.replace("vision, cohort: lab,", "vision,"), "no cohort to borrow from"),
        ("teams: [{name: x, quota: {gpus: 1}}]\n", "team x has no members"),
        ("teams: [{name: x, quota: {gpu: 1}, users: [a]}]\n", "gpus"),
    ]:  # fmt: skip
        with pytest.raises(ConfigError) as err:
            parse_config(text, "c")
        assert says in str(err.value) and "\n" not in str(err.value)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["amy", "carol", "oz"]), st.integers(1, 4)), max_size=12),
    st.integers(0, 4),
    st.integers(0, 4),
)
def test_starts_never_take_a_team_past_its_limits(
    asks: list[tuple[str, int]], lend: int, borrow: int
) -> None:
    teams = (
        vision(borrowing_limit=borrow),
        TeamQuota("nlp", 4, cohort="lab", users=frozenset({"carol"}), lending_limit=lend),
    )
    pending = tuple(job(i, g, user) for i, (user, g) in enumerate(asks, start=1))
    d = schedule(Snapshot(nodes=(NODE,), pending=pending), 0, rules(*teams))
    ledger = TeamLedger(TeamRules(teams, QOS))
    by_id = {j.job_id: j for j in pending}
    for start in d.starts:
        ledger.count(
            by_id[start.job_id].user, by_id[start.job_id].account, by_id[start.job_id].gpus
        )
    drawn, size = ledger.pool("lab")
    assert drawn <= size
    assert ledger.used["vision"] <= 4 + borrow
    assert ledger.borrowed(teams[1]) <= 4


def test_an_elastic_borrower_gives_back_replicas_before_anyone_is_preempted() -> None:
    elastic = Allocation(
        job_id=10, node="n0", user="amy", gpu_indices=tuple(range(6)), cpus=6, mem_mb=600,
        qos="normal", account="amy", start_time=0, elastic=Elastic(2, 6, 1, 1, 1, 100),
    )  # fmt: skip
    allocs = (elastic, running(11, range(6, 8), "bob", start=0))
    owner = job(1, 2, "carol", account="nlp")
    d = schedule(
        Snapshot(nodes=(NODE,), running=allocs, pending=(owner,)), 100, rules(vision(), nlp())
    )
    assert [(r.job_id, r.replicas, r.for_job) for r in d.resizes] == [(10, 4, 1)]
    assert d.preempts == ()


def _three(fair: bool, a_weight: float = 1.0, b_weight: float = 1.0) -> Policy:
    """Teams a and b (2 GPUs each, weights as given) and c (4 GPUs, idle), one cohort."""
    return Policy(
        teams=TeamRules(
            (
                TeamQuota("a", 2, cohort="lab", weight=a_weight, users=frozenset({"ann"})),
                TeamQuota("b", 2, cohort="lab", weight=b_weight, users=frozenset({"ben"})),
                TeamQuota("c", 4, cohort="lab", users=frozenset({"cat"})),
            ),
            QOS,
            fair_sharing=fair,
        )
    )


def test_fair_sharing_lends_idle_quota_by_weight_not_by_priority() -> None:
    """a's four jobs are older (higher priority) than b's four; c's 4 GPUs are idle.
    In priority order a takes all four; by weight 1:3, b takes three and a one."""
    busy = (running(90, range(0, 2), "ann", 0), running(91, range(2, 4), "ben", 0))
    pending = tuple(job(i, 1, "ann") for i in range(1, 5)) + tuple(
        job(i, 1, "ben") for i in range(5, 9)
    )
    snap = Snapshot(nodes=(NODE,), pending=pending, running=busy)
    started = {s.job_id for s in schedule(snap, 100, _three(False, 1, 3)).starts}
    assert started == {1, 2, 3, 4}
    started = {s.job_id for s in schedule(snap, 100, _three(True, 1, 3)).starts}
    assert started == {1, 5, 6, 7}  # shares after: a 1/1; b 1/3, 2/3, 3/3
    started = {s.job_id for s in schedule(snap, 100, _three(True)).starts}
    assert started == {1, 2, 5, 6}  # equal weights: two each


def test_fair_sharing_preempts_a_team_over_its_share_until_the_shares_meet() -> None:
    """a borrows 4 (all of c's idle quota); b, at its quota, wants 2 more. With fair
    sharing b takes one of a's borrowed GPUs per job while a keeps the larger share;
    without it, b waits."""
    busy = (
        running(90, range(0, 2), "ann", 0),
        *(running(91 + i, range(2 + i, 3 + i), "ann", 0) for i in range(4)),
        running(99, range(6, 8), "ben", 0),
    )
    pending = (job(1, 1, "ben"), job(2, 1, "ben"), job(3, 1, "ben"))
    snap = Snapshot(nodes=(NODE,), pending=pending, running=busy)
    assert schedule(snap, 100, _three(False)).preempts == ()
    taken = schedule(snap, 100, _three(True)).preempts
    assert 1 <= len(taken) <= 2 and {p.job_id for p in taken} <= {91, 92, 93, 94}
    even = (  # a and b borrow 2 each: neither may take from the other
        running(90, range(0, 4), "ann", 0),
        running(99, range(4, 8), "ben", 0),
    )
    snap = Snapshot(nodes=(NODE,), pending=(job(1, 1, "ben"), job(2, 1, "ann")), running=even)
    decided = schedule(snap, 100, _three(True))
    assert decided.preempts == () and decided.starts == ()


@settings(max_examples=60, deadline=None)
@given(
    weights=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    sizes=st.lists(st.tuples(st.sampled_from(["ann", "ben"]), st.integers(1, 3)), max_size=10),
)
def test_a_cohorts_jobs_within_quota_go_before_its_borrowers(
    weights: tuple[int, int], sizes: list[tuple[str, int]]
) -> None:
    """cohort_order keeps every job, puts the cohort's jobs within their team's quota
    first (in priority order) and its would-be borrowers after them, and leaves jobs
    of no team where they were."""
    from podium.sched.team_share import cohort_order

    for fair in (False, True):
        policy = _three(fair, *weights)
        order = [job(i + 1, g, u) for i, (u, g) in enumerate(sizes)] + [job(99, 1, "zed")]
        got = cohort_order(order, policy.teams, {"a": 0, "b": 0, "c": 0})
        assert sorted(j.job_id for j in got) == sorted(j.job_id for j in order)
        assert got[-1].job_id == 99  # in no team: it keeps its place
        used = {"ann": 0, "ben": 0}
        within, borrowers = [], []
        for pending in order[:-1]:
            used[pending.user] += pending.gpus
            (within if used[pending.user] <= 2 else borrowers).append(pending.job_id)
        assert [j.job_id for j in got[: len(within)]] == within
        if not fair:
            assert [j.job_id for j in got[len(within) : -1]] == borrowers


def test_a_job_started_by_a_pass_is_never_its_victim() -> None:
    """nlp's low-QoS job, within its quota, goes first (a cohort's jobs within quota
    before its borrowers) and starts; a high-QoS job of no team behind it needs room.
    It preempts amy's running job, not the low-QoS job that has not even started yet
    (the simulator failed on such a preempt, of a job it had never started)."""
    policy = Policy(
        teams=TeamRules((vision(), nlp()), QOS),
        preempts={"high": frozenset({"low", "normal"})},
    )
    pending = (
        job(1, 4, "amy", qos="high"),  # vision borrows for it: after nlp's
        job(2, 4, "x", account="nlp", qos="low"),
        job(3, 4, "zed", qos="high"),
    )
    busy = (running(10, range(0, 2), "amy", start=0),)
    d = schedule(Snapshot(nodes=(NODE,), pending=pending, running=busy), 100, policy)
    assert [s.job_id for s in d.starts] == [2]
    assert [(p.job_id, p.for_job) for p in d.preempts] == [(10, 3)]


def test_a_borrower_never_preempts_another_teams_jobs_within_their_quota() -> None:
    """Teams a and b (2 GPUs each) and c (4, idle) share a pool; zed, in no team, holds
    GPUs too. a's high-QoS job would borrow: it may not preempt b's low-QoS job while b
    is within its quota (b would reclaim the GPUs straight back: Kueue's rule), but may
    once b borrows; zed's high-QoS job preempts by QoS alone."""
    policy = replace(_three(False), preempts={"high": frozenset({"low"})})
    urgent = job(1, 4, "ann", qos="high")  # a: 4 of its 2, the pool holds it
    within = (
        running(10, range(0, 2), "ben", start=0, qos="low"),  # b: 2 of its 2
        running(11, range(2, 6), "zed", start=0),
    )
    d = schedule(Snapshot(nodes=(NODE,), pending=(urgent,), running=within), 100, policy)
    assert d.preempts == () and d.starts == ()
    borrowing = (
        running(10, range(0, 3), "ben", start=0, qos="low"),  # b: 3 of its 2
        running(11, range(3, 6), "zed", start=0),
    )
    d = schedule(Snapshot(nodes=(NODE,), pending=(urgent,), running=borrowing), 100, policy)
    assert [p.job_id for p in d.preempts] == [10]
    outsider = job(2, 4, "zed", qos="high")
    d = schedule(Snapshot(nodes=(NODE,), pending=(outsider,), running=within), 100, policy)
    assert [p.job_id for p in d.preempts] == [10]
