"""Team quotas on the real daemon: a team borrows another's idle GPUs, and the owner,
a second Unix user, gets them back by preemption of the borrowing job that loses least."""

from __future__ import annotations

import json
import time

from tests.integration.conftest import make_cluster, teardown_cluster
from tests.integration.test_permissions import _as, other_user
from tests.polling import poll, wait_until

__all__ = ["other_user"]  # the fixture, imported for pytest

CHECKPOINTS = (
    'while :; do date > "$PODIUM_CHECKPOINT_DIR/ckpt.tmp" && '
    'mv "$PODIUM_CHECKPOINT_DIR/ckpt.tmp" "$PODIUM_CHECKPOINT_DIR/ckpt"; sleep 0.3; done'
)


def test_a_team_borrows_idle_quota_and_the_owner_reclaims_it(other_user: str) -> None:
    """root's team `vision` (2 GPUs) borrows both of `nlp`'s idle GPUs; when nlp's
    user submits 1 GPU, the borrowing job that checkpoints is requeued (it loses
    least), nlp's job runs, and `podium teams` shows who borrows and who lends."""
    teams = (
        "teams:\n"
        "  - {name: vision, cohort: lab, quota: {gpus: 2}, users: [root]}\n"
        f"  - {{name: nlp, cohort: lab, quota: {{gpus: 2}}, users: [{other_user}]}}\n"
        "health: {interval_s: 0.5}\n"
    )
    c = make_cluster(gpus=4, kill_wait=1.0, extra=teams)
    c.start()
    try:
        own = c.submit("--gpus=2", "-J", "own", "--wrap", "sleep 300")
        c.wait(own, {"RUNNING"})
        steady = c.submit("--gpus=1", "-J", "steady", "--wrap", CHECKPOINTS)
        c.wait(steady, {"RUNNING"})
        wait_until(lambda: c.checkpoints(steady), "the daemon to sample steady's checkpoint")
        fresh = c.submit("--gpus=1", "-J", "fresh", "--wrap", "sleep 300")
        c.wait(fresh, {"RUNNING"})  # vision uses 4 of its 2 GPUs: it borrows nlp's two
        fresh_ran = time.time()
        over = c.submit("--gpus=1", "-J", "over", "--wrap", "true")
        waiting = c.wait_reason(over, "AssocGrpGRES: team vision uses 4 of its 2 GPUs and "
                                "may borrow 0 more: lab lends 0")  # fmt: skip
        assert waiting["state"] == "PENDING"
        table = json.loads(c.cli("teams", "--json", check=True).stdout)
        assert [(t["name"], t["used_gpus"], t["borrowed_gpus"], t["lent_gpus"]) for t in table] == [
            ("vision", 4, 2, 0),
            ("nlp", 0, 0, 2),
        ]
        assert "vision" in c.cli("teams", check=True).stdout
        # fresh has more to lose than steady, which checkpoints: 2 s and more
        wait_until(
            lambda: any(t > fresh_ran + 2 for t in c.checkpoints(steady)),
            "a checkpoint of steady sampled 2 s after fresh started",
        )
        claimed = _as(c, other_user, "submit", "--parsable", "--gpus=1", "--wrap", "sleep 300")
        assert claimed.returncode == 0, claimed.stderr
        owner = int(claimed.stdout.strip())
        assert c.wait(owner, {"RUNNING"}, timeout=30)
        requeued = c.wait(steady, {"PENDING"}, timeout=10)  # preempted and queued again
        assert requeued["restart_count"] == 1 and "team vision" in c.wait_reason(
            steady, "AssocGrpGRES: team vision uses 3 of its 2 GPUs and may borrow 0 more: "
            "lab lends 0")["reason"]  # fmt: skip
        assert c.job(fresh)["state"] == c.job(own)["state"] == "RUNNING"
        table = json.loads(c.cli("teams", "--json", check=True).stdout)
        assert [(t["name"], t["used_gpus"], t["borrowed_gpus"], t["lent_gpus"]) for t in table] == [
            ("vision", 3, 1, 0),
            ("nlp", 1, 0, 1),
        ]
        for job in (own, fresh, over, steady):
            c.cli("cancel", str(job), check=True)
        assert _as(c, other_user, "cancel", str(owner)).returncode == 0
    finally:
        teardown_cluster(c)


