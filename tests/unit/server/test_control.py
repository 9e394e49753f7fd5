"""Control: cancel, requeue, hold, signals, time limits, drain and resume over a
Selection, with a real store and recorded effects (no daemon)."""

from __future__ import annotations

import pytest

from podium.api.selection import JobFilter, Selection
from podium.errors import NotFound, PermissionDenied, SpecError
from tests.unit.server.harness import ADMIN, BOB, ME, Cluster


def test_cancel_ends_a_pending_job_at_once_and_asks_a_running_one_to_stop(c: Cluster) -> None:
    running = c.submit("--gpus=2")
    c.reactor.tick()
    pending = c.submit("--gpus=2")
    assert c.control.cancel(ME, Selection((running, pending))) == [running, pending]
    assert c.state(pending) == "CANCELLED"
    assert c.state(running) == "RUNNING"  # its supervisor stops it; the end comes later
    assert ("cancel", running) in c.effects.signals


def test_another_users_job_is_refused_whole(c: Cluster) -> None:
    mine, theirs = c.submit("--gpus=1"), c.submit("--gpus=1", who=BOB)
    with pytest.raises(PermissionDenied, match=f"job {theirs} belongs to bob"):
        c.control.cancel(ME, Selection((mine, theirs)))
    assert c.state(mine) == c.state(theirs) == "PENDING"  # nothing done
    with pytest.raises(PermissionDenied, match="only on your own jobs"):
        c.control.cancel(ME, Selection(user="bob"))
    assert c.control.cancel(ADMIN, Selection(user="bob")) == [theirs]


def test_filters_select_by_user_name_and_state(c: Cluster) -> None:
    a = c.submit("--gpus=2", "-J", "a")
    c.reactor.tick()
    b, other = c.submit("-J", "b"), c.submit("-J", "b", who=BOB)
    assert [r["job_id"] for r in c.control.select(ME, Selection(name="b"))] == [b]  # own only
    assert [r["job_id"] for r in c.control.select(ADMIN, Selection(name="b"))] == [b, other]
    got = c.control.select(ME, Selection(states=("RUNNING",)))
    assert [r["job_id"] for r in got] == [a]
    with pytest.raises(SpecError, match="name jobs by id"):
        c.control.select(ME, Selection())
    with pytest.raises(NotFound, match="no job 99"):
        c.control.select(ME, Selection((99,)))


def test_requeue_takes_running_jobs_only_and_honours_no_requeue(c: Cluster) -> None:
    keep = c.submit("--gpus=1", "--no-requeue")
    go = c.submit("--gpus=1")
    c.reactor.tick()
    waiting = c.submit("--gpus=1")
    with pytest.raises(SpecError, match=f"job {waiting} is pending"):
        c.control.requeue(ME, Selection((waiting,)))
    with pytest.raises(SpecError, match="--no-requeue"):
        c.control.requeue(ME, Selection((keep,)))
    assert c.control.requeue(ME, Selection((go,))) == [go]
    assert ("requeue", go) in c.effects.signals


def test_refusals_name_the_state_and_the_task_as_users_see_them(c: Cluster) -> None:
    """Issue 44, item 3: requeue of a COMPLETED job said "is pending", and an array
    task was named by its internal id ("job 6") where the queue shows 4_0."""
    done = c.submit("--gpus=1")
    c.reactor.tick()
    c.end(done)
    c.reactor.tick()
    with pytest.raises(SpecError, match=f"job {done} is completed: only a running job"):
        c.control.requeue(ME, Selection((done,)))
    held = c.submit("--gpus=1", "--hold")
    with pytest.raises(SpecError, match=f"job {held} is held: only a running job"):
        c.control.requeue(ME, Selection((held,)))
    array = c.submit("--gpus=2", "--array=0-1")
    c.reactor.tick()  # task 0 starts: a row of its own, with an id of its own
    running = c.store.jobs(JobFilter(states=("RUNNING",)))
    task = next(r for r in running if r["array_task_id"] == 0)
    assert task["job_id"] != array
    with pytest.raises(PermissionDenied, match=f"job {array}_0 belongs to alice"):
        c.control.send_signal(BOB, Selection((), tasks=((array, 0),)), 10, "batch")
    assert c.views.display_ids([task["job_id"], done]) == [f"{array}_0", str(done)]


