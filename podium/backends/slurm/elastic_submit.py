"""What an elastic job on Slurm carries to its keeper (`elastic_keeper`), fixed at
submission: its sizes, the resize contract's grace and signal, the QoS whose waiting
jobs it shrinks for (those of the cluster config that may preempt its own, as on the
embedded cluster), the config's grow delay, and the #SBATCH lines of one member: a
node of the replica's shape, its output discarded, under the job's name, partition,
QoS, account and time limit."""

from __future__ import annotations

from podium.backends.slurm.translate import sbatch_options
from podium.config.access import ElasticConfig
from podium.config.cluster import ClusterConfig
from podium.jobspec.job import JobSpec


def elastic_exports(spec: JobSpec, config: ClusterConfig) -> dict[str, str]:
    """The keeper's variables for `spec` (empty for a job that is not elastic)."""
    elastic = spec.elastic
    if elastic is None:
        return {}
    qos = spec.qos or config.default_qos
    member = spec.model_copy(
        update={
            "output": "/dev/null", "error": None, "input": None, "open_mode": "truncate",
            "dependencies": (), "kill_on_invalid_dep": False, "array": None, "hold": False,
            "begin_time": None, "comment": None, "mail_types": (), "mail_user": None,
            "signal": None, "requeue": False, "auto_resume": 0, "elastic": None,
        }
    )  # fmt: skip
    return {
        "PODIUM_ELASTIC": f"{elastic.min}:{elastic.max}:{elastic.step}",
        "PODIUM_RESIZE_GRACE": str(elastic.grace_s),
        "PODIUM_RESIZE_SIGNAL": str(elastic.signal),
        "PODIUM_QOS": qos,
        "PODIUM_SHRINK_FOR": ",".join(q.name for q in config.qos if qos in q.preempt),
        "PODIUM_GROW_DELAY": str(int(ElasticConfig.seconds(config.elastic.grow_delay))),
        "PODIUM_MEMBER_SBATCH": "\n".join(f"#SBATCH {o}" for o in sbatch_options(member)),
    }


__all__ = ["elastic_exports"]
