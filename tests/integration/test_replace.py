"""Replace, don't restart (issue 48): a job with a spare keeps its surviving replicas'
processes when one replica fails (an Xid on its GPU, kill -9, a hung rank); the spare
takes the failed rank's place and heals from a peer (examples/train.py on gloo).
A job that does not take part in the contract is requeued as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Cluster
from tests.polling import poll, wait_until

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STEPS = 120
COMMON = (f"--model gpt --steps {STEPS} --checkpoint-every 1000 --step-time 0.1 "
          "--global-batch 32 --epoch-samples 1024 --report-every 0")  # fmt: skip


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[int, float]:
    """The loss at every step of the same training in one process, without faults."""
    work = tmp_path_factory.mktemp("reference")
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "train.py"), *COMMON.replace("--step-time 0.1", "").split(),
         "--progress", str(work / "ref.jsonl")],
        env=dict(os.environ, PODIUM_CHECKPOINT_DIR=str(work / "ckpt"), RANK="0", WORLD_SIZE="1"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    lines = map(json.loads, (work / "ref.jsonl").read_text().splitlines())
    return {e["step"]: e["loss"] for e in lines if e["event"] == "step"}


def progress(c: Cluster) -> list[dict[str, Any]]:
    path = c.work / "p.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def task_pids(c: Cluster, job: int) -> dict[str, int]:
    pids: dict[str, int] = json.loads((c.home / "jobs" / str(job) / "tasks.json").read_text())
    return pids


def submit_training(c: Cluster, *more: str, spares: int = 1, train: str = "") -> int:
    script = EXAMPLES / "train.py"
    return c.submit(
        "--elastic=2:2", f"--spares={spares}", "--gpus-per-task=1", "--auto-resume=1",
        f"--checkpoint-dir={c.work / 'ckpt'}", "-o", "train-%j.out", *more,
        "--wrap", f"exec {sys.executable} {script} {COMMON} --progress {c.work / 'p.jsonl'} "
        f"--sample-log {c.work / 'samples.jsonl'} {train}", cwd=c.work,
    )  # fmt: skip


def steps_done(c: Cluster) -> int:
    return max((e["step"] for e in progress(c) if e["event"] == "step"), default=0)


def ten_steps(c: Cluster, job: int) -> None:
    """Wait for the training's tenth step; failing, say where the job is and why."""
    try:
        poll(lambda: steps_done(c), lambda n: n >= 10, "ten steps", 120)
    except AssertionError as late:
        shown = c.job(job)
        said = "\n".join(f"{e['time']:.1f} {e['kind']}: {e['detail']}" for e in shown["events"])
        out = c.work / f"train-{job}.out"
        tail = out.read_text()[-2000:] if out.exists() else "(no output)"
        raise AssertionError(f"{late}; job {shown['state']}:\n{said}\n{tail}") from None


def check_healed(c: Cluster, job: int, before: dict[str, int], survivor: str,
                 reference: dict[int, float]) -> dict[str, Any]:  # fmt: skip
    """The job completed in one run, the survivor's process untouched, every step
    trained once, at the loss of a run without faults."""
    poll(lambda: progress(c), lambda p: any(e["event"] == "heal" for e in p), "a heal", 60)
    after = task_pids(c, job)  # while it still runs: its directory goes with the run
    assert after[survivor] == before[survivor], (before, after)
    assert set(after) == set(before) and after != before, (before, after)
    final = c.wait(job, timeout=240)
    out = (c.work / f"train-{job}.out").read_text()
    assert final["state"] == "COMPLETED", out[-3000:]
    if final["restart_count"] != 0:  # why it restarted: the events, one per line
        told = c.job(job)["events"]
        said = "\n".join(f"{e['time']:.1f} {e['kind']}: {e['detail']}" for e in told)
        raise AssertionError(f"restarted {final['restart_count']} times:\n{said}\n{out[-2000:]}")
    events = progress(c)
    heals = [e for e in events if e["event"] == "heal"]
    assert heals, events[-5:]
    got: dict[int, float] = {}
    for e in events:
        if e["event"] == "step":
            assert e["step"] not in got, f"step {e['step']} trained twice"
            got[e["step"]] = e["loss"]
    assert max(abs(got[s] - reference[s]) for s in got) < 1e-3
    trained: dict[tuple[int, int], int] = {}
    for e in map(json.loads, (c.work / "samples.jsonl").read_text().splitlines()):
        key = (e["step"], e["rank"])
        trained[key] = trained.get(key, 0) + 1
    assert max(trained.values()) == 1, [k for k, n in trained.items() if n > 1]
    # The step healed from may be trained and not logged: a survivor finished it and
    # lost its peer in the loss's all-reduce, before its log line.
    assert {s for s, _ in trained} >= set(range(1, STEPS + 1)) - {h["step"] for h in heals}
    shown = c.job(job)
    assert shown["replacements"] and shown["replacements"][0]["replaced"], shown
    return shown