def test_hold_and_release_change_pending_jobs(c: Cluster) -> None:
    job = c.submit("--gpus=1")
    assert c.control.hold(ME, Selection((job,)), True) == [job]
    c.reactor.tick()
    assert c.state(job) == "PENDING" and c.effects.launched == []
    assert c.control.hold(ME, Selection((job,)), False) == [job]
    c.reactor.tick()
    assert c.state(job) == "RUNNING"


def test_a_signal_goes_to_running_jobs_only(c: Cluster) -> None:
    running = c.submit("--gpus=2")
    c.reactor.tick()
    pending = c.submit("--gpus=1")
    with pytest.raises(SpecError, match="only a running job gets a signal"):
        c.control.send_signal(ME, Selection((pending,)), 10, "batch")
    assert c.control.send_signal(ME, Selection((running,)), 10, "batch") == [running]
    assert ("signal 10 batch", running) in c.effects.signals


def test_an_owner_lowers_a_time_limit_and_only_an_admin_raises_it(c: Cluster) -> None:
    job = c.submit("--gpus=1", "--time=10:00")
    c.reactor.tick()
    assert c.control.set_time_limit(ME, job, 300) == [job]
    assert c.store.job(job)["time_limit_s"] == 300
    assert c.executor.time_limits == [(job, 300)]  # the running supervisor is told
    with pytest.raises(PermissionDenied, match="only an administrator may raise"):
        c.control.set_time_limit(ME, job, 600)
    assert c.control.set_time_limit(ADMIN, job, 600) == [job]


def test_drain_and_resume_are_for_the_administrator(c: Cluster) -> None:
    node = c.node.name
    with pytest.raises(PermissionDenied, match="draining a node is for the administrator"):
        c.control.drain(ME, node, "fan")
    with pytest.raises(SpecError, match="a drain needs a reason"):
        c.control.drain(ADMIN, node, " ")
    c.control.drain(ADMIN, node, "fan")
    job = c.submit("--gpus=1")
    c.reactor.tick()
    assert c.state(job) == "PENDING"
    c.control.resume(ADMIN, node)
    c.reactor.tick()
    assert c.state(job) == "RUNNING"
    with pytest.raises(SpecError, match="neither drained nor fenced"):
        c.control.resume(ADMIN, node)


def test_nice_is_raised_by_the_owner_and_lowered_by_an_admin(c: Cluster) -> None:
    """Issue 45: `scontrol update JobId=N Nice=V` was refused; Slurm's rule: a user may
    raise a job's nice value (lower its priority), only an administrator lower it."""
    job = c.submit("--gpus=1", "--hold")
    assert c.control.set_nice(ME, job, 50) == [job]
    assert c.store.job(job)["nice"] == 50
    with pytest.raises(PermissionDenied, match="only an administrator may lower"):
        c.control.set_nice(ME, job, 10)
    assert c.control.set_nice(ADMIN, job, -100) == [job]
    with pytest.raises(PermissionDenied):
        c.control.set_nice(BOB, job, 500)  # not Bob's job
    with pytest.raises(SpecError, match="from -10000 to 10000"):
        c.control.set_nice(ADMIN, job, 20000)
    running = c.submit("--gpus=1")
    c.reactor.tick()
    with pytest.raises(SpecError, match="is running: only a pending job's nice value changes"):
        c.control.set_nice(ME, running, 5)
    assert "Nice=-100 by root" in [e["detail"] for e in c.store.events(job)]


def test_an_administrators_hold_is_released_by_an_administrator_only(c: Cluster) -> None:
    """Issue 45: Slurm's JobHeldUser and JobHeldAdmin (Podium said "Held" for both)."""
    mine = c.submit("--gpus=1", "--hold")
    c.reactor.tick()
    assert c.store.job(mine)["reason"] == "JobHeldUser"
    other = c.submit("--gpus=1", "--begin=now+1hour")
    assert c.control.hold(ADMIN, Selection((other,)), True) == [other]
    c.reactor.tick()
    assert c.store.job(other)["reason"] == "JobHeldAdmin"
    with pytest.raises(PermissionDenied, match="only an administrator releases it"):
        c.control.hold(ME, Selection((other,)), False)
    assert c.control.hold(ADMIN, Selection((other,)), False) == [other]
    assert c.control.hold(ME, Selection((mine,)), False) == [mine]  # her own hold: hers