def test_idle_quota_is_shared_by_weight_between_two_users_teams(other_user: str) -> None:
    """team_fair_sharing: root's team (weight 1) and the second user's (weight 3), each
    with 1 GPU of its own, share a third team's 4 idle GPUs 1:3, although root's jobs
    were queued first and would all go first in priority order."""
    teams = (
        "team_fair_sharing: true\n"
        "teams:\n"
        "  - {name: vision, cohort: lab, quota: {gpus: 1}, weight: 1, users: [root]}\n"
        f"  - {{name: nlp, cohort: lab, quota: {{gpus: 1}}, weight: 3, users: [{other_user}]}}\n"
        "  - {name: idle, cohort: lab, quota: {gpus: 4}, users: [nobody-here]}\n"
    )
    c = make_cluster(gpus=6, kill_wait=1.0, extra=teams)
    c.start()
    try:
        mine = [c.submit("--hold", "--gpus=1", "--wrap", "sleep 300") for _ in range(4)]
        theirs = []
        for _ in range(4):
            done = _as(c, other_user, "submit", "--parsable", "--hold", "--gpus=1",
                       "--wrap", "sleep 300")  # fmt: skip
            assert done.returncode == 0, done.stderr
            theirs.append(int(done.stdout.strip()))
        c.cli("release", *map(str, mine + theirs), check=True)  # one pass sees them all
        table = poll(
            lambda: {t["name"]: t for t in json.loads(c.cli("teams", "--json", check=True).stdout)},
            lambda table: table["vision"]["used_gpus"] + table["nlp"]["used_gpus"] == 6,
            "six GPUs used by the two teams", 30,
        )  # fmt: skip
        assert (table["vision"]["used_gpus"], table["nlp"]["used_gpus"]) == (2, 4), table
        assert table["vision"]["share"] == table["nlp"]["share"] == 1.0  # 1/1 and 3/3
        assert c.job(mine[-1])["state"] == "PENDING"
        assert "WEIGHT" in c.cli("teams", check=True).stdout
        c.cli("cancel", *map(str, mine), check=True)
        assert _as(c, other_user, "cancel", *map(str, theirs)).returncode == 0
    finally:
        teardown_cluster(c)


def test_a_user_outside_a_team_cannot_charge_its_account(other_user: str) -> None:
    """Issue 43, item 8, in the documented example (team nlp with `accounts: [nlp]` and
    no users): a user in no team submitted --account nlp, and its reclaim preempted
    another user's borrowing job. Now the submission is refused in one line, and the
    borrowing job runs on."""
    teams = (
        "teams:\n"
        "  - {name: vision, cohort: lab, quota: {gpus: 1}, users: [root]}\n"
        "  - {name: nlp, cohort: lab, quota: {gpus: 1}, accounts: [nlp]}\n"
    )
    c = make_cluster(gpus=2, kill_wait=1.0, extra=teams)
    c.start()
    try:
        borrowing = c.submit("--gpus=2", "--wrap", "sleep 300")  # vision borrows nlp's GPU
        c.wait(borrowing, {"RUNNING"})
        refused = _as(c, other_user, "submit", "--account=nlp", "--gpus=1", "--wrap", "true")
        assert refused.returncode != 0, refused.stdout
        assert "account 'nlp' is team nlp's" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        time.sleep(1.0)  # passes come and go: nothing reclaims for a job never accepted
        assert c.job(borrowing)["state"] == "RUNNING" and c.job(borrowing)["restart_count"] == 0
        assert not [j for j in json.loads(c.cli("queue", "--json").stdout) if j["account"] == "nlp"]
        c.cli("cancel", str(borrowing), check=True)
    finally:
        teardown_cluster(c)