def standbys_ready(c: Cluster, job: int) -> int:
    out = c.work / f"train-{job}.out"
    return out.read_text().count("warm standby ready") if out.exists() else 0


def test_an_xid_on_one_replica_is_replaced_from_the_spare_and_the_spare_refilled(
    make: Callable[..., Cluster], reference: dict[int, float]
) -> None:
    """The Xid'd GPU goes back to the node (fenced) and the free fourth GPU becomes the
    job's new spare, with a standby of its own: a second fault is replaced too."""
    c = make()
    job = submit_training(c)
    ten_steps(c, job)
    poll(lambda: standbys_ready(c, job), lambda n: n >= 1, "the standby", 60)
    before = task_pids(c, job)
    gpus = c.job(job)["gpu_ids"]
    assert len(gpus) == 3  # two replicas and the spare
    c.cli("inject", "xid", "--gpu", str(gpus[1]), "--code", "79", check=True)
    [fourth] = set(range(4)) - set(gpus)
    poll(lambda: c.job(job)["gpu_ids"], lambda held: sorted(held) == sorted(
        [gpus[0], gpus[2], fourth]), "the spare refilled", 60)  # fmt: skip
    poll(lambda: standbys_ready(c, job), lambda n: n >= 2, "the new spare's standby", 60)
    c.cli("inject", "kill", str(job), "--rank", "1", check=True)
    poll(lambda: c.job(job)["replacements"], lambda r: len(r) == 2, "the second replacement")
    shown = check_healed(c, job, before, "0", reference)
    assert shown["replacements"][1]["gpus_to"] == [fourth], shown["replacements"]
    spares = [e["detail"] for e in shown["events"] if e["kind"] == "spares"]
    assert spares and spares[0] == f"gave back GPU {gpus[1]}; new spare GPU {fourth}", spares
    told = shown["replacements"][0]
    assert told["replaced"] == [1] and told["gpus_from"] == [gpus[1]]
    assert told["gpus_to"] == [gpus[2]] and "Xid 79" in told["reason"]
    assert told["warm"] is True  # the spare's standby took the rank: no cold start
    text = c.cli("show", str(job), check=True).stdout
    said = f"replace rank 1 on spare GPU {gpus[2]} (was GPU {gpus[1]}, warm standby): health"
    assert said in text, text


def test_a_killed_store_host_is_replaced_and_the_other_rank_heals(
    make: Callable[..., Cluster], reference: dict[int, float]
) -> None:
    """kill -9 of rank 0, whose process hosts the rendezvous store; a spare without a
    warm standby (--cold-spare): the replacement starts from nothing."""
    c = make()
    job = submit_training(c, train="--cold-spare")
    ten_steps(c, job)
    before = task_pids(c, job)
    c.cli("inject", "kill", str(job), "--rank", "0", check=True)
    shown = check_healed(c, job, before, "1", reference)
    told = shown["replacements"][0]
    assert "rank 0 killed by signal 9" in told["reason"] and told["warm"] is False


