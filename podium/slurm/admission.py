"""The Slurm backend's admission: Slurm owns nodes, partitions, QoS and accounts.

`podium.spec.build` reads a submission as sbatch would; Slurm checks most of it again
itself, so this module only keeps what reaches sbatch well-formed: names as Slurm
writes them (the empty string is Slurm's default), one node count, and the default
partition's time limit from the cluster config when the job gives none.
"""

from __future__ import annotations

import re

from podium.errors import SpecError
from podium.spec.build import Draft
from podium.spec.values import option_error

_SLURM_NAME_RE = re.compile(r"^[A-Za-z0-9_.@,-]+$")


class SlurmAdmission:
    """The Slurm backend's rules (`podium.spec.build.Admission`)."""

    def admit(self, draft: Draft) -> None:
        """Keep names as given; refuse what sbatch's translation cannot say."""
        out = draft.fields
        if draft.max_nodes != out["nodes"]:
            g = draft.given("nodes")
            assert g is not None
            raise option_error(g, "a node range is not supported: give one count (e.g. --nodes=2)")
        for key in ("partition", "qos", "account"):
            out[key] = draft.options.text(key) or ""
            if out[key] and not _SLURM_NAME_RE.match(out[key]):
                raise SpecError(
                    f"--{key}={out[key]!r}: expected a Slurm name (letters, digits, _.-)"
                )
        out.setdefault("time_limit_s", draft.config.default_partition.default_time_s)
