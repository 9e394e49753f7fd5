"""Team quotas as Slurm associations: the sacctmgr commands, what is refused, and an
apply that treats "nothing new" as done."""

from __future__ import annotations

import pytest

from podium.backends.slurm.engine_api import SlurmError
from podium.backends.slurm.teams import (
    apply,
    refusal,
    sacctmgr_commands,
    script,
    team_of_job,
)
from podium.config.cluster import ClusterConfig, parse_config

BASE = "backend: slurm\ncluster_name: Lab\naccounts: [{name: vision}, {name: nlp}]\n"


def _config(teams: str, extra: str = "") -> ClusterConfig:
    return parse_config(BASE + extra + "teams:\n" + teams, "c.yaml")


GOOD = _config(
    "  - {name: vision, quota: {gpus: 4}, accounts: [vision], weight: 2}\n"
    "  - {name: lang, cohort: solo, quota: {gpus: 8}, accounts: [nlp], users: [amy]}\n"
)


def test_each_team_is_an_account_capped_by_grptres() -> None:
    commands = sacctmgr_commands(GOOD)
    lines = script(commands).splitlines()
    assert lines[0] == "#!/bin/sh"
    assert "sacctmgr -i add account vision cluster=lab parent=root" in " ".join(lines)
    assert (
        "sacctmgr -i modify account where name=vision cluster=lab set GrpTRES=gres/gpu=4 "
        "Fairshare=200 QOS=high,normal,low DefaultQOS=normal"
    ) in lines
    assert "sacctmgr -i add account nlp cluster=lab parent=lang" in " ".join(lines)
    assert "sacctmgr -i modify account where name=nlp cluster=lab set parent=lang" in lines
    assert "sacctmgr -i add user amy account=lang cluster=lab DefaultAccount=lang" in lines
    # the team's own account named in accounts: is not made its own child
    assert not [c for c in commands if "parent=vision" in c]


def test_qos_become_slurm_qos_with_their_limits() -> None:
    config = _config(
        "  - {name: vision, quota: {gpus: 4}, accounts: [vision]}\n",
        "qos:\n  - {name: high, priority: 1000, preempt: [normal], max_gpus_per_user: 4}\n"
        "  - {name: normal, priority: 10, preempt_mode: cancel, max_jobs_per_user: 3}\n",
    )
    commands = sacctmgr_commands(config)
    assert commands[0] == ["sacctmgr", "-i", "add", "qos", "high"]
    assert commands[1][-6:] == [
        "Priority=1000", "Preempt=normal", "PreemptMode=requeue", "MaxTRESPerUser=gres/gpu=4",
        "MaxJobsPerUser=-1", "MaxSubmitJobsPerUser=-1",
    ]  # fmt: skip
    assert "PreemptMode=cancel" in commands[3] and "MaxJobsPerUser=3" in commands[3]
    assert "QOS=high,normal" in commands[5]


@pytest.mark.parametrize(
    ("teams", "extra", "words"),
    [
        ("  - {name: a, cohort: lab, quota: {gpus: 2}, users: [amy]}\n"
         "  - {name: b, cohort: lab, quota: {gpus: 2}, users: [bob]}\n", "",
         "team a shares cohort lab with another team, but Slurm cannot lend"),
        ("  - {name: a, quota: {gpus: 2}, users: [amy], within_team: lower_priority}\n", "",
         "Slurm preempts by QoS across the whole cluster"),
        ("  - {name: Vision, quota: {gpus: 2}, users: [amy]}\n", "",
         "Slurm keeps account names in lower case"),
        ("  - {name: a, quota: {gpus: 2}, users: ['amy where name=root']}\n", "",
         "is not a user name"),
        ("  - {name: a, quota: {gpus: 2}, users: [amy]}\n",
         "qos:\n  - {name: normal, priority: 1, allow_users: [amy]}\n",
         "Slurm grants a QoS to associations"),
    ],
)  # fmt: skip
def test_what_slurm_cannot_hold_is_refused_in_one_line(teams: str, extra: str, words: str) -> None:
    config = _config(teams, extra)
    with pytest.raises(ValueError, match=words) as err:
        sacctmgr_commands(config)
    assert "\n" not in str(err.value)
    if "qos" not in extra:
        assert refusal(config) == str(err.value)


def test_a_team_of_one_cohort_and_no_teams_are_held() -> None:
    assert refusal(GOOD) is None
    assert refusal(parse_config(BASE, "c.yaml")) is None


def test_apply_goes_on_past_what_exists_and_stops_at_a_real_error() -> None:
    ran: list[list[str]] = []

    def run(argv: list[str]) -> str:
        ran.append(argv)
        if argv[3] == "account":
            raise SlurmError("sacctmgr:  Nothing new added.")
        if argv[3] == "user":
            raise SlurmError("sacctmgr: Invalid cluster name")
        return ""

    commands = sacctmgr_commands(GOOD)
    done = apply(commands, run)
    lines = []
    with pytest.raises(SlurmError, match="Invalid cluster"):
        for line in done:
            lines.append(line)
    assert lines[0].startswith("done: add qos") and any(x.startswith("as is: add account")
                                                        for x in lines)  # fmt: skip
    assert ran[-1][3] == "user" and len(lines) == len(ran) - 1


def test_jobs_count_against_the_team_of_their_account() -> None:
    assert team_of_job(GOOD, "vision") == "vision"
    assert team_of_job(GOOD, "lang") == "lang" and team_of_job(GOOD, "nlp") == "lang"
    assert team_of_job(GOOD, "other") is None