def test_a_rank_hung_after_its_peers_finished_is_not_replaced_nor_requeued(
    make: Callable[..., Cluster],
) -> None:
    """Issue 63, item 4: rank 0 trains to its end and exits 0; rank 1 then hangs (in
    its teardown, say). No survivor is left to heal a newcomer, so no spare takes its
    place (it was "replaced" with no survivors, and the newcomer waited 120 s for a
    rendezvous nobody hosted); and the training is done, so it is no fault: the job
    ends FAILED, hung, and is not requeued."""
    c = make()
    trainer = c.work / "ranks.py"
    trainer.write_text(
        "import os, pathlib, time\n"
        "from podium import runtime\n"
        "rank = int(os.environ['RANK'])\n"
        "if rank == 0:\n"
        "    runtime.replace_ready()\n"
        "for step in range(1, 21):\n"
        "    runtime.heartbeat(); runtime.rank_step(step); time.sleep(0.05)\n"
        "if rank == 0:\n"
        f"    pathlib.Path('{c.work}/rank0-done').touch()\n"
        "    raise SystemExit(0)\n"
        "while True:  # rank 1 lingers after the training, beating, until it hangs\n"
        "    runtime.heartbeat(); time.sleep(0.1)\n"
    )
    job = c.submit("--elastic=2:2", "--spares=1", "--gpus-per-task=1", "--auto-resume=1",
                   "--heartbeat-timeout=4", "--wrap", f"exec {sys.executable} {trainer}",
                   cwd=c.work)  # fmt: skip
    wait_until(lambda: (c.work / "rank0-done").exists(), "rank 0's end", 60)
    c.cli("inject", "hang", str(job), "--rank", "1", check=True)
    final = c.wait(job, timeout=60)
    assert (final["state"], final["restart_count"]) == ("FAILED", 0), final
    assert "after every other rank ended with exit 0" in final["reason"], final["reason"]
    shown = c.job(job)
    assert not shown["replacements"] and not shown["lost_gpu_seconds"], shown["lost_gpu_seconds"]


def test_a_job_that_ignores_the_contract_is_requeued_as_before(
    make: Callable[..., Cluster],
) -> None:
    """Spares held, but the job never wrote `ready`: an Xid on its replica stops it
    whole and auto-resume requeues it, avoiding the bad GPU, as without spares."""
    c = make()
    script = c.script(
        f'echo "run $PODIUM_RESTART_COUNT rank $RANK gpus $CUDA_VISIBLE_DEVICES" '
        f">> {c.work}/runs-$PODIUM_JOB_ID\n"
        f"while [ ! -e {c.work}/gate ]; do sleep 0.1; done\n"
    )
    job = c.submit("--elastic=2:2", "--spares=1", "--gpus-per-task=1", "--auto-resume=1",
                   str(script))  # fmt: skip
    runs = c.work / f"runs-{job}"
    wait_until(lambda: runs.exists() and len(runs.read_text().splitlines()) == 2, "both ranks")
    bad = c.job(job)["gpu_ids"][0]
    c.cli("inject", "xid", "--gpu", str(bad), "--code", "79", check=True)
    wait_until(lambda: c.job(job)["restart_count"] == 1, "the requeue", 60)
    wait_until(lambda: len(runs.read_text().splitlines()) == 4, "the second run")
    requeue = [e for e in c.job(job)["events"] if e["kind"] == "requeue"]
    assert requeue and "Xid 79" in requeue[0]["detail"], requeue
    assert not c.job(job)["replacements"]
    second = runs.read_text().splitlines()[2:]
    assert all(f"gpus {bad}" not in line.split("rank")[1] for line in second), second
    (c.work / "gate").touch()
    assert c.wait(job)["state"] == "COMPLETED"
    # Charged as spares, on a line of their own: one replica's GPU of the three held.
    row = next(j for j in json.loads(c.cli("acct", "--json", check=True).stdout)
               if j["job_id"] == job)  # fmt: skip
    spare = next(s for s in row["steps"] if s["step_id"] == "spares")
    assert spare["display_id"] == f"{job}.spares" and spare["ntasks"] == 1
    assert len(spare["gpu_ids"]) == 1 and spare["gpu_seconds"] > 0
    assert abs(spare["gpu_seconds"] - row["gpu_seconds"] / 3) < 0.01 + row["gpu_seconds"] * 1e-3
    assert row["spare_gpu_seconds"] == spare["gpu_seconds"]
    assert f"{job}.spares" in c.cli("acct", check=True).stdout


def test_spares_are_checked_in_one_line(make: Callable[..., Cluster]) -> None:
    c = make()
    for args, words in [
        (["--spares=1", "--gpus=1"], "add --elastic=N:N"),
        (["--elastic=2:2", "--spares=x", "--gpus-per-task=1"], "number of spare replicas"),
        (["--elastic=2:2", "--spares=1"], "give --gpus-per-task"),
    ]:
        bad = c.cli("submit", *args, "--wrap", "true")
        assert bad.returncode != 0 and words in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
